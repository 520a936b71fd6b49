"""GNNGP kernels: blocks, base kernels and the architectures built from them."""
from .architectures import ARCHITECTURES, Architecture
from .base import BASE_KERNELS, BaseKernel
from .blocks import (
    Add, Bias, Block, Conv, Input, Kernel, KernelContext, MixedWeight, ReLU, Scale, Serial, Weight,
    nystrom_root,
)
from .relu import relu_expectation

__all__ = [
    "ARCHITECTURES", "Architecture", "BASE_KERNELS", "BaseKernel", "Add", "Bias", "Block", "Conv",
    "Input", "Kernel", "KernelContext", "MixedWeight", "ReLU", "Scale", "Serial", "Weight",
    "nystrom_root", "relu_expectation",
]
