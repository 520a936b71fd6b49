#!/usr/bin/env bash
# Issue 15: every GPU path of gnngp run, checked and measured on one CUDA machine in one call.
#   usage: bash scripts/gpu_check.sh [OUT] [STAGE...]     STAGE: install five zoo csbm report tests
#          (default: all, in that order; a rerun can name the stages that did not finish, and
#          GNNGP_GPU_TEST_ARGS the tests to run, e.g. the files that failed)
# Writes OUT/env.txt (the card), OUT/results_all.csv (every row), OUT/gpu_report.md and
# OUT/gpu_table.csv (scripts/gpu_report.py), OUT/pytest.log, OUT/stages.log.
#
# Install: the README's command (pip, constraints.txt) where a package index is reachable. On a
# machine without one, e.g. the lent GPU machines of this workplace, whose image has a CUDA torch
# and torch_geometric: set GNNGP_WHEELHOUSE to a folder of wheels for what the image lacks
# (hydra-core, omegaconf, antlr4, the launchers, dask[distributed], dask-jobqueue; built with
# `pip wheel --no-deps` at the versions of constraints.txt) and the project is installed from
# this checkout over the image's torch. Datasets: GNNGP_DATA_MIRROR, as everywhere.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-outputs/gpu_check}"; shift || true
stages=("$@"); [ ${#stages[@]} -eq 0 ] && stages=(install five zoo csbm report tests)
mkdir -p "$out"; out="$(cd "$out" && pwd)"
work="${GNNGP_GPU_WORK:-outputs/gpu_check_runs}"; mkdir -p "$work"
export GNNGP_DATA_ROOT="${GNNGP_DATA_ROOT:-$PWD/data}" PYTHONUNBUFFERED=1
py=python3
if [ -n "${GNNGP_WHEELHOUSE:-}" ]; then export PYTHONPATH="/tmp/gnngp-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"; fi
five="${GNNGP_GPU_DATASETS:-cora,citeseer,pubmed,chameleon,squirrel}"
gpu=cuda; [ -n "${GNNGP_GPU_DRY:-}" ] && gpu=cpu   # a dry run of the script's plumbing on a machine without a GPU

{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
  "$py" -c 'import torch, platform, os; print("torch", torch.__version__, "CUDA", torch.version.cuda, "| python", platform.python_version(), "|", os.cpu_count(), "CPU cores"); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device")'
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

stage() {  # stage NAME TIMEOUT COMMAND...: timed, its exit status logged, never stops the script
  local name=$1 limit=$2; shift 2
  local start=$SECONDS
  timeout "$limit" "$@"; local rc=$?
  echo "stage $name: rc $rc in $((SECONDS - start)) s" | tee -a "$out/stages.log"
}

for s in "${stages[@]}"; do case $s in
  install)
    if [ -n "${GNNGP_WHEELHOUSE:-}" ]; then
      stage install 300 bash -c "$py -m pip install -q --no-index --no-deps --no-compile --target /tmp/gnngp-site '$GNNGP_WHEELHOUSE'/*.whl \
        && $py -m pip install -q --no-index --no-deps --no-build-isolation -e ." > "$out/install.log" 2>&1
    else
      stage install 900 pip install -q -c constraints.txt -e ".[test,launchers,dask,gpytorch]" > "$out/install.log" 2>&1
    fi ;;
  five)   # the paper's five mirrored datasets: GCNGP, GCNGP-X and GCN (100 epochs) on CUDA in one process, then the GPs on the CPU
    stage five 200 "$py" -m gnngp_cli run -m dataset=$five model=gcngp,gcngp_x,gcn device=$gpu runs=3 repeat_deterministic=true \
      progress=false hydra.sweep.dir="$work/five/cuda"
    stage five-cpu 150 "$py" -m gnngp_cli run -m dataset=$five model=gcngp,gcngp_x device=cpu runs=3 repeat_deterministic=true \
      progress=false hydra.sweep.dir="$work/five/cpu" ;;
  zoo)    # every kernel of the zoo on Cora, CUDA and CPU
    stage zoo 150 "$py" -m gnngp_cli run -m dataset=cora model=$("$py" -c 'from gnngp_cli.kernels.architectures import KERNELS; print(",".join(n + s for n in sorted(KERNELS) for s in ("", "_x")))') \
      device=$gpu,cpu progress=false hydra.sweep.dir="$work/zoo" ;;
  csbm)   # GCNGP-X on the 10^6-node csbm, CUDA
    stage csbm 150 "$py" -m gnngp_cli run dataset=csbm_1e6 model=gcngp_x device=$gpu progress=false hydra.run.dir="$work/csbm" ;;
  report)
    stage report 120 "$py" scripts/gpu_report.py "$work" "$out" ;;
  tests)  # the fast suite with every job on CUDA (GNNGP_DEVICE), and the CUDA tests of tests/cli/test_device.py;
          # -v: each result is in the log as it comes, also when the stage runs out of time
    parallel=(); env_threads=()
    if "$py" -c 'import xdist' 2>/dev/null; then
      workers="${GNNGP_GPU_TEST_WORKERS:-12}"; parallel=(-n "$workers")
      threads=$(( $(nproc) / workers )); [ "$threads" -ge 1 ] || threads=1
      env_threads=(OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads)   # no oversubscription of the cores
    else
      parallel=(-o "addopts=-m 'not paper'")   # pyproject's addopts ask for two xdist processes
    fi
    "$py" -c 'import pytest_timeout' 2>/dev/null && parallel+=(--timeout 150)
    stage tests "${GNNGP_GPU_TEST_TIMEOUT:-330}" env "${env_threads[@]}" GNNGP_DEVICE="${GNNGP_GPU_TEST_DEVICE:-cuda}" "$py" -m pytest -v \
      --tb=short -rfE -p no:cacheprovider "${parallel[@]}" ${GNNGP_GPU_TEST_ARGS:-} > "$out/pytest.log" 2>&1
    grep -E "FAILED|ERROR" "$out/pytest.log" | sort | uniq | head -60; tail -3 "$out/pytest.log" ;;
  *) echo "unknown stage $s"; exit 2 ;;
esac; done
cat "$out/stages.log"
