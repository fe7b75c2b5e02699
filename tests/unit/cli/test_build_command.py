"""The BuildKit command line of a build request (golden strings), and the BuildKit cache options: what each
build client gets, what the engine's built-in BuildKit cannot do; bad specs and a bad --jobs refused before
any build."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT
from torchimages.engine import BuildClient, BuildRequest, CacheSpec, build_command, cache_problem

CLASSIC = BuildClient(("docker", "build"), (("DOCKER_BUILDKIT", "1"),))
BUILDX = BuildClient(("docker", "buildx", "build"), ())
REQUEST = BuildRequest(
    context=Path("images/2.13.0-cpu-py3.11-debian12"),
    dockerfile=Path("images/2.13.0-cpu-py3.11-debian12/Dockerfile"),
    target="runtime",
    reference="torchimages-tmp/x:runtime-0123456789",
    secrets=(("pipconf", Path("/tmp/pip.conf")),),
)
BASE = (
    "--file images/2.13.0-cpu-py3.11-debian12/Dockerfile --target runtime --tag torchimages-tmp/x:runtime-0123456789 "
    "--progress plain --secret id=pipconf,src=/tmp/pip.conf"
)
CONTEXT = "images/2.13.0-cpu-py3.11-debian12"


def line(client: BuildClient, request: BuildRequest) -> str:
    return shlex.join(build_command(client, request))


def cached(request: BuildRequest, cache_from: tuple[str, ...] = (), cache_to: tuple[str, ...] = ()) -> BuildRequest:
    return BuildRequest(
        **{
            **request.__dict__,
            "cache_from": tuple(map(CacheSpec.parse, cache_from)),
            "cache_to": tuple(map(CacheSpec.parse, cache_to)),
        }
    )


def test_a_plain_request() -> None:
    assert line(CLASSIC, REQUEST) == f"docker build {BASE} {CONTEXT}"
    assert line(BUILDX, REQUEST) == f"docker buildx build {BASE} {CONTEXT}"


def test_network_and_no_cache() -> None:
    request = BuildRequest(**{**REQUEST.__dict__, "network": "host", "no_cache": True})
    assert line(CLASSIC, request) == f"docker build {BASE} --network host --no-cache {CONTEXT}"


def test_the_classic_client_imports_references_and_exports_inline_through_a_build_argument() -> None:
    request = cached(REQUEST, ("reg:5000/t/pytorch:2.13.0-cpu-runtime", "type=registry,ref=reg/c:1"), ("type=inline",))
    assert line(CLASSIC, request) == (
        f"docker build {BASE} --cache-from reg:5000/t/pytorch:2.13.0-cpu-runtime --cache-from reg/c:1 "
        f"--build-arg BUILDKIT_INLINE_CACHE=1 {CONTEXT}"
    )


def test_buildx_takes_the_specs_as_written() -> None:
    request = cached(REQUEST, ("reg/c:1",), ("type=registry,ref=reg/c:1,mode=max",))
    assert line(BUILDX, request) == (
        f"docker buildx build {BASE} --cache-from type=registry,ref=reg/c:1 "
        f"--cache-to type=registry,ref=reg/c:1,mode=max {CONTEXT}"
    )


def test_the_classic_client_cannot_express_other_types() -> None:
    with pytest.raises(ValueError, match="cannot export a cache of type local"):
        build_command(CLASSIC, cached(REQUEST, cache_to=("type=local,dest=/tmp/c",)))
    with pytest.raises(ValueError, match="cannot import a cache of type local"):
        build_command(CLASSIC, cached(REQUEST, cache_from=("type=local,src=/tmp/c",)))


def test_tag_placeholder_is_replaced_per_image() -> None:
    spec = CacheSpec.parse("type=registry,ref=127.0.0.1:5000/t/pytorch:{tag}")
    assert str(spec.for_tag("2.13.0-cpu-runtime")) == "type=registry,ref=127.0.0.1:5000/t/pytorch:2.13.0-cpu-runtime"
    assert CacheSpec.parse("t/pytorch:{tag}") == spec.__class__("registry", (("ref", "t/pytorch:{tag}"),))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no spaces"),
        (" reg/c:1", "no spaces"),
        ("type=bogus", "unknown cache type 'bogus'"),
        ("type=registry", "needs ref=REF"),
        ("type=registry,ref=Reg/C:1", "capital letters"),
        ("reg/c:bad tag", "no spaces"),
        ("reg/c:-x", "not a valid tag"),
        ("type=inline,,", "not a list of key=value"),
    ],
)
def test_bad_specs_say_why(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        CacheSpec.parse(text)


def test_the_builtin_buildkit_imports_images_and_exports_inline_only() -> None:
    ok_from, ok_to = (CacheSpec.parse("reg/c:{tag}"),), (CacheSpec.parse("type=inline"),)
    assert cache_problem(ok_from, ok_to, builtin=True, client="docker build") is None
    wrong = (CacheSpec.parse("type=registry,ref=reg/c:1"), CacheSpec.parse("type=local,dest=/c"))
    problem = cache_problem((CacheSpec.parse("type=local,src=/c"),), wrong, builtin=True, client="docker build")
    assert problem is not None
    assert problem.startswith(
        "--cache-from type=local,src=/c, --cache-to type=registry,ref=reg/c:1, --cache-to type=local,dest=/c: "
        "docker build builds with the Docker engine's built-in BuildKit"
    )
    assert "docker-container driver" in problem
    assert cache_problem((), wrong, builtin=False, client="docker buildx (docker-container driver)") is None


def test_a_bad_spec_is_refused_before_any_engine_is_asked(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "build", "--log-dir", str(tmp_path), "--cache-to", "type=nope", "*"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"DOCKER_HOST": f"unix://{tmp_path}/no-such.sock", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "--cache-to: unknown cache type 'nope'" in result.stderr and "Traceback" not in result.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("option", "env"),
    [(["--jobs", "0"], {}), (["--jobs=-2"], {}), (["--jobs", "²"], {}), ([], {"TORCHIMAGES_JOBS": "x"})],
)
def test_jobs_must_be_a_whole_number_of_at_least_one(option: list[str], env: dict[str, str], tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "build", "--log-dir", str(tmp_path), *option, "*"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", **env},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    if env:  # the setting is read through torchimages.settings: its message names the variable
        assert "TORCHIMAGES_JOBS='x' must be a positive whole number" in result.stderr
    else:
        assert "argument --jobs:" in result.stderr and "at least 1" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_named_context_and_the_source_date_reach_the_build() -> None:
    """Issue 19: devel's build names the runtime image its `runtime` stage is, and SOURCE_DATE_EPOCH."""
    request = dataclasses.replace(
        REQUEST,
        target="devel",
        contexts=(("runtime", "docker-image://torchimages-tmp/x:runtime-base-0123456789"),),
        build_args=(("SOURCE_DATE_EPOCH", "1795910400"),),
    )
    assert line(BUILDX, request) == (
        "docker buildx build "
        + BASE.replace("--target runtime", "--target devel")
        + " --build-arg SOURCE_DATE_EPOCH=1795910400"
        " --build-context runtime=docker-image://torchimages-tmp/x:runtime-base-0123456789 " + CONTEXT
    )
