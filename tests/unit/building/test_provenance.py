"""What built an image, in its OCI labels: the source URL without credentials, the commit (`-dirty` when tracked
files differ), the creation time from SOURCE_DATE_EPOCH; the same `--label`s in `build` and bake."""

from __future__ import annotations

import dataclasses
import datetime
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from torchimages import compat, settings
from torchimages.building import provenance, requests
from torchimages.building.build_digest import BUILD_DIGEST_LABEL
from torchimages.building.provenance import Provenance
from torchimages.building.wheels import Served
from torchimages.engine import BuildClient, SbomAttestation, build_command
from torchimages.planning import plan

ATTESTED = ("io.torchimages.matrix-entry", "io.torchimages.input-digest")  # test_the_provenance_names_...'s subject


def without_build_digest(labels: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """A build's labels but its build digest (tests/unit/building/test_build_digest.py's subject) and the two its
    provenance attestation names (the test below)."""
    return tuple((k, v) for k, v in labels if k != BUILD_DIGEST_LABEL and k not in ATTESTED)


COMMIT = "0123456789abcdef0123456789abcdef01234567"
SERVED = Served("https://pypi.example/simple", (), (), needs_host_network=False)


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("https://github.com/team/torchimages.git", "https://github.com/team/torchimages"),
        ("https://x-access-token:ghp_SECRET@github.com/team/torchimages.git", "https://github.com/team/torchimages"),
        ("https://oauth2:glpat-SECRET@gitlab.example.org:8443/team/ti/", "https://gitlab.example.org:8443/team/ti"),
        ("https://user@git.example.org/team/ti?private_token=SECRET#main", "https://git.example.org/team/ti"),
        ("git@github.com:team/torchimages.git", "https://github.com/team/torchimages"),
        ("ssh://git@git.example.org:2222/team/ti.git", "https://git.example.org/team/ti"),
        ("git+ssh://git@git.example.org/team/ti", "https://git.example.org/team/ti"),
        ("http://[::1]:3000/team/ti", "http://[::1]:3000/team/ti"),
        ("git://git.example.org/team/ti.git", "git://git.example.org/team/ti"),
        ("  https://github.com/team/ti\n", "https://github.com/team/ti"),
        # a machine's path, or no host: absent, never baked into a label
        ("/home/someone/src/torchimages", None),
        ("../torchimages", None),
        ("file:///home/someone/src/torchimages.git", None),
        ("C:/src/torchimages", None),
        ("https:///team/ti", None),
        ("ftp://git.example.org/team/ti", None),
        ("https://git.example.org/team/ti with space", None),
        ("https://git.example.org:99999/team/ti", None),
        ("", None),
    ],
)
def test_a_source_url_keeps_no_credentials_and_no_local_path(url: str, public: str | None) -> None:
    assert provenance.public_url(url) == public


def test_revision_is_the_commit_and_says_dirty() -> None:
    assert provenance.revision(COMMIT, dirty=False) == COMMIT
    assert provenance.revision(COMMIT, dirty=True) == f"{COMMIT}-dirty"
    assert provenance.revision(None, dirty=True) is None


@pytest.mark.parametrize(
    ("epoch", "text"),
    [(0, "1970-01-01T00:00:00Z"), (1795910400, "2026-11-29T00:00:00Z"), (1700000001, "2023-11-14T22:13:21Z")],
)
def test_created_is_rfc3339_utc_of_source_date_epoch(epoch: int, text: str) -> None:
    assert provenance.created(epoch) == text


def fake_git(answers: dict[tuple[str, ...], str | None]) -> provenance.Git:
    def git(folder: Path, args: Sequence[str]) -> str | None:
        assert folder == Path("repo/images")
        return answers.get(tuple(args))

    return git


HEAD = ("rev-parse", "--verify", "HEAD^{commit}")
STATUS = ("status", "--porcelain", "--untracked-files=no")
ORIGIN = ("remote", "get-url", "origin")


def test_provenance_of_a_clean_checkout() -> None:
    git = fake_git({HEAD: COMMIT, STATUS: "", ORIGIN: "https://ci:SECRET@github.com/team/torchimages.git"})
    found = provenance.of_repository(Path("repo/images"), git=git)
    assert found == Provenance("https://github.com/team/torchimages", COMMIT)


def test_provenance_of_a_dirty_checkout_with_one_remote_not_named_origin() -> None:
    git = fake_git(
        {
            HEAD: COMMIT,
            STATUS: " M images/2.13.0-cpu-py3.11-debian12/Dockerfile",
            ("remote",): "upstream",
            ("remote", "get-url", "upstream"): "git@git.example.org:team/ti.git",
        }
    )
    assert provenance.of_repository(Path("repo/images"), git=git) == Provenance(
        "https://git.example.org/team/ti", f"{COMMIT}-dirty"
    )


def test_provenance_where_git_says_less() -> None:
    nothing = fake_git({})  # no git, or not a repository: nothing known
    assert provenance.of_repository(Path("repo/images"), git=nothing) == Provenance(None, None)
    configured = provenance.of_repository(Path("repo/images"), "https://t:SECRET@h.example.org/a/b.git", nothing)
    assert configured == Provenance("https://h.example.org/a/b", None)
    unreadable = fake_git({HEAD: COMMIT, ORIGIN: "/srv/git/ti.git"})  # status failed: no revision; a path: no source
    assert provenance.of_repository(Path("repo/images"), git=unreadable) == Provenance(None, None)
    two_remotes = fake_git({HEAD: COMMIT, STATUS: "", ("remote",): "a\nb"})
    assert provenance.of_repository(Path("repo/images"), git=two_remotes) == Provenance(None, COMMIT)


def test_a_configured_source_that_is_no_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(ValueError) as refused:
        provenance.of_repository(Path("repo/images"), "/home/someone/SECRET", fake_git({}))
    assert "SECRET" not in str(refused.value)


def test_the_labels_leave_out_what_is_unknown() -> None:
    assert provenance.provenance_labels(Provenance(), 0) == (
        ("org.opencontainers.image.created", "1970-01-01T00:00:00Z"),
    )


MATRIX = """\
repository: example/pytorch
matrix:
  include:
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}
"""


def test_a_build_sets_created_revision_and_source_by_label(write_matrix: Callable[[str], Path]) -> None:
    (chosen,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    image = chosen.combination.image("runtime")
    options = requests.BuildOptions(
        Path("images"),
        Path("logs"),
        source_date_epoch=1700000001,
        provenance=Provenance("https://github.com/team/torchimages", f"{COMMIT}-dirty"),
    )
    request = requests.build_request(
        options, chosen.combination, image, "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml")
    )
    assert without_build_digest(request.labels) == (
        ("org.opencontainers.image.created", "2023-11-14T22:13:21Z"),
        ("org.opencontainers.image.revision", f"{COMMIT}-dirty"),
        ("org.opencontainers.image.source", "https://github.com/team/torchimages"),
    )
    assert ("SOURCE_DATE_EPOCH", "1700000001") in request.build_args  # the same time as the image's Created
    cmd = build_command(BuildClient(("docker", "buildx", "build"), ()), request)
    assert not [part for part in cmd if part.startswith("--sbom")]
    at = cmd.index("--label")
    assert cmd[at : at + 6] == [
        "--label",
        "org.opencontainers.image.created=2023-11-14T22:13:21Z",
        "--label",
        f"org.opencontainers.image.revision={COMMIT}-dirty",
        "--label",
        "org.opencontainers.image.source=https://github.com/team/torchimages",
    ]
    default = requests.build_request(
        requests.BuildOptions(Path("images"), Path("logs")),
        chosen.combination,
        image,
        "tmp/x:1",
        SERVED,
        Path("pip.conf"),
        Path("uv.toml"),
    )
    # the combination's own SOURCE_DATE_EPOCH (the knowledge base's source_date, the Dockerfile's ARG default)
    epoch = chosen.combination.source_date_epoch
    assert without_build_digest(default.labels) == (("org.opencontainers.image.created", provenance.created(epoch)),)
    assert default.build_args == (("SOURCE_DATE_EPOCH", str(epoch)),)


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set the process's time zone (TZ, then time.tzset); the machine's is back afterwards."""

    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Kiritimati", "Etc/GMT+12", "<-0330>3:30"]


@pytest.mark.parametrize("name", ZONES)
def test_created_is_utc_whatever_the_machines_zone(zone: Callable[[str], None], name: str) -> None:
    zone(name)
    assert provenance.created(0) == "1970-01-01T00:00:00Z"
    assert provenance.created(1795910400) == "2026-11-29T00:00:00Z"
    assert provenance.created(1700000001) == "2023-11-14T22:13:21Z"
    kb = compat.load()  # the knowledge base's source_date is a day in UTC: its midnight there, not here
    day = datetime.date.fromisoformat(kb.source_date)
    assert provenance.created(kb.source_date_epoch) == f"{day.isoformat()}T00:00:00Z"


def test_the_provenance_names_the_matrix_entry_and_the_input_digest(write_matrix: Callable[[str], Path]) -> None:
    """buildx's provenance (mode=max) records every `--label` of the build: the matrix entry (its combination)
    and the input digest are passed so, the input digest with the value of the Dockerfile's own LABEL; an
    attached SBOM generator adds the SBOM and the provenance, mode=max, to the command."""
    (chosen,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    image = chosen.combination.image("runtime")
    request = requests.build_request(
        requests.BuildOptions(Path("images"), Path("logs")),
        chosen.combination,
        image,
        "tmp/x:1",
        SERVED,
        Path("pip.conf"),
        Path("uv.toml"),
    )
    labels = dict(request.labels)
    assert labels["io.torchimages.matrix-entry"] == "2.13.0-cpu-py3.11-debian12"
    assert labels["io.torchimages.input-digest"] == image.input_digest
    assert image.input_digest.startswith("sha256:") and len(image.input_digest) == 71
    assert request.sbom_generator == ""
    cmd = build_command(BuildClient(("docker", "buildx", "build"), ()), request)
    assert not [part for part in cmd if part.startswith(("--sbom", "--provenance"))]
    attested = requests.BuildOptions(
        Path("images"), Path("logs"), sbom=SbomAttestation(True, "a test's", "torchimages.invalid/sbom-generator:abc")
    )
    request = requests.build_request(
        attested, chosen.combination, image, "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml")
    )
    cmd = build_command(BuildClient(("docker", "buildx", "build"), ()), request)
    assert cmd[-3:-1] == ["--sbom=generator=torchimages.invalid/sbom-generator:abc", "--provenance=mode=max"]
    classic = build_command(BuildClient(("docker", "build"), (("DOCKER_BUILDKIT", "1"),)), request)
    assert not [part for part in classic if part.startswith(("--sbom", "--provenance"))]
    not_attached = dataclasses.replace(attested, sbom=SbomAttestation(False, "classic store", "torchimages/x:1"))
    assert (
        requests.build_request(
            not_attached, chosen.combination, image, "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml")
        ).sbom_generator
        == ""
    )


def test_a_source_date_epoch_of_0_stays_0(write_matrix: Callable[[str], Path]) -> None:
    """0 is 1970-01-01, a time like any other, not "unset": the build's argument and `created` say it."""
    assert settings.epoch("SOURCE_DATE_EPOCH", {"SOURCE_DATE_EPOCH": "0"}) == 0
    (chosen,) = plan.select(plan.load(write_matrix(MATRIX)), [])
    combination = chosen.combination
    assert combination.source_date_epoch != 0  # else this test could not tell 0 from the default
    options = requests.BuildOptions(Path("images"), Path("logs"), source_date_epoch=0)
    assert options.epoch(combination) == 0
    request = requests.build_request(
        options, combination, combination.image("runtime"), "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml")
    )
    assert request.build_args == (("SOURCE_DATE_EPOCH", "0"),)
    assert without_build_digest(request.labels) == (("org.opencontainers.image.created", "1970-01-01T00:00:00Z"),)


@pytest.mark.parametrize("name", ["UTC", "Asia/Kolkata", "America/Los_Angeles"])
def test_bake_carries_a_source_date_epoch_of_0_in_any_zone(
    cli: Callable[..., tuple[int, str, str]],
    write_matrix: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    zone: Callable[[str], None],
    name: str,
) -> None:
    """From the environment to the bake file: SOURCE_DATE_EPOCH=0 is the targets' argument and `created`."""
    zone(name)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    path = str(write_matrix(MATRIX))
    code, out, err = cli("bake", "--matrix", path, "--secrets-dir", str(tmp_path / "s"))
    assert code == 0, err
    targets = json.loads(out)["target"].values()
    assert targets and all(t["args"]["SOURCE_DATE_EPOCH"] == "0" for t in targets)
    assert all(t["labels"]["org.opencontainers.image.created"] == "1970-01-01T00:00:00Z" for t in targets)
