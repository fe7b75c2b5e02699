#!/usr/bin/env bash
# Run the smoke suites against this machine (testinfra local://) and keep the evidence.
#
#   scripts/validate-host.sh OUTDIR [PYTHON]
#
# PYTHON (default python3) is the interpreter with torch that the suites probe; the suites
# themselves run from the installed torchimages package with $TORCHIMAGES_PYTHON (default: the
# repository's .venv/bin/python, else python3), through `build.py test --host local`.
# Writes OUTDIR/host-spec.json (the facts probe run with PYTHON), OUTDIR/host.txt (date,
# nvidia-smi, GPU topology) and, per run, OUTDIR/log-<run>.txt and OUTDIR/junit-<run>.xml for
# three runs:
#   all-gpus  --suites gpu,multi_gpu --require-gpu over every visible GPU
#   one-gpu   the same with CUDA_VISIBLE_DEVICES=0 (NCCL world size 1)
#   cpu       --suites cpu (informational: a development host is not an image)
# Exit status: that of the all-gpus run. Extra pytest options: PYTEST_ADDOPTS.
set -u -o pipefail

out=${1:?usage: validate-host.sh OUTDIR [PYTHON]}
py=${2:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
tp=${TORCHIMAGES_PYTHON:-$root/.venv/bin/python}
[ -x "$tp" ] || tp=python3
mkdir -p "$out"

# NVLink multicast stays off (shared multi-GPU hosts); the suite sets the same defaults.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
export TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}
export NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS:-1}
export PYTHONUNBUFFERED=1
export PYTEST_ADDOPTS="-rs -v ${PYTEST_ADDOPTS:-}"

{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvidia-smi topo -m
  "$py" -c 'import sys, torch; print(sys.version); print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.nccl.version())'
} >"$out/host.txt" 2>&1

"$tp" -c 'import json, sys
from torchimages.smoke import runner
print(json.dumps(runner.host_document(sys.argv[1], sys.argv[2]), indent=2))' "$py" "$(hostname)-host" >"$out/host-spec.json" || exit 2

run() {
  local name=$1
  shift
  "$tp" "$root/build.py" test --host local --spec "$out/host-spec.json" --python-exe "$py" \
    --junit "$out/junit-$name.xml" "$@" 2>&1 | tee "$out/log-$name.txt"
}

run all-gpus --require-gpu --suites gpu,multi_gpu
status=$?
CUDA_VISIBLE_DEVICES=0 run one-gpu --require-gpu --suites gpu,multi_gpu
one=$?
run cpu --suites cpu
cpu=$?
echo "validate-host: all-gpus exit $status, one-gpu exit $one, cpu exit $cpu"
exit "$status"
