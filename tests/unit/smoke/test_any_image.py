"""`build.py test --image REF`: the spec from an image's labels, the refusals, `--run-arg` and the
`docker run` of a test container (no Docker: a fake engine and pure functions)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import pytest

from tests.fakes import FakeEngine
from torchimages import engine
from torchimages.combination import LABEL_PREFIX
from torchimages.engine import ImageInfo
from torchimages.problems import InputError, UsageError
from torchimages.smoke import document, targets

CUDA_LABELS = {
    **{
        f"{LABEL_PREFIX}.{key}": value
        for key, value in {
            "flavor": "runtime",
            "torch": "2.14.1",
            "torchvision": "0.29.1",
            "torchaudio": "none",
            "cuda": "13.0",
            "cudnn": "9.19.0.56",
            "nccl": "2.28.9",
            "python": "3.11",
            "os": "debian12",
        }.items()
    },
    f"{LABEL_PREFIX}.input-digest": "sha256:abc",
    "org.opencontainers.image.title": "PyTorch 2.14.1 (runtime)",
}


def info(reference: str, labels: dict[str, str], layers: tuple[str, ...] = ("l1",), user: str = "torch") -> ImageInfo:
    return ImageInfo(reference, "sha256:" + reference, labels, {}, user, layers, (reference,))


def specs(fake: FakeEngine, *references: str, spec: Path | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Each image's reference and spec (smoke.targets.image_targets); prints where each spec came from, as
    `build.py test --image` does."""
    found = targets.image_targets(cast(Any, fake), references, targets.read_spec_file(spec) if spec else None)
    for target in found:
        print(target.note)
    return [(str(t.spec["image"]), t.spec) for t in found]


# --- the spec from labels --------------------------------------------------------------


def test_labels_make_a_valid_spec_none_is_null_and_our_labels_are_checked() -> None:
    doc = document.labels_document("team/train:1", CUDA_LABELS, "torch", "580.65.06")
    spec = document.spec_from_dict(doc)
    assert (spec.image, spec.tag, spec.flavor, spec.torch, spec.cuda, spec.cudnn) == (
        "team/train:1",
        "team/train:1",
        "runtime",
        "2.14.1",
        "13.0",
        "9.19.0.56",
    )
    assert spec.torchaudio is None and spec.min_driver == "580.65.06" and spec.user == "torch"
    assert dict(spec.labels) == {k: v for k, v in CUDA_LABELS.items() if k.startswith(LABEL_PREFIX + ".")}
    assert spec.env["NVIDIA_REQUIRE_CUDA"] == "cuda>=13.0"


@pytest.mark.parametrize(("user", "expected"), [("", "torch"), ("1000", "torch"), ("0:0", "torch"), ("app:app", "app")])
def test_the_spec_user_is_the_configured_name_or_ours(user: str, expected: str) -> None:
    assert document.labels_document("x", CUDA_LABELS, user)["user"] == expected


def test_a_cpu_image_has_no_nvidia_environment_and_no_min_driver() -> None:
    labels = {**CUDA_LABELS, f"{LABEL_PREFIX}.cuda": "none", f"{LABEL_PREFIX}.cudnn": "none"}
    doc = document.labels_document("x", {**labels, f"{LABEL_PREFIX}.nccl": "none"})
    assert doc["cuda"] is None and doc["env"] == {} and doc["min_driver"] is None
    assert document.known_min_driver(None) is None


def test_min_driver_comes_from_the_knowledge_base() -> None:
    from torchimages import compat

    assert document.known_min_driver("13.0") == compat.load().cuda["13.0"].minor_compat_min_driver
    assert document.known_min_driver("13.0.2") == compat.load().cuda["13.0"].minor_compat_min_driver
    assert document.known_min_driver("99.9") is None


def test_labels_without_torch_or_with_a_bad_version_are_refused() -> None:
    with pytest.raises(document.SpecError, match=r"no io\.torchimages\.torch"):
        document.labels_document("x", {f"{LABEL_PREFIX}.bootstrap-digest": "sha256:1"})
    with pytest.raises(document.SpecError, match="'torch' must be a dotted version"):
        document.labels_document("x", {**CUDA_LABELS, f"{LABEL_PREFIX}.torch": "2.14.1+cu130"})


# --- smoke.targets.image_targets: labels, --spec, refusals -------------------------------------------


def test_an_image_with_our_labels_is_tested_against_them(capsys: pytest.CaptureFixture[str]) -> None:
    ((reference, doc),) = specs(FakeEngine(images=[info("ours:1", CUDA_LABELS)]), "ours:1")
    assert reference == "ours:1" and doc["torch"] == "2.14.1" and doc["min_driver"]
    out = capsys.readouterr().out
    assert "ours:1: spec read from its io.torchimages.* labels\n" in out


def test_a_derived_image_says_its_labels_are_inherited(capsys: pytest.CaptureFixture[str]) -> None:
    base = info("ours:1", CUDA_LABELS, ("l1", "l2"))
    team = info("team/train:1", CUDA_LABELS, ("l1", "l2", "l3"), user="app")
    ((_, doc),) = specs(FakeEngine(images=[base, team]), "team/train:1")
    assert doc["user"] == "app"
    out = capsys.readouterr().out
    assert "labels (inherited from its base ours:1, sha256:ours:1: it was built FROM one of ours)" in out


def test_a_base_of_several_tags_is_named_by_its_first_tag_and_its_id(capsys: pytest.CaptureFixture[str]) -> None:
    """Identical builds under two repositories are one image of two tags: the note names it the same each time."""
    digest = "sha256:" + "ab" * 32
    base = ImageInfo("zz/ours:1", digest, CUDA_LABELS, {}, "torch", ("l1",), ("zz/ours:1", "aa/ours:1"))
    specs(FakeEngine(images=[base, info("team/train:1", CUDA_LABELS, ("l1", "l2"))]), "team/train:1")
    assert f"(inherited from its base aa/ours:1, {digest[:19]}: it was built" in capsys.readouterr().out


def test_an_image_without_labels_or_spec_is_refused_naming_both_ways() -> None:
    fake = FakeEngine(images=[info("foreign:1", {"maintainer": "x"})])
    with pytest.raises(UsageError) as caught:
        specs(fake, "foreign:1")
    message = str(caught.value)
    assert "foreign:1 has no io.torchimages.* labels" in message
    assert "build it FROM one of our images" in message and "--spec FILE" in message


def test_a_missing_image_is_refused_before_any_runs() -> None:
    with pytest.raises(UsageError, match=r"no such image here: nope:1 \(docker pull it"):
        specs(FakeEngine(images=[info("ours:1", CUDA_LABELS)]), "ours:1", "nope:1")


def test_a_spec_file_is_validated_and_wins_over_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = document.labels_document("whatever", CUDA_LABELS)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(good))
    fake = FakeEngine(images=[info("foreign:1", {}), info("ours:1", CUDA_LABELS)])
    found = specs(fake, "foreign:1", "ours:1", spec=path)
    assert [(r, d["image"]) for r, d in found] == [("foreign:1", "foreign:1"), ("ours:1", "ours:1")]
    assert f"foreign:1: spec read from {path}" in capsys.readouterr().out
    path.write_text(json.dumps({**good, "cudnn": "9"}))
    with pytest.raises(
        InputError, match=r"spec.json: error: the spec file \(--spec\): key 'cudnn' needs at least three"
    ):
        specs(fake, "foreign:1", spec=path)
    path.write_text("{not json")
    with pytest.raises(InputError, match=r"spec.json:1: error: the spec file \(--spec\) is not JSON"):
        specs(fake, "foreign:1", spec=path)


# --- the command line -------------------------------------------------------------------

Cli = Any


def test_selectors_and_image_are_mutually_exclusive(cli: Cli) -> None:
    code, _, err = cli("test", "--image", "team/train:1", "2.14.1-cuda13.0")
    assert code == 2 and "SELECTOR and --image are mutually exclusive" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "local", "--image", "x:1"], "--host local tests this machine"),
        (["--host", "local", "--run-arg=--ipc=host"], "--host local tests this machine"),
        (["--spec", "s.json", "2.14.1-cuda13.0"], "--spec applies to --host local or --image"),
        (["--image", "x:1", "--run-arg=--ulimit 'memlock"], "--run-arg"),
        ([], "name the images to test (SELECTOR... or --image REF)"),
    ],
)
def test_misused_options_are_usage_errors(cli: Cli, args: list[str], message: str) -> None:
    code, _, err = cli("test", *args)
    assert code == 2 and message in err, err


# --- --run-arg and docker run -------------------------------------------------------------


def test_each_run_arg_is_shell_split() -> None:
    assert engine.split_run_args(["--device=/dev/nvidia0", "--ulimit memlock=-1", "-e 'A=b c'"]) == [
        "--device=/dev/nvidia0",
        "--ulimit",
        "memlock=-1",
        "-e",
        "A=b c",
    ]
    with pytest.raises(engine.EngineError, match="No closing quotation"):
        engine.split_run_args(["-e 'A"])


def test_the_docker_run_command_of_a_test_container() -> None:
    cmd = engine.run_command("/usr/bin/docker", "img:1", "c1", gpus=False, shm_size="2g")
    assert cmd == [
        "/usr/bin/docker",
        "run",
        "--detach",
        "--name",
        "c1",
        "--network",
        "none",
        "--shm-size",
        "2g",
        "img:1",
        "sleep",
        "infinity",
    ]
    run_args = ["--device=/dev/nvidia0", "--ipc=host", "--ulimit", "memlock=-1"]
    cmd = engine.run_command("docker", "img:1", "c1", gpus=True, shm_size="8g", run_args=run_args)
    assert cmd[cmd.index("--gpus") + 1] == "all" and cmd[cmd.index("--shm-size") + 1] == "8g"
    assert cmd[-7:] == [*run_args, "img:1", "sleep", "infinity"]


@pytest.mark.parametrize("network", [["--network=host"], ["--network", "bridge"], ["--net=host"], ["--net", "x"]])
def test_a_run_arg_network_replaces_the_default_none(network: list[str]) -> None:
    cmd = engine.run_command("docker", "img:1", "c1", gpus=False, shm_size="2g", run_args=network)
    assert "none" not in cmd and cmd[-3 - len(network) : -3] == network
    assert sum(t.startswith(("--network", "--net")) for t in cmd) == 1
