#!/usr/bin/env bash
# Run the smoke suites against this machine (testinfra local://) and keep the evidence.
#
#   tests/smoke/validate_host.sh OUTDIR [PYTHON]
#
# Writes OUTDIR/host-spec.json (tests/smoke/host_spec.py), OUTDIR/host.txt
# (date, nvidia-smi, GPU topology) and, per run, OUTDIR/log-<run>.txt and
# OUTDIR/junit-<run>.xml for three runs:
#   all-gpus  -m "gpu or multi_gpu" --require-gpu over every visible GPU
#   one-gpu   the same with CUDA_VISIBLE_DEVICES=0 (NCCL world size 1)
#   cpu       -m cpu (informational: a development host is not an image)
# Exit status: that of the all-gpus run. Extra pytest options: PYTEST_ADDOPTS.
set -u -o pipefail

out=${1:?usage: validate_host.sh OUTDIR [PYTHON]}
py=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"

# NVLink multicast stays off (shared multi-GPU hosts); the suite sets the same defaults.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
export NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1}
export PYTHONUNBUFFERED=1

{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  "$py" -c 'import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.nccl.version())'
} >"$out/host.txt" 2>&1

"$py" "$here/host_spec.py" --tag "$(hostname)-host" >"$out/host-spec.json" || exit 2

run() {
  local name=$1
  shift
  "$py" -m pytest "$here" -p no:cacheprovider --hosts=local:// \
    --image-spec "$out/host-spec.json" --python-exe "$py" -rs -v \
    --junitxml "$out/junit-$name.xml" "$@" 2>&1 | tee "$out/log-$name.txt"
}

run all-gpus --require-gpu -m "gpu or multi_gpu"
status=$?
CUDA_VISIBLE_DEVICES=0 run one-gpu --require-gpu -m "gpu or multi_gpu"
one=$?
run cpu -m cpu
cpu=$?
echo "validate_host: all-gpus exit $status, one-gpu exit $one, cpu exit $cpu"
exit "$status"
