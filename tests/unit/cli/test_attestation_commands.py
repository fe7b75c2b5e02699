"""`promote` and `build` through their command lines (issue 46): promote refuses an image without its own SBOM and
provenance attestations unless `--allow-unattested`; a zstd push of attested images says once that it carries
none; a zstd push of several platforms from the containerd store is refused. Against the fake engine (its
`attestations` answers: none kept), no Docker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import CU118_270, FakeEngine
from tests.unit.cli.test_interrupted_build import MATRIX, baked, connecting
from torchimages.planning import plan

Cli = Callable[..., tuple[int, str, str]]


@pytest.mark.parametrize("allow", [False, True])
def test_promote_refuses_unattested_images_unless_allowed(
    cli: Cli, write_matrix: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allow: bool
) -> None:
    fake = FakeEngine(CU118_270)
    connecting(monkeypatch, fake)
    path = write_matrix(MATRIX)
    source = baked(fake, path, tmp_path)
    told = ["--allow-unattested"] if allow else []
    code, out, err = cli(
        "promote", "--matrix", str(path), "--test", "none", "--log-dir", str(tmp_path / "logs"), "--from", source, *told
    )
    if allow:
        assert code == 0, out + err
        assert "2 promoted, 0 failed" in out and len(fake.tagged) == 4
        assert not [call for call, _ in fake.calls if call == "attestations"]
    else:
        assert code == 1, out + err
        assert "0 promoted, 2 failed" in out and fake.tagged == []
        assert (
            "could not read the image's attestations" in out and "(promote --allow-unattested takes it without)" in out
        )


def test_a_zstd_promote_says_it_pushes_no_attestations(
    cli: Cli, write_matrix: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeEngine(CU118_270)
    connecting(monkeypatch, fake)
    monkeypatch.setattr("torchimages.cli.common.check_compression", lambda compression, push: None)
    path = write_matrix(MATRIX.replace("matrix:", "repository: registry.example.org/t/pytorch\nmatrix:"))
    source = baked(fake, path, tmp_path)
    logs = str(tmp_path / "logs")
    _, _, err = cli("promote", "--matrix", str(path), "--test", "none", "--log-dir", logs, "--from", source,
                    "--push", "--compression", "zstd")  # fmt: skip
    assert "Attestations: the zstd push carries none" in err
    _, _, err = cli("promote", "--matrix", str(path), "--test", "none", "--log-dir", logs, "--from", source,
                    "--push", "--compression", "zstd", "--allow-unattested")  # fmt: skip
    assert "Attestations: the zstd push carries none" not in err


def test_a_zstd_push_of_several_platforms_from_the_containerd_store_is_refused(
    write_matrix: Callable[[str], Path],
) -> None:
    from torchimages.cli import common
    from torchimages.problems import UsageError

    text = "matrix:\n  include:\n    - {torch: 2.9.1, cuda: cpu, os: debian12, platforms: [linux/amd64, linux/arm64]}\n"
    chosen = plan.select(plan.load(write_matrix(text)), [])
    with pytest.raises(UsageError, match="cannot be pushed with --compression zstd from the containerd image store"):
        common.check_zstd_platforms(chosen, True, "zstd", True)
    common.check_zstd_platforms(chosen, True, "zstd", False)  # the classic store: its images' own digests
    common.check_zstd_platforms(chosen, True, "gzip", True)
    common.check_zstd_platforms(chosen, False, "zstd", True)
    single = plan.select(plan.load(write_matrix(MATRIX)), [])
    common.check_zstd_platforms(single, True, "zstd", True)
    own = plan.select(plan.load(write_matrix(text)), ["2.9.1-cpu-runtime-arm64", "2.9.1-cpu-devel-arm64"])
    assert [i.platform for s in own for i in s.images] == ["linux/arm64", "linux/arm64"]
    common.check_zstd_platforms(own, True, "zstd", True)  # one platform's own tags, for `join`: no index written here
    runtime = plan.select(plan.load(write_matrix(text)), ["2.9.1-cpu-runtime*"])
    with pytest.raises(UsageError, match="cannot be pushed with --compression zstd"):
        common.check_zstd_platforms(runtime, True, "zstd", True)  # every platform of runtime: its index is written


def test_a_zstd_promote_of_several_platforms_from_the_containerd_store_is_refused_before_anything(
    cli: Cli, write_matrix: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeEngine(CU118_270)
    fake.containerd_store = True
    connecting(monkeypatch, fake)
    monkeypatch.setattr("torchimages.cli.common.check_compression", lambda compression, push: None)
    text = "matrix:\n  include:\n    - {torch: 2.9.1, cuda: cpu, os: debian12, platforms: [linux/amd64, linux/arm64]}\n"
    path = write_matrix(text.replace("matrix:", "repository: registry.example.org/t/pytorch\nmatrix:"))
    source = baked(fake, path, tmp_path)
    code, out, err = cli("promote", "--matrix", str(path), "--test", "none", "--log-dir", str(tmp_path / "logs"),
                         "--from", source, "--push", "--compression", "zstd")  # fmt: skip
    assert code == 2 and "cannot be pushed with --compression zstd from the containerd image store" in err, out + err
    assert fake.tagged == [] and fake.pushed == []


@pytest.mark.parametrize("attached", [True, False])
def test_a_zstd_build_says_it_pushes_no_attestations_where_it_attaches_them(
    cli: Cli, write_matrix: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attached: bool
) -> None:
    from torchimages.engine import SbomAttestation

    fake = FakeEngine(CU118_270)
    fake.sbom = SbomAttestation(attached, "a test's engine", "torchimages.invalid/sbom-generator:0" if attached else "")
    connecting(monkeypatch, fake)
    monkeypatch.setattr("torchimages.cli.common.check_compression", lambda compression, push: None)
    matrix = str(write_matrix(MATRIX.replace("matrix:", "repository: registry.example.org/t/pytorch\nmatrix:")))
    logs = str(tmp_path / "logs")
    _, _, err = cli("build", "--matrix", matrix, "--test", "none", "--log-dir", logs, "--push",
                    "--compression", "zstd", "--no-source-check", "*")  # fmt: skip
    assert ("Attestations: the zstd push carries none" in err) == attached, err
