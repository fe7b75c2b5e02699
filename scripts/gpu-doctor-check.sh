#!/usr/bin/env bash
# On a GPU machine (no Docker needed): `build.py doctor` against selections of the default matrix, then
# the driver check against a hypothetical image whose minimum driver is newer than this machine's, and the GPU
# architectures check against a hypothetical image whose list leaves this machine's GPU out.
# Usage: scripts/gpu-doctor-check.sh   (prints each command, its output and its exit status)
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
run() { echo "\$ $*"; "$@"; echo "exit $?"; echo; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo
run "$PYTHON" build.py doctor '2.14.1-cuda13.0*'
run "$PYTHON" build.py doctor --host-only --require-gpu '2.14.1-cuda13.0*'
run "$PYTHON" build.py doctor --host-only --require-gpu '2.14.1-cuda13.2*'
run "$PYTHON" build.py doctor --host-only --require-gpu '2.7.0-cuda11.8*'
echo "\$ (this machine's facts, an image whose minimum driver is 999.0)"
"$PYTHON" - <<'PY'
from torchimages import doctor
need = doctor.Needs(
    images=(doctor.ImageNeed("hypothetical-cuda99.9-runtime", "99.9", "999.0", "999.0", 1),),
    registry_bases=(),
    bootstrapped_bases=(),
    host_only=True,
    require_gpu=True,
)
check = doctor.check_driver(doctor.gather(need), need)
print(check.status, check.name, check.message, check.fix, sep=" | ")
PY
echo "\$ (this machine's facts, an image whose GPU architectures leave this GPU out: sm_75 sm_80 sm_86)"
"$PYTHON" - <<'PY'
from torchimages import doctor
need = doctor.Needs(
    images=(doctor.ImageNeed("hypothetical-ampere-only-runtime", "13.0", "580.65.06", "580.65.06", 1, archs="sm_75 sm_80 sm_86"),),
    registry_bases=(),
    bootstrapped_bases=(),
    host_only=True,
    require_gpu=True,
)
check = doctor.check_gpu_archs(doctor.gather(need), need)
print(check.status, check.name, check.message, check.fix, sep=" | ")
PY
