"""What the image is built to be: compilers per flavor, a non-root user, labels, NVIDIA_* env."""

from __future__ import annotations

import re
import shlex

import pytest
import testinfra.host
from smoke_docker import inspect_image
from smoke_host import find_nvcc, is_docker
from smoke_spec import SmokeSpec

pytestmark = pytest.mark.cpu

COMPILERS = ("gcc", "cc", "g++", "c++")


def require_flavor(spec: SmokeSpec, flavor: str) -> None:
    if spec.flavor is None:
        pytest.skip("spec has no flavor (a bare host): compiler checks are for images")
    if spec.flavor != flavor:
        pytest.skip(f"{flavor}-only check; this image is {spec.flavor}")


@pytest.mark.parametrize("compiler", [*COMPILERS, "nvcc"])
def test_runtime_has_no_compiler(image_host: testinfra.host.Host, spec: SmokeSpec, compiler: str) -> None:
    require_flavor(spec, "runtime")
    if compiler == "nvcc":
        found = find_nvcc(image_host)
    else:
        found = image_host.run(f"command -v {shlex.quote(compiler)}").stdout.strip()
    assert not found, (
        f"the runtime image contains {compiler} at {found}: runtime images carry no "
        "compilers (that is the devel flavor); remove the package that brings it"
    )


def test_devel_nvcc_matches_cuda(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    require_flavor(spec, "devel")
    if spec.cuda is None:
        pytest.skip("CPU-only devel image: no nvcc expected")
    nvcc = find_nvcc(image_host)
    assert nvcc, "the devel image has no nvcc on PATH or in $CUDA_HOME/bin: install the toolkit"
    output = image_host.run(f"{shlex.quote(nvcc)} --version").stdout
    match = re.search(r"release (\d+\.\d+)", output)
    found = match.group(1) if match else f"unreadable ({output.strip()[-200:]!r})"
    assert found == spec.cuda, (
        f"{nvcc} is CUDA {found} but torch is built for CUDA {spec.cuda}: extensions would "
        "not build or not load; install the toolkit of the wheels' CUDA"
    )


def test_devel_has_gcc(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    require_flavor(spec, "devel")
    result = image_host.run("gcc --version")
    assert result.rc == 0, f"`gcc --version` failed in the devel image ({result.stderr.strip()}): install gcc/g++"


@pytest.fixture(scope="module")
def image_user(image_host: testinfra.host.Host, spec: SmokeSpec) -> testinfra.host.Host:
    if spec.user is None:
        pytest.skip("spec names no default user: not checked")
    return image_host


def test_default_user_is_not_root(image_user: testinfra.host.Host) -> None:
    user = image_user.user()
    assert user.uid != 0, f"the image runs as root ({user.name}): add `USER` with a non-root user"


def test_default_user_name(image_user: testinfra.host.Host, spec: SmokeSpec) -> None:
    name = image_user.user().name
    assert name == spec.user, f"the default user is {name!r}, the spec says {spec.user!r}"


def test_home_is_writable(image_user: testinfra.host.Host) -> None:
    result = image_user.run('f="$HOME/.smoke-write-test.$$" && touch "$f" && rm -f "$f" && echo "$HOME"')
    assert result.rc == 0, (
        f"the default user cannot write its home ({result.stderr.strip()}): create the home folder owned by that user"
    )


def test_labels(image_host: testinfra.host.Host, spec: SmokeSpec) -> None:
    if not spec.labels:
        pytest.skip("spec lists no labels")
    if not is_docker(image_host) or spec.image is None:
        pytest.skip("labels are read from the daemon: needs the docker backend and spec 'image'")
    labels = inspect_image(spec.image).labels
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
