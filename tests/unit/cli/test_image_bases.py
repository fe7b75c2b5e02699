"""`test` and `outdated` judge a built image by the bases it was built on (its `io.torchimages.bases` label)
unless --bases says otherwise, and say a disagreement in one line: an image built with `--bases bootstrap`
needs no `--bases`. The fake engine holds the label as a literal; the plans come from the matrix here."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import FakeEngine
from torchimages import engine as engine_package
from torchimages.building import build_digest
from torchimages.building.wheels import WheelSources
from torchimages.cli import image_bases
from torchimages.combination import BASES_LABEL, INPUT_DIGEST_LABEL
from torchimages.engine import ImageInfo
from torchimages.planning import plan
from torchimages.smoke import runner

Cli = Callable[..., tuple[int, str, str]]
MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: ubuntu24.04, torchvision: none, torchaudio: none}\n"
TAG = "2.13.0-cpu-runtime"
BUILD_DIGEST = build_digest.BUILD_DIGEST_LABEL
BOOTSTRAPPED = {BASES_LABEL: "bootstrap"}  # what `build --bases bootstrap` labels the image with


@pytest.mark.parametrize(
    ("told", "planned", "labels", "bases", "note"),
    [
        (None, "registry", BOOTSTRAPPED, "bootstrap", "judged with --bases bootstrap, as it was built"),
        (None, "registry", {}, None, None),  # no label: the registry's, as planned
        (None, "bootstrap", {}, "registry", "judged with --bases registry, as it was built"),
        (None, "bootstrap", BOOTSTRAPPED, None, None),
        (None, "registry", None, None, None),  # not there: nothing to read
        ("registry", "registry", BOOTSTRAPPED, None, "built with --bases bootstrap (its io.torchimages.bases label)"),
        ("bootstrap", "bootstrap", {}, None, "built with --bases registry (its io.torchimages.bases label)"),
        ("bootstrap", "bootstrap", BOOTSTRAPPED, None, None),
    ],
)
def test_the_label_decides_unless_told_and_a_disagreement_is_said(
    told: str | None, planned: str, labels: dict[str, str] | None, bases: str | None, note: str | None
) -> None:
    found = image_bases.choose(told, planned, labels, "team/torch:x")
    assert found.bases == bases
    if note is None:
        assert found.note is None
    else:
        assert found.note is not None and note in found.note and "\n" not in found.note


def holding(write_matrix: Callable[[str], Path], labels: dict[str, str]) -> tuple[FakeEngine, Path, str]:
    """An engine holding the runtime image with `labels` plus the input and build digests a bootstrap build gives it
    (the build digest's own rules: tests/unit/building/test_build_digest.py)."""
    matrix = write_matrix(MATRIX)
    loaded = plan.load(matrix, os_bases="bootstrap")
    ((combination, image),) = [(c, i) for c, i in loaded.images() if i.own_tag == TAG]
    fake = FakeEngine()
    default = build_digest.settings_of(WheelSources(), combination.source_date_epoch)  # outdated's, unasked
    made = build_digest.of_image(combination, image, loaded.images_dir, (), None, default)  # no base held: no facts
    built = {INPUT_DIGEST_LABEL: image.input_digest, build_digest.BUILD_DIGEST_LABEL: made, **labels}
    fake.add(ImageInfo(image.platform_reference, "sha256:" + "1" * 64, built, {}, "", ()))
    return fake, matrix, image.platform_reference


def test_outdated_on_an_image_built_with_bases_bootstrap_needs_no_bases(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, matrix, reference = holding(write_matrix, BOOTSTRAPPED)
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    code, out, err = cli("outdated", "--matrix", str(matrix), TAG)
    assert code == 0 and f"{reference}: current" in out, out + err
    assert "judged with --bases bootstrap, as it was built" in err
    # its bootstrapped base is not on this engine (a fresh runner): the build digest is not compared, and said
    assert "not scanned: build digest: its base torchimages/bootstrap-ubuntu:24.04 is not on this machine" in out, out
    code, out, err = cli("outdated", "--matrix", str(matrix), "--bases", "registry", TAG)  # told otherwise
    assert code == 1 and f"{reference}: stale" in out and "built on a base bootstrapped" in out, out
    assert "built with --bases bootstrap (its io.torchimages.bases label); judged with --bases registry" in err


def test_test_of_an_image_built_with_bases_bootstrap_needs_no_bases(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, matrix, _ = holding(write_matrix, BOOTSTRAPPED)
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    documents: list[dict[str, Any]] = []

    def suites(engine: Any, document: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        documents.append(dict(document))
        return subprocess.CompletedProcess(["pytest"], 0, "", "")

    monkeypatch.setattr(runner, "run_suites_in_container", suites)
    code, out, err = cli("test", "--matrix", str(matrix), TAG)
    assert code == 0, out + err
    (document,) = documents
    assert document["labels"][BASES_LABEL] == "bootstrap", "the spec is the bootstrap build's"
    assert document["labels"][INPUT_DIGEST_LABEL] == fake.images[document["image"]][INPUT_DIGEST_LABEL]


def test_outdated_on_a_fresh_runner_never_calls_an_image_stale_for_a_base_it_lacks(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: whatever the image's build digest, without its bootstrapped base here what a build now gives is
    not known: not compared (said), never "stale" for that."""
    fake, matrix, reference = holding(write_matrix, {**BOOTSTRAPPED, BUILD_DIGEST: "sha256:" + "e" * 64})
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: fake)
    code, out, err = cli("outdated", "--matrix", str(matrix), TAG)
    assert code == 0 and f"{reference}: current" in out and "is not on this machine" in out, out + err
