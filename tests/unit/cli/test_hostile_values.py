"""Every reference, registry, URL and digest the tool is handed goes through its validator before anything is
written or started: a bad one is exit 2 with a message naming the option, the variable or the file line.

The property tests run main in-process with each value beside a second refusal that comes later (a CA
bundle that is not there, an image mix test refuses), so a valid value never reaches an engine or a build."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from tests.unit.test_values import DIGEST, hostile
from torchimages import engine, values
from torchimages.building import bake
from torchimages.cli.entry import main
from torchimages.planning import plan

# argparse drops an `--option=--` value before any type sees it: the validators are not asked about `--`
as_option = hostile.filter(lambda text: text != "--")

Cli = Callable[..., tuple[int, str, str]]
GOOD = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12}\n"


def run(argv: list[str], environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    """main in-process, argparse's exit included, with `environ` set for the call and no other TORCHIMAGES_*
    setting of the machine (`make test` exports its wheel sources); (status, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    machine = [name for name in os.environ if name.startswith("TORCHIMAGES_")]
    saved = {name: os.environ.get(name) for name in [*machine, *(environ or {})]}
    for name in machine:
        del os.environ[name]
    os.environ.update(environ or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv, prog="build.py")
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None) if value is None else os.environ.__setitem__(name, value)
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        path = Path(name)
        (path / "matrix.yaml").write_text(GOOD)
        yield path


def accepted(validator: Callable[[str, str], object], text: str) -> bool:
    try:
        validator(text, "")
    except values.BadValue:
        return False
    return True


# option -> the validator it goes through (bake's options; --image is test's)
BAKE_OPTIONS = {
    "--temporary-registry": values.registry,
    "--trusted-host": values.host,
    "--find-links": values.wheel_source,
    "--extra-index-url": values.wheel_source,
    "--index-url": values.wheel_source,
    "--base-registry": values.registry,
}


def _env_safe(text: str) -> bool:
    """Whether an environment can hold it: no NUL, and only the surrogates that stand for undecodable bytes."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BAKE_OPTIONS)), as_option)
def test_no_bake_option_value_hurts(option: str, text: str) -> None:
    with folder() as where:
        secrets = where / "secrets"
        argv = ["bake", "--matrix", str(where / "matrix.yaml"), "--secrets-dir", str(secrets)]
        code, out, err = run([*argv, f"{option}={text}", "--ca-cert", str(where / "no-such.pem")])
        event(f"exit {code}")
        assert code == 2 and out == "" and "Traceback" not in err, err
        last = err.splitlines()[-1]
        assert last.isprintable(), last
        if accepted(BAKE_OPTIONS[option], text):
            assert "--ca-cert" in last or "wheel source" in last or "local folder" in err, err
        else:
            assert f"argument {option}: " in last, last
        assert not secrets.exists() and sorted(p.name for p in where.iterdir()) == ["matrix.yaml"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["--cache-from", "--cache-to"]), as_option)
@example("--cache-from", "@0")  # `error: --cache-from: '@0': ...` was said `error: 0': ...` (`error:` a login's start)
def test_no_cache_value_hurts_bake(option: str, text: str) -> None:
    with folder() as where:
        argv = ["bake", "--matrix", str(where / "matrix.yaml"), "--secrets-dir", str(where / "s")]
        code, out, err = run([*argv, f"{option}={text}", "--ca-cert", str(where / "no-such.pem")])
        assert code == 2 and out == "" and "Traceback" not in err, err
        last = err.splitlines()[-1]
        assert last.isprintable() and (last.startswith(f"error: {option}: ") or "--ca-cert" in last), last
        assert not (where / "s").exists()


@settings(max_examples=150, deadline=None)
@given(as_option)
def test_no_image_reference_hurts_test(text: str) -> None:
    """`test --image X SELECTOR` is refused either way (the mix), before any engine: X's own refusal first."""
    code, out, err = run(["test", f"--image={text}", "2.13.0"])
    assert code == 2 and out == "" and "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.isprintable()
    assert ("argument --image: " in last) != accepted(values.reference, text), last


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(
        [
            "TORCHIMAGES_INSECURE_REGISTRIES",
            "TORCHIMAGES_BASE_REGISTRY",
            "TORCHIMAGES_FIND_LINKS",
            "TORCHIMAGES_INDEX_URL",
        ]
    ),
    hostile.filter(_env_safe),
)
def test_no_setting_value_hurts(name: str, text: str) -> None:
    """A registry, host or wheel source setting is refused by name, before the matrix is read."""
    command = ["lock", "--bases"] if name == "TORCHIMAGES_INSECURE_REGISTRIES" else ["bake"]
    code, out, err = run([*command, "--matrix", "/no/such/matrix.yaml"], {name: text})
    assert code == 2 and out == "" and "Traceback" not in err, err
    last = err.splitlines()[-1]
    assert last.isprintable() and (last.startswith(f"error: {name} ") or "/no/such/matrix.yaml" in last), last


def test_each_refusal_names_the_option_and_the_rule(write_matrix: Callable[[str], Path]) -> None:
    matrix = str(write_matrix(GOOD))
    for argv, message in [
        (["test", "--image", "../../etc/passwd"], "argument --image: '../../etc/passwd': not an image reference"),
        (["test", "--image", "a\udcffb"], "a byte that is not UTF-8"),
        (["bake", "--temporary-registry", "a b"], "argument --temporary-registry: 'a b': name a registry"),
        (["bake", "--temporary-registry", "$(id)"], "'$(id)' is not a registry host"),
        (["bake", "--temporary-registry", "https://ghcr.io"], "without a scheme"),
        (["bake", "--temporary-registry", "ghcr.io/../x"], "'..' is not a path component"),
        (["promote", "--from", "m.json", "--temporary-registry", ".."], "argument --temporary-registry"),
        (["bake", "--find-links", "http://:8080/"], "argument --find-links: 'http://:8080/': a URL needs a host"),
        (["build", "--index-url", "ftp://h/", "x"], "argument --index-url: 'ftp://h/'"),
        (["bake", "--trusted-host", "http://h"], "argument --trusted-host"),
        (["build", "--network", "a b", "x"], "argument --network: 'a b': BuildKit runs RUN steps on default"),
        (["bake", "--network", "bridge"], "argument --network: 'bridge'"),
        (["build", "--mirror", "ftp://x y", "x"], "argument --mirror: 'ftp://x y': a mirror is one URL"),
        (["build", "--mirror", "deb http://:1/ bookworm", "x"], "argument --mirror: 'http://:1/': a URL needs a host"),
        (["test", "--shm-size", "banana", "x"], "argument --shm-size: 'banana': a size is a number above zero"),
        (["test", "--shm-size", "0g", "x"], "argument --shm-size: '0g'"),
    ]:
        code, out, err = run([*argv[:1], "--matrix", matrix, *argv[1:]])
        assert code == 2 and out == "" and message in err.splitlines()[-1], err


def test_bake_refuses_the_cache_specs_build_refuses(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    """One parser for both (engine.CacheSpec): what build refuses, bake refuses, before any secret is written."""
    matrix = str(write_matrix(GOOD))
    for spec in ("Reg/C:1", "reg/c:-x", "type=bogus", "type=registry", "reg/../c", "reg/c d"):
        with pytest.raises(ValueError) as parsed:
            engine.CacheSpec.parse(spec)
        code, out, err = run(["bake", "--matrix", matrix, "--secrets-dir", str(tmp_path / "s"), f"--cache-from={spec}"])
        assert code == 2 and out == "", err
        assert f"error: --cache-from: {parsed.value}" in err
        assert not (tmp_path / "s").exists()
    code, out, _ = run(
        ["bake", "--matrix", matrix, "--secrets-dir", str(tmp_path / "s"), "--cache-from=reg/c:{target}"]
    )
    assert code == 0 and '"type=registry,ref=reg/c:2_13_0-cpu-devel"' in out


def test_a_bases_lock_digest_ending_in_a_newline_is_refused(write_matrix: Callable[[str], Path]) -> None:
    """It used to pass `^...$` and split the rendered FROM line in two (a broken Dockerfile, exit 0)."""
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n")
    lock = path.with_name("matrix.bases.lock")
    lock.write_text(json.dumps({"bases": {"ubuntu:22.04": DIGEST + "\n"}}))
    code, out, err = run(["render", "--matrix", str(path)])
    assert code == 2 and out == "" and not (path.parent / "images").exists(), err
    assert err.startswith(f"{lock}:1: error: ubuntu:22.04: 'sha256:"), err
    assert "\\n' is not a sha256:<64 hex> digest" in err, err


@pytest.mark.parametrize("digest", ["sha256:", "sha256:xyz", DIGEST + "\n", DIGEST.upper().replace("SHA", "sha")])
def test_a_metadata_digest_is_a_whole_digest(digest: str, tmp_path: Path) -> None:
    selected = [s for s in plan.select(plan.load(_matrix(tmp_path)), [])][:1]
    metadata = {bake.target_name(i): {"containerimage.digest": digest} for i in selected[0].images}
    with pytest.raises(Exception) as caught:
        bake.baked_images(metadata, selected, "m.json")
    assert "is not a digest (sha256: and 64 lowercase hex digits)" in str(caught.value)


@pytest.mark.parametrize("name", ["../../etc/passwd", "Reg/x:1", "a b", "x\u200b"])
def test_a_metadata_image_name_is_an_image_reference(name: str, tmp_path: Path) -> None:
    selected = [s for s in plan.select(plan.load(_matrix(tmp_path)), [])][:1]
    metadata = {bake.target_name(i): {"image.name": name} for i in selected[0].images}
    with pytest.raises(Exception) as caught:
        bake.baked_images(metadata, selected, "m.json")
    assert "malformed entry: image.name" in str(caught.value) and "not an image reference" in str(caught.value)


def _matrix(tmp_path: Path) -> Path:
    path = tmp_path / "matrix.yaml"
    path.write_text(GOOD)
    return path


def test_a_docker_client_that_is_not_executable_is_called_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "docker"
    plain.write_text("#!/bin/sh\n")
    monkeypatch.setenv("DOCKER", str(plain))
    for find in (engine.find_build_client, engine.find_buildx):
        with pytest.raises(engine.EngineError) as caught:
            find()
        assert f"'{plain}' is not executable" in str(caught.value) and "not found" not in str(caught.value)
    monkeypatch.setenv("DOCKER", str(tmp_path))
    with pytest.raises(engine.EngineError, match="is a folder, not a program"):
        engine.find_build_client()
    monkeypatch.setenv("DOCKER", "no-such-docker-client")
    with pytest.raises(engine.EngineError, match="'no-such-docker-client' was not found on PATH"):
        engine.find_build_client()


def test_the_doctor_says_no_engine_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    code, out, _ = run(["doctor", "--matrix", str(_matrix(tmp_path)), "2.13.0"])
    assert code == 1
    (line,) = [line for line in out.splitlines() if "Docker engine " in line and line.startswith("FAIL")]
    assert line.count("no Docker engine answers") == 1 and f"at unix://{tmp_path}/no-such.sock" in line
    assert out.count("start a Docker engine") == 1, out  # the fix, once
