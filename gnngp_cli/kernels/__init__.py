"""GNNGP kernels: the kernel value, the context the blocks read, the blocks, the numerics,
the exact-evaluation planner, base kernels and the architectures built from them."""
from .architectures import BLOCK_NAMES, KERNELS, LIMITS, Architecture, Parameter, register_kernel
from ..schema import KernelConfig
from .base import BASE_KERNELS, BASE_READS, BaseKernel
from .activations import ACTIVATIONS, ERF, RELU, Activation
from .blocks import Add, Bias, Block, Conv, Elementwise, Input, MixedWeight, ReLU, Scale, Serial, Tangent, Weight
from .context import KernelContext
from .numerics import nystrom_root
from .value import Kernel

__all__ = [
    "BLOCK_NAMES", "KERNELS", "LIMITS", "Architecture", "KernelConfig", "Parameter", "register_kernel", "ACTIVATIONS", "ERF", "RELU", "Activation", "BASE_KERNELS", "BASE_READS",
    "BaseKernel", "Add", "Bias", "Block", "Conv", "Elementwise", "Input", "Kernel", "KernelContext", "MixedWeight", "ReLU", "Scale",
    "Serial", "Tangent", "Weight", "nystrom_root",
]
