#!/usr/bin/env bash
# Run the GPU smoke suites in a Docker container on a GPU machine that has no Docker, no
# registry and no network, with the bundle made by scripts/make-gpu-docker-bundle.sh.
# Run it from the repository root, as root:
#
#   scripts/gpu-container-check.sh BUNDLE OUTDIR
#
# Steps (each prints what it does):
#   1. install the bundle's wheels (pytest-testinfra, docker SDK; requests & co. only if python3
#      lacks them) into a temporary --target; PYTHONPATH = repository root, then that folder
#   2. unpack BUNDLE/docker-bin.tar.xz to a temporary prefix; start dockerd on a private socket,
#      data root, exec root and pid file (log: OUTDIR/dockerd.log); wait <= 60 s for `docker info`
#   3. make a stand-in image from this host's root filesystem with `docker import` (<= 10 min),
#      labelled io.torchimages.* with the host's versions (the repository's facts probe) and its torch's
#      GPU architectures (io.torchimages.cuda.archs),
#      flavor runtime, PATH starting with the bin folder of python3's environment
#   4. `build.py test --image STANDIN --gpus none`, devices passed by hand with --run-arg:
#        host      no container: `build.py test --host local --suites gpu`, its throughput figures
#                  written to OUTDIR/throughput-host.json (TORCHIMAGES_THROUGHPUT_OUT)  -> must pass
#        all       every /dev/nvidia* node, --shm-size 8g        -> must pass
#        one       /dev/nvidia0 and the control nodes, 8g        -> must pass
#        shm64m    every node, --shm-size 64m (Docker's default) -> must FAIL test_dev_shm_is_large_enough
#                                                                  with its --shm-size advice
#        anyuid    every node, 8g, --user 123456:0 (OpenShift: a uid without a passwd entry, group 0;
#                  HOME=/tmp USER=torch, since the stand-in sets neither, as our images do)         -> must pass
#        readonly  every node, 8g, the read-only recipe: --read-only --tmpfs /tmp:exec
#                  --tmpfs /home/torch:exec, HOME=/home/torch (as our images set it)    -> must pass
#        multinode every node, 8g, the multi_node suite: two containers on a network of their own,
#                  torchrun + c10d, gloo (NCCL needs two GPUs: skipped on one)           -> must pass
#        slow      a slowdown planted: every node, 8g, --cpus=$SLOW_CPUS (default 0.5; the CPU-launch-bound
#                  AMP step slows), the throughput tests alone (-k throughput)
#                                                    -> must FAIL test_throughput_equals_the_hosts
#      every container run after `host` compares its throughput with the host's
#      (TORCHIMAGES_THROUGHPUT_REFERENCE=OUTDIR/throughput-host.json: test_throughput_equals_the_hosts):
#      each side measures every figure 9 times (3 probe processes, 3 repeats each), and a figure fails
#      when its median is under the host's median less the wider of 10% and the host's own spread
#      each writes OUTDIR/log-<run>.txt and OUTDIR/junit-<run>.xml
#   5. OUTDIR/summary.txt (passed/skipped/failed per run, GPU, driver, image ID, docker version,
#      NCCL bus bandwidth, throughput figures), then stop dockerd and remove the temporary folders
# Exit status: 0 when every run passed and `shm64m` and `slow` failed as expected; 1 otherwise; 2 when
# the set-up (wheels, engine, facts, import) failed.
#
# Environment (all optional):
#   PYTHON=python3          interpreter with torch: runs build.py and is probed for the labels
#   STANDIN=torchimages-standin:host-runtime   name of the stand-in image
#   RUNS="host all one shm64m anyuid readonly multinode slow"   the runs to do (a subset for a short time slot)
#   SLOW_CPUS=0.5           the `slow` run's docker run --cpus (1 may leave the one Python thread that
#                           launches the kernels its whole CPU: too little slowdown to show)
#   RUN_TIMEOUT=420         seconds per build.py test run
#   DOCKER_DATA_ROOT=DIR    keep the engine's data there (not removed; an existing stand-in image
#                           there is reused, so a second call skips the import); default: temporary
#   DRY_RUN=1               steps 1 and 2, a container of a tiny image (docker-init --version),
#                           print the commands of steps 3 and 4 without running them, stop dockerd
set -u -o pipefail

bundle=${1:?usage: gpu-container-check.sh BUNDLE OUTDIR}
out=${2:?usage: gpu-container-check.sh BUNDLE OUTDIR}
PY=${PYTHON:-python3}
STANDIN=${STANDIN:-torchimages-standin:host-runtime}
RUNS=${RUNS:-host all one shm64m anyuid readonly multinode slow}
SLOW_CPUS=${SLOW_CPUS:-0.5}
RUN_TIMEOUT=${RUN_TIMEOUT:-420}
DRY_RUN=${DRY_RUN:-0}

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
bundle=$(cd "$bundle" && pwd) || exit 2
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
tmp=$(mktemp -d /tmp/gpuchk.XXXXXX) || exit 2
start_time=$(date +%s)

say() { printf '\n[gpu-container-check %4ss] %s\n' "$(($(date +%s) - start_time))" "$*"; }
show() { # print a command (to stderr: stdout may be a pipe), then run it
    {
        printf '+'
        printf ' %q' "$@"
        printf '\n'
    } >&2
    "$@"
}
die() {
    echo "gpu-container-check: error: $*" >&2
    exit 2
}

dockerd_pid=
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    if [ -n "$dockerd_pid" ] && kill -0 "$dockerd_pid" 2>/dev/null; then
        say "stop dockerd (pid $dockerd_pid)"
        kill -TERM "$dockerd_pid"
        for _ in $(seq 1 30); do
            kill -0 "$dockerd_pid" 2>/dev/null || break
            sleep 1
        done
        if kill -0 "$dockerd_pid" 2>/dev/null; then
            echo "dockerd did not stop within 30 s: SIGKILL"
            kill -KILL "$dockerd_pid"
        fi
        wait "$dockerd_pid" 2>/dev/null
    fi
    if [ "${bridge:-none}" != none ]; then
        ip link del "$bridge" 2>/dev/null
    fi
    if grep -q " $tmp/" /proc/mounts; then
        echo "left $tmp in place: something under it is still mounted"
    else
        rm -rf "$tmp"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "repository $root; bundle $bundle; output $out; temporary folder $tmp"
[ "$(id -u)" = 0 ] || die "run as root (dockerd needs it)"
[ -f "$bundle/docker-bin.tar.xz" ] || die "$bundle/docker-bin.tar.xz is missing: make it with scripts/make-gpu-docker-bundle.sh"
[ -f "$bundle/MANIFEST.txt" ] && cp "$bundle/MANIFEST.txt" "$out/bundle-MANIFEST.txt"

# ---- 1. Python packages -------------------------------------------------------------------------
site="$tmp/site"
install_wheels() { # pip --target when the interpreter has pip, else unpack the wheels (all pure or cp312)
    if "$PY" -m pip --version >/dev/null 2>&1; then
        show "$PY" -m pip install --quiet --no-index --no-deps --disable-pip-version-check --target "$site" "$@"
    else
        echo "($PY has no pip: unpacking the wheels into $site)"
        "$PY" -c 'import sys, zipfile
for wheel in sys.argv[2:]:
    print("  unpack", wheel)
    zipfile.ZipFile(wheel).extractall(sys.argv[1])' "$site" "$@"
    fi
}
say "1. install the wheels into $site"
mkdir -p "$site"
install_wheels "$bundle"/wheels/*.whl || die "installing the wheels failed"
if "$PY" -c 'import requests, urllib3' 2>/dev/null; then
    echo "$PY has requests and urllib3: the fallback wheels are not needed"
else
    echo "$PY lacks requests or urllib3: installing the fallback wheels"
    install_wheels "$bundle"/wheels/fallback/*.whl || die "installing the fallback wheels failed"
fi
export PYTHONPATH="$root:$site${PYTHONPATH:+:$PYTHONPATH}"
echo "PYTHONPATH=$PYTHONPATH"
show "$PY" -c 'import docker, requests, testinfra, torchimages, urllib3, importlib.metadata as m
print("docker", docker.__version__, "| pytest-testinfra", m.version("pytest-testinfra"), "| requests", requests.__version__, "| urllib3", urllib3.__version__, "| torchimages from", torchimages.__file__)' ||
    die "the Python packages do not import"

# ---- 2. Docker engine ---------------------------------------------------------------------------
prefix="$tmp/engine"
say "2. unpack the engine into $prefix"
mkdir -p "$prefix"
show tar -C "$prefix" -xJf "$bundle/docker-bin.tar.xz" || die "cannot unpack $bundle/docker-bin.tar.xz"
ls -l "$prefix/bin"
export PATH="$prefix/bin:$PATH"
export DOCKER="$prefix/bin/docker" # the client build.py's `docker run` uses (testinfra's docker backend: PATH)
dockerd_env=()
if ldconfig -p 2>/dev/null | grep -q 'libdevmapper\.so\.1\.02\.1'; then
    echo "libdevmapper.so.1.02.1: found by ldconfig"
else
    echo "libdevmapper.so.1.02.1: not on this host; dockerd gets LD_LIBRARY_PATH=$prefix/lib"
    dockerd_env=(env "LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
fi
if [ -n "${DOCKER_DATA_ROOT:-}" ]; then
    data_root=$DOCKER_DATA_ROOT
    mkdir -p "$data_root" && data_root=$(cd "$data_root" && pwd)
    echo "data root $data_root (kept)"
else
    data_root="$tmp/data-root"
fi
export DOCKER_HOST="unix://$tmp/docker.sock"
say "start dockerd on $DOCKER_HOST (log: $out/dockerd.log)"
# A dockerd with --bridge=none deletes an existing docker0: beside another engine (a dry run on a
# development machine) take a bridge of our own instead, so that engine keeps its network.
bridge=none
if ip link show docker0 >/dev/null 2>&1; then
    bridge="tigpu$$"
    ip link add "$bridge" type bridge || die "cannot make the bridge $bridge"
fi
dockerd_cmd=(dockerd --host "$DOCKER_HOST" --data-root "$data_root" --exec-root "$tmp/exec"
    --pidfile "$tmp/docker.pid" --iptables=false --ip-masq=false --bridge="$bridge" --userland-proxy=false)
printf '+'
printf ' %q' "${dockerd_env[@]}" "${dockerd_cmd[@]}"
printf '\n'
"${dockerd_env[@]}" "${dockerd_cmd[@]}" >"$out/dockerd.log" 2>&1 &
dockerd_pid=$!
up=0
for _ in $(seq 1 60); do
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
        tail -n 30 "$out/dockerd.log"
        die "dockerd exited (see $out/dockerd.log)"
    fi
    if docker info >/dev/null 2>&1; then
        up=1
        break
    fi
    sleep 1
done
if [ "$up" != 1 ]; then
    tail -n 30 "$out/dockerd.log"
    die "docker info did not answer within 60 s (see $out/dockerd.log)"
fi
echo "dockerd answers after $(($(date +%s) - start_time)) s"
docker version >"$out/docker-version.txt" 2>&1
docker info >"$out/docker-info.txt" 2>&1
cat "$out/docker-version.txt"
grep -E 'Storage Driver|Cgroup (Driver|Version)|Runtimes|Default Runtime' "$out/docker-info.txt"

# ---- GPU devices --------------------------------------------------------------------------------
all_devices=()
one_devices=()
for node in /dev/nvidia*; do
    [ -c "$node" ] || continue
    all_devices+=("--run-arg=--device=$node")
    case $node in
        /dev/nvidia0 | /dev/nvidia[!0-9]*) one_devices+=("--run-arg=--device=$node") ;;
    esac
done
gpu_nodes=$(find /dev -maxdepth 1 -name 'nvidia[0-9]*' -type c | wc -l)
say "GPU device nodes: ${#all_devices[@]} nodes, $gpu_nodes GPU(s)"
printf '  %s\n' "${all_devices[@]}"
{
    date -u '+%Y-%m-%d %H:%M:%S UTC'
    nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
    nvidia-smi topo -m
    nvidia-smi
} >"$out/nvidia-smi.txt" 2>&1
head -n 4 "$out/nvidia-smi.txt"

if [ "$DRY_RUN" = 1 ]; then
    say "DRY_RUN: a container of a tiny image (docker-init alone) with --network none"
    mkdir -p "$tmp/tiny"
    cp "$prefix/bin/docker-init" "$tmp/tiny/docker-init"
    show tar -C "$tmp/tiny" -c docker-init | show docker import - torchimages-dryrun:tiny ||
        die "docker import of the tiny image failed"
    show docker run --rm --network none --tmpfs /tmp:exec --shm-size 8g "${all_devices[@]#--run-arg=}" \
        torchimages-dryrun:tiny /docker-init --version || die "the tiny container did not run"
    docker image rm torchimages-dryrun:tiny >/dev/null
fi

# ---- 3. the stand-in image ----------------------------------------------------------------------
say "3. stand-in image $STANDIN from this host's root filesystem"
run_or_print() {
    if [ "$DRY_RUN" = 1 ]; then
        printf '(DRY_RUN, not run) +'
        printf ' %q' "$@"
        printf '\n'
    else
        show "$@"
    fi
}
if [ "$DRY_RUN" = 1 ] && ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "(DRY_RUN: $PY has no torch; example facts)"
    echo '{"torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0", "cuda": "13.0", "cudnn": "9.19.0.56", "nccl": "2.28.9", "python": "3.12", "os": "ubuntu24.04"}' >"$out/host-spec.json"
else
    show "$PY" -c 'import json, sys
from torchimages.smoke import runner
print(json.dumps(runner.host_document(sys.argv[1], "standin-host"), indent=2))' "$PY" >"$out/host-spec.json" ||
        die "the facts probe failed with $PY"
fi
cat "$out/host-spec.json"
# --change options (one a line) and the folders to put in the image, from the facts and python3.
"$PY" - "$out/host-spec.json" "$PY" >"$tmp/image.txt" <<'EOF' || die "cannot derive the labels"
import json, os, subprocess, sys

spec = json.load(open(sys.argv[1]))
labels = {"flavor": "runtime"}
for key in ("torch", "torchvision", "torchaudio", "cuda", "cudnn", "nccl", "python", "os"):
    labels[key] = spec.get(key) or "none"
for key, value in labels.items():
    print(f"change\tLABEL io.torchimages.{key}={value}")
# The GPU architectures as the host's torch lists them: the stand-in promises what it holds, as our images do.
flags = subprocess.run([sys.argv[2], "-c", "import torch; print(torch._C._cuda_getArchFlags())"],
                       capture_output=True, text=True, check=False).stdout.strip()
if flags:
    print(f'change\tLABEL io.torchimages.cuda.archs="{flags}"')
where = subprocess.run([sys.argv[2], "-c", "import os, sys; print(os.path.dirname(sys.executable)); "
                        "print(sys.prefix); print(os.path.realpath(sys.base_prefix))"],
                       capture_output=True, text=True, check=True).stdout.split("\n")
bindir, env_prefix, base_prefix = where[0], where[1], where[2]
standard = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
print(f"change\tENV PATH={bindir}:{standard}")
folders = ["usr", "lib", "lib64", "bin", "sbin", "etc"]
for path in (env_prefix, base_prefix):
    rel = os.path.relpath(path, "/")
    if rel.startswith(".."):
        continue
    if not any(rel == f or rel.startswith(f + "/") for f in folders):
        folders.append(rel)
for folder in folders:
    if os.path.lexists("/" + folder):
        print(f"folder\t{folder}")
EOF
changes=()
folders=()
while IFS=$'\t' read -r kind value; do
    case $kind in
        change) changes+=(--change "$value") ;;
        folder) folders+=("$value") ;;
    esac
done <"$tmp/image.txt"
echo "folders: ${folders[*]}"
printf '  %s\n' "${changes[@]}"

reuse=0
if [ -n "${DOCKER_DATA_ROOT:-}" ] && docker image inspect "$STANDIN" >/dev/null 2>&1; then
    echo "$STANDIN already exists in $data_root: reused, no import"
    reuse=1
fi
if [ "$DRY_RUN" = 1 ]; then
    run_or_print tar -C / --warning=no-file-changed -cf - "${folders[@]}"
    run_or_print timeout 600 docker import "${changes[@]}" - "$STANDIN"
elif [ "$reuse" = 0 ]; then
    echo "tar -C / -cf - ${folders[*]} | timeout 600 docker import ... - $STANDIN   (16 GB, about 2 minutes)"
    tar -C / --warning=no-file-changed -cf - "${folders[@]}" 2>"$out/import-tar.log" |
        timeout 600 docker import "${changes[@]}" - "$STANDIN" >"$out/import.log" 2>&1
    codes=("${PIPESTATUS[@]}")
    echo "tar exit ${codes[0]}, docker import exit ${codes[1]} after $(($(date +%s) - start_time)) s"
    [ "${codes[1]}" = 0 ] || {
        tail -n 20 "$out/import.log" "$out/import-tar.log"
        die "docker import failed (exit ${codes[1]}; 124 = over 10 minutes)"
    }
    [ "${codes[0]}" -le 1 ] || echo "WARNING: tar exit ${codes[0]} (see $out/import-tar.log)"
fi
if [ "$DRY_RUN" != 1 ]; then
    docker image inspect "$STANDIN" >"$out/standin-inspect.json"
    docker image inspect --format 'ID {{.Id}}  size {{.Size}}  created {{.Created}}  digests {{json .RepoDigests}}' \
        "$STANDIN" | tee "$out/standin-image.txt"
    docker image inspect --format '{{json .Config.Labels}}' "$STANDIN"
fi

# ---- 4. the runs --------------------------------------------------------------------------------
export PYTHONUNBUFFERED=1
export PYTEST_ADDOPTS="-rs -v ${PYTEST_ADDOPTS:-}"
declare -A rc=()
host_figures="$out/throughput-host.json"
test_run() { # NAME SHM SUITES RUN-ARGS...
    local name=$1 shm=$2 suites=$3
    shift 3
    local reference=()
    if [ -s "$host_figures" ]; then
        reference=(env "TORCHIMAGES_THROUGHPUT_REFERENCE=$host_figures")
    fi
    say "4. run $name: --shm-size $shm, suites $suites, $# run arg(s) (log: $out/log-$name.txt)"
    local cmd=(timeout "$RUN_TIMEOUT" "${reference[@]}" "$PY" build.py test --image "$STANDIN" --gpus none
        --run-arg=--tmpfs=/tmp:exec "$@" --shm-size "$shm" --suites "$suites" --require-gpu
        --junit "$out/junit-$name.xml")
    if [ "$DRY_RUN" = 1 ]; then
        run_or_print "${cmd[@]}"
        rc[$name]=dry
        return
    fi
    show "${cmd[@]}" 2>&1 | tee "$out/log-$name.txt"
    rc[$name]=${PIPESTATUS[0]}
    echo "run $name: exit ${rc[$name]} (124 = over ${RUN_TIMEOUT} s)"
}
host_run() { # the gpu suite on this machine itself: the throughput figures the containers are held to
    say "4. run host: build.py test --host local --suites gpu (figures: $host_figures; log: $out/log-host.txt)"
    local cmd=(timeout "$RUN_TIMEOUT" env "TORCHIMAGES_THROUGHPUT_OUT=$host_figures" "$PY" build.py test
        --host local --python-exe "$PY" --suites gpu --require-gpu --junit "$out/junit-host.xml")
    if [ "$DRY_RUN" = 1 ]; then
        run_or_print "${cmd[@]}"
        rc[host]=dry
        return
    fi
    show "${cmd[@]}" 2>&1 | tee "$out/log-host.txt"
    rc[host]=${PIPESTATUS[0]}
    echo "run host: exit ${rc[host]}; figures: $(tr -d '\n' <"$host_figures" 2>/dev/null | cut -c1-300)"
}
any_uid=(--run-arg=--user=123456:0 --run-arg=--env=HOME=/tmp --run-arg=--env=USER=torch)
read_only=(--run-arg=--read-only --run-arg=--tmpfs=/home/torch:exec --run-arg=--env=HOME=/home/torch --run-arg=--env=USER=torch)
for name in $RUNS; do
    case $name in
        host) host_run ;;
        all) test_run all 8g gpu,multi_gpu "${all_devices[@]}" ;;
        one) test_run one 8g gpu,multi_gpu "${one_devices[@]}" ;;
        shm64m) test_run shm64m 64m gpu,multi_gpu "${all_devices[@]}" ;;
        anyuid) test_run anyuid 8g gpu,multi_gpu "${all_devices[@]}" "${any_uid[@]}" ;;
        readonly) test_run readonly 8g gpu,multi_gpu "${all_devices[@]}" "${read_only[@]}" ;;
        multinode) test_run multinode 8g multi_node "${all_devices[@]}" ;;
        slow)
            if [ ! -s "$host_figures" ] && [ "$DRY_RUN" != 1 ]; then
                echo "run slow: no host figures ($host_figures): put host before it in RUNS"
                rc[slow]=skipped
                continue
            fi
            PYTEST_ADDOPTS="$PYTEST_ADDOPTS -k throughput" test_run slow 8g gpu "${all_devices[@]}" \
                "--run-arg=--cpus=$SLOW_CPUS"
            ;;
        *) die "RUNS: unknown run '$name' (host, all, one, shm64m, anyuid, readonly, multinode, slow)" ;;
    esac
done

# ---- 5. summary ---------------------------------------------------------------------------------
say "5. summary: $out/summary.txt"
if [ "$DRY_RUN" = 1 ]; then
    echo "DRY_RUN: no summary"
    exit 0
fi
for name in $RUNS; do echo "$name ${rc[$name]}"; done >"$tmp/codes.txt"
"$PY" - "$out" "$tmp/codes.txt" "$gpu_nodes" <<'EOF' | tee "$out/summary.txt"
import os, re, sys
import xml.etree.ElementTree as ET

out, codes_file, gpus = sys.argv[1], sys.argv[2], sys.argv[3]
codes = dict(line.split() for line in open(codes_file) if line.strip())
def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""

print("gpu-container-check summary")
smi = read(os.path.join(out, "nvidia-smi.txt")).splitlines()
print("date:", smi[0] if smi else "?")
print("GPUs (nvidia-smi):", "; ".join(smi[2:2 + max(int(gpus), 1)]) if len(smi) > 2 else "?")
print("stand-in image:", read(os.path.join(out, "standin-image.txt")).strip() or "?")
version = read(os.path.join(out, "docker-version.txt"))
versions = [m.group(1) for m in re.finditer(r"^ *Version: *(\S+)", version, re.M)]
print("docker (client, engine, containerd, runc, docker-init):", ", ".join(versions) or "?")
print()
verdicts = {}
print(f"{'run':8} {'exit':>4} {'tests':>5} {'passed':>6} {'skipped':>7} {'failed':>6} {'errors':>6} {'time s':>7}  verdict")
for name, code in codes.items():
    junit = os.path.join(out, f"junit-{name}.xml")
    counts = dict(tests=0, failures=0, errors=0, skipped=0, time=0.0)
    failed, props, shm_failure, parity_failure = [], [], None, None
    try:
        tree = ET.parse(junit).getroot()
        suites = [tree] if tree.tag == "testsuite" else tree.findall("testsuite")
        for s in suites:
            for key in ("tests", "failures", "errors", "skipped"):
                counts[key] += int(s.get(key, 0))
            counts["time"] += float(s.get("time", 0))
            props += [(p.get("name"), p.get("value")) for p in s.iter("property")]
            for case in s.iter("testcase"):
                bad = case.find("failure")
                if bad is None:
                    bad = case.find("error")
                if bad is not None:
                    message = (bad.get("message") or "") + " " + (bad.text or "")
                    test = case.get("name", "")  # test_x[docker://torchimages-smoke-<id>-<param>]: drop the host
                    test = re.sub(r"docker://torchimages-smoke-[0-9a-f]+-?", "", test).replace("[]", "")
                    failed.append((test, message))
                    if test.split("[")[0] == "test_dev_shm_is_large_enough":
                        shm_failure = message
                    if test.split("[")[0] == "test_throughput_equals_the_hosts":
                        parity_failure = message
    except (OSError, ET.ParseError) as exc:
        failed.append(("(no JUnit)", str(exc)))
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    if name == "shm64m":
        # The test's own assertion (/dev/shm too small, with the --shm-size advice), not the no-GPU
        # failure that every GPU test gives (whose text also carries the shm advice).
        ok = (code != "0" and shm_failure is not None and "--shm-size" in shm_failure
              and "no usable GPU" not in shm_failure)
        verdict = "expected failure: test_dev_shm_is_large_enough failed with its --shm-size advice" if ok \
            else "NOT the expected failure (test_dev_shm_is_large_enough should fail with --shm-size advice)"
        if ok and len(failed) > 1:
            verdict += f"; {len(failed) - 1} other test(s) failed too, listed below"
    elif name == "slow":
        # The planted slowdown: the parity test's own verdict (a figure under the host's bound), not a
        # reference it could not read or a host too noisy to compare with.
        ok = code != "0" and parity_failure is not None and "under the host's median less" in parity_failure
        verdict = "expected failure: test_throughput_equals_the_hosts failed beyond the host's spread" if ok \
            else "NOT the expected failure (test_throughput_equals_the_hosts should fail under the host's bound)"
        if ok and len(failed) > 1:
            verdict += f"; {len(failed) - 1} other test(s) failed too, listed below"
    else:
        ok = code == "0" and not failed and counts["tests"] > 0
        verdict = "passed" if ok else "FAILED"
    verdicts[name] = ok
    print(f"{name:8} {code:>4} {counts['tests']:>5} {passed:>6} {counts['skipped']:>7} {counts['failures']:>6} "
          f"{counts['errors']:>6} {counts['time']:>7.1f}  {verdict}")
    for test, message in failed[:8]:
        expected = {"shm64m": "test_dev_shm_is_large_enough", "slow": "test_throughput_equals_the_hosts"}.get(name)
        note = " (the expected one)" if verdicts[name] and expected and test.startswith(expected) else ""
        print(f"    failed: {test}{note}: {' '.join(message.split())[:240]}")
    if len(failed) > 8:
        print(f"    ... and {len(failed) - 8} more failed (see junit-{name}.xml)")
    for key, value in props:
        if key.startswith(("nccl_busbw", "gpu", "driver", "image_digest", "throughput", "parity")):
            print(f"    {key} = {value}")
    for line in read(os.path.join(out, f"log-{name}.txt")).splitlines():
        if "busbw" in line:
            print("    log:", line.strip())
print()
print("overall:", "OK" if verdicts and all(verdicts.values()) else "NOT OK",
      "(" + ", ".join(f"{k} {'ok' if v else 'not ok'}" for k, v in verdicts.items()) + ")")
sys.exit(0 if verdicts and all(verdicts.values()) else 1)
EOF
status=${PIPESTATUS[0]}
say "done: exit $status"
exit "$status"
