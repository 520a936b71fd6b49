"""The device: no silent fallback to the CPU, GNNGP_DEVICE, and (on a CUDA machine) every
method on CUDA against the CPU. scripts/gpu_check.sh runs this file and the whole fast suite
with GNNGP_DEVICE=cuda on a GPU; without one the CUDA tests are skipped."""
import gc

import pytest
import torch

from gnngp_cli.api import compose, run
from gnngp_cli.cli.messages import group_options
from gnngp_cli.config import validate
from gnngp_cli.errors import ConfigError
from gnngp_cli.runtime import resolve_device, start_job
from helpers import in_process

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU (scripts/gpu_check.sh runs these on one)")
KERNELS = sorted(o for o in group_options("model") if o.endswith("gp") or o.endswith("gp_x") or o in ("rbf", "rbf_x", "composed", "composed_x"))
GNNS = sorted(set(group_options("model")) - set(KERNELS))


def test_cuda_without_a_gpu_is_an_error_never_a_fallback(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="device=cuda but no CUDA device is available; use device=cpu or device=auto"):
        resolve_device("cuda")
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setenv("GNNGP_DEVICE", "cuda")
    with pytest.raises(ConfigError, match=r"device=cuda \(from GNNGP_DEVICE\) but no CUDA device"):
        resolve_device("cuda")


@pytest.mark.skipif(CUDA, reason="the machine has a GPU")
def test_cli_device_cuda_without_a_gpu_is_one_line(tmp_path):   # end to end: a refusal from the command, its exit status
    out = in_process("run", "device=cuda", f"hydra.run.dir={tmp_path}")   # (a fresh process's: tests/cli/test_cli.py, the README's)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == "gnngp: error: device=cuda but no CUDA device is available; use device=cpu or device=auto"


@pytest.mark.skipif(CUDA, reason="the machine has a GPU")
def test_device_cuda_without_a_gpu_makes_no_folder_and_a_sweep_of_it_runs_no_job(tmp_path):
    """A trial: device=cuda here wrote an outputs/<time>/ folder with an error row, and a sweep
    -m gnn=gcn,sgc device=cuda ran and failed each job; device=cuda:1 had no hint of CUDA_VISIBLE_DEVICES."""
    out = in_process("run", "gnn=gcn", "device=cuda", f"hydra.run.dir={tmp_path / 'one'}")
    assert out.returncode == 1 and not (tmp_path / "one").exists()
    out = in_process("run", "-m", "gnn=gcn,sgc", "device=cuda", f"hydra.sweep.dir={tmp_path / 'sweep'}")
    assert out.returncode == 1 and "(sweep job 0:" in out.stderr and not (tmp_path / "sweep").exists()
    out = in_process("run", "device=cuda:1", f"hydra.run.dir={tmp_path / 'two'}")
    assert out.stderr.strip() == ("gnngp: error: device=cuda:1 is not a choice: gnngp runs on one GPU, device=cuda; pick which with "
                                  "CUDA_VISIBLE_DEVICES=1 gnngp run ... device=cuda")


def test_gnngp_device_sets_the_default_and_the_command_line_wins(monkeypatch):
    monkeypatch.setenv("GNNGP_DEVICE", "cpu")
    assert compose([]).device == "cpu"
    assert compose(["device=auto"]).device == "auto"
    monkeypatch.setenv("GNNGP_DEVICE", "gpu")
    with pytest.raises(ConfigError, match=r"the environment variable GNNGP_DEVICE='gpu' \(the default of device\) is not valid "
                                          r"\(did you mean 'cuda'\?\)"):   # named as the environment's (a trial: only device='' was said)
        validate(compose([]))
    monkeypatch.delenv("GNNGP_DEVICE")
    assert compose([]).device == "auto"
    monkeypatch.setenv("GNNGP_DEVICE", "")   # an adversary's: set but empty (GNNGP_DEVICE= in a script) was an error, not unset
    cfg = compose([])
    validate(cfg)
    from gnngp_cli.runtime import resolve_device

    assert cfg.device == "auto" and resolve_device("") == resolve_device("auto")


def test_start_job_on_the_cpu_changes_nothing():
    before = torch.backends.cuda.matmul.allow_tf32
    start_job(torch.device("cpu"))
    assert torch.backends.cuda.matmul.allow_tf32 == before


@needs_cuda
@pytest.mark.parametrize("model", KERNELS)
def test_every_kernel_on_cuda_equals_the_cpu(model):
    """The embedded csbm graph, every kernel (exact and low-rank), in float64: the same metric on
    both devices (in float32 a few near-ties of the class scores can flip: 5 of 2,400 test nodes
    for gcngp_x on an H100; the paper numbers agree in float32, scripts/gpu_check.sh), the row names the device, its peak CUDA memory is counted, TF32 stays off."""
    rows = {device: run([f"model={model}", f"device={device}", "dtype=float64", "progress=false"])[0] for device in ("cpu", "cuda")}
    gpu, cpu = rows["cuda"], rows["cpu"]
    assert gpu["device"].startswith("cuda") and cpu["device"] == "cpu"
    assert gpu["peak_cuda_mb"] > 0 and cpu["peak_cuda_mb"] == 0
    assert abs(gpu["test"] - cpu["test"]) <= 1e-4, (gpu, cpu)
    assert not torch.backends.cuda.matmul.allow_tf32


@needs_cuda
@pytest.mark.parametrize("model", GNNS)
def test_every_gnn_trains_on_cuda(model):
    row = run([f"model={model}", "device=cuda", "gnn.epochs=20", "progress=false"])[0]
    assert row["status"] == "ok" and row["device"].startswith("cuda") and row["peak_cuda_mb"] > 0 and row["test"] > 0.5


@needs_cuda
def test_peak_cuda_memory_is_per_job():
    """A big job, then a small one in the same process: the small one's row has its own peak.
    Both count what the process holds between jobs (cuBLAS's workspaces: about 64 MiB on an
    H100, where a 300-node job's row said 66 MiB): that floor must stay small, and above it the
    small job must be far below the big one."""
    big = run(["model=gcngp", "device=cuda", "dataset.num_nodes=3000", "progress=false"])[0]
    gc.collect()
    floor = torch.cuda.memory_allocated() / 2**20
    small = run(["model=gcngp", "device=cuda", "dataset.num_nodes=300", "progress=false"])[0]
    assert floor < 128, f"{floor:.0f} MiB still allocated after a job"
    assert small["peak_cuda_mb"] - floor < (big["peak_cuda_mb"] - floor) / 4, (small["peak_cuda_mb"], big["peak_cuda_mb"], floor)
