"""What the image is built to be: a non-root user (group 0) owning the venv and able to install into it,
the venv writable by any uid of group 0, no package-manager leftovers, labels, NVIDIA_* env."""

from __future__ import annotations

import json
import shlex

import pytest
import testinfra.host

from torchimages.probes import ScriptResult
from torchimages.smoke import checks
from torchimages.smoke.document import SmokeSpec
from torchimages.smoke.hosts import container_inspect, is_docker, root_host

pytestmark = pytest.mark.cpu

# find's test for a file whose group lacks a permission its owner has (symbolic links aside).
GROUP_LACKS = "! -type l \\( " + " -o ".join(f"\\( -perm -u={p} ! -perm -g={p} \\)" for p in "rwx") + " \\)"

# apt's caches may keep their empty folders, their `lock` files and a `partial` folder.
APT_LEFTOVERS = (
    'for d in /var/cache/apt /var/lib/apt/lists; do [ -d "$d" ] && '
    'find "$d" -mindepth 1 ! -type d ! \\( -name lock -a -type f \\) -print; done; true'
)


def group_unwritable(folders: str, gid: int) -> str:
    """The shell command listing each of `folders` (itself, not what is below) that a uid of group `gid` cannot
    write as its owner does: of another group, or whose group lacks a permission its owner has."""
    return f"find {folders} -maxdepth 0 \\( ! -group {gid} -o {GROUP_LACKS} \\) -print"


@pytest.fixture(scope="module")
def image_user(image_host: testinfra.host.Host, spec: SmokeSpec) -> testinfra.host.Host:
    if spec.user is None:
        pytest.skip("spec names no default user: not checked")
    return image_host


def test_default_user_is_not_root(image_user: testinfra.host.Host) -> None:
    uid = int(image_user.check_output("id -u"))
    name = image_user.run("id -nu").stdout.strip() or "no name"
    assert uid != 0, f"the image runs as root (uid {uid}, {name}): add `USER` with a non-root user"


def test_default_user_name(image_user: testinfra.host.Host, spec: SmokeSpec) -> None:
    uid = image_user.check_output("id -u")
    own = image_user.run(f"id -u {shlex.quote(str(spec.user))}").stdout.strip()
    if own and uid != own:
        pytest.skip(f"the container runs as uid {uid} (docker run --user), not as {spec.user} (uid {own})")
    name = image_user.run("id -nu").stdout.strip()
    assert name == spec.user, f"the default user is {name or 'a uid without a name'!r}, the spec says {spec.user!r}"


def test_home_is_writable(image_user: testinfra.host.Host) -> None:
    result = image_user.run('f="$HOME/.smoke-write-test.$$" && touch "$f" && rm -f "$f" && echo "$HOME"')
    assert result.rc == 0, (
        f"the default user cannot write its home ({result.stderr.strip()}): create the home folder owned by that user"
    )


def require_row(spec: SmokeSpec, name: str) -> None:
    if not checks.expectation(name, spec.flavor, cuda=spec.cuda is not None):
        pytest.skip(checks.reason(name, spec.flavor, cuda=spec.cuda is not None))


def test_no_package_manager_leftovers(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    require_row(spec, "no_package_caches")
    root = root_host(image_host)
    leftovers = root.run(APT_LEFTOVERS).stdout.split()
    homes = {"/root"}
    if spec.user:
        home = root.run(f"getent passwd {shlex.quote(spec.user)} | cut -d: -f6").stdout.strip()
        homes |= {home} if home else set()
    for home in sorted(homes):
        cache = f"{home}/.cache/pip"
        listing = root.run(f"[ -d {shlex.quote(cache)} ] && find {shlex.quote(cache)} -mindepth 1 | head -5").stdout
        leftovers += [f"{cache} ({line})" for line in listing.split()][:5]
    shown = "\n  ".join(leftovers[:20])
    assert not leftovers, (
        f"the image keeps package-manager caches ({len(leftovers)} entries):\n  {shown}\n"
        "Clean them in the same RUN step (rm -rf /var/lib/apt/lists/*; apt-get clean; pip --no-cache-dir "
        "or a BuildKit cache mount for /root/.cache/pip)"
    )


def test_venv_is_owned_by_the_image_user(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    require_row(spec, "venv_writable")
    venv = image_host.file(checks.VENV)
    assert venv.is_directory, f"the image has no {checks.VENV}: the images keep torch in that venv"
    assert (venv.uid, venv.gid) == (checks.VENV_UID, checks.VENV_GID), (
        f"{checks.VENV} is owned by {venv.uid}:{venv.gid}, not {checks.VENV_UID}:{checks.VENV_GID} (the image user, "
        f"group 0 for any uid): COPY --chown={checks.VENV_UID}:{checks.VENV_GID} the venv"
    )
    # What pip needs to install a new package as any uid of group 0 (an image built FROM ours may add files
    # of its own mode; every file of ours is checked by the e2e tests).
    purelib = f"$({checks.VENV}/bin/python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))')"
    folders = f"{checks.VENV} {checks.VENV}/bin {purelib}"
    root = root_host(image_host)
    listing = root.run(group_unwritable(folders, checks.VENV_GID)).stdout
    assert not listing.split(), (
        f"folders of {checks.VENV} that a uid of group {checks.VENV_GID} cannot write (group, or the group's "
        f"permissions less than the owner's):\n  " + "\n  ".join(listing.split()) + "\nchgrp 0 and chmod g=u them"
    )


def test_image_user_installs_into_the_venv(
    image_host: testinfra.host.Host, spec: SmokeSpec, request: pytest.FixtureRequest
) -> None:
    require_row(spec, "venv_writable")
    run: ScriptResult = request.getfixturevalue("venv_install_run")
    payload = run.payload
    assert payload is not None, f"the install probe died before reporting: {run.describe()}"
    if payload.get("read_only"):
        pytest.skip(
            f"{payload['prefix']} is on a read-only file system (docker run --read-only): install at build time, "
            "in a Dockerfile FROM this image"
        )
    assert payload["prefix"] == checks.VENV, (
        f"the image's python is {payload['prefix']}, not the venv {checks.VENV}: put {checks.VENV}/bin first on PATH"
    )
    assert payload["installed"], (
        f"the image user (uid {payload['uid']}) cannot install a wheel into {payload['prefix']}:\n"
        f"{payload.get('install_output', '')}\nMake the venv writable by that user"
    )
    assert payload["uninstalled"], f"the installed test wheel did not uninstall:\n{payload.get('uninstall_output')}"


def test_labels(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    if not spec.labels:
        pytest.skip("spec lists no labels")
    if not is_docker(image_host):
        pytest.skip("labels are read from the container's configuration: needs the docker backend")
    text = container_inspect(image_host, "{{json .Config.Labels}}")
    assert text, "cannot read the container's labels (docker inspect)"
    labels = json.loads(text) or {}
    wrong = {key: (labels.get(key), value) for key, value in spec.labels.items() if labels.get(key) != value}
    listing = "\n".join(f"  {k}: found {found!r}, expected {want!r}" for k, (found, want) in wrong.items())
    assert not wrong, f"image {spec.image} has wrong or missing labels:\n{listing}"


def test_environment(host: testinfra.host.Host, spec: SmokeSpec) -> None:
    if not spec.env:
        pytest.skip("spec lists no environment variables")
    environment = host.environment()
    wrong = {key: (environment.get(key), value) for key, value in spec.env.items() if environment.get(key) != value}
    listing = "\n".join(f"  {k}: found {found!r}, expected {want!r}" for k, (found, want) in wrong.items())
    assert not wrong, f"environment variables differ from the spec (set them with ENV):\n{listing}"
