"""`--sign-key` and `verify-signature` (cosign): the command lines (a digest only, no transparency log, plain
HTTP for a registry on this machine alone), the password only in the environment, cosign's failures, time
limit and interrupt as problems, the builder signing each pushed digest (a failed signature fails the image,
saying its tags were pushed), and the refusals before anything starts. cosign and docker are shell scripts."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages import engine as engine_package
from torchimages.building.builder import Builder
from torchimages.building.requests import BuildOptions
from torchimages.engine import ImageInfo
from torchimages.planning import plan
from torchimages.security import signing
from torchimages.security.signing import Signer

Cli = Callable[..., tuple[int, str, str]]
DIGEST = "sha256:" + "ab" * 32
LOCAL = f"127.0.0.1:5000/team/pytorch@{DIGEST}"
REMOTE = f"registry.example.com/team/pytorch@{DIGEST}"
INSECURE = ["--allow-insecure-registry", "--allow-http-registry"]
MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"


def programs(folder: Path, **scripts: str) -> Path:
    """A folder holding these programs (name: shell script)."""
    folder.mkdir(exist_ok=True)
    for name, script in scripts.items():
        (folder / name).write_text("#!/bin/sh\n" + script)
        (folder / name).chmod(0o755)
    return folder


def test_a_digest_is_signed_with_the_key_and_no_transparency_log() -> None:
    key = Path("/keys/cosign.key")
    assert signing.sign_command("cosign", key, REMOTE) == [
        "cosign",
        "sign",
        "--key",
        "/keys/cosign.key",
        "--yes",
        "--tlog-upload=false",
        REMOTE,
    ]
    assert signing.sign_command("cosign", key, LOCAL)[-3:] == [*INSECURE, LOCAL]


@pytest.mark.parametrize(
    "reference",
    ["127.0.0.1:5000/team/pytorch:2.13.0", "team/pytorch@sha256:abc", f"team/pytorch@sha512:{'ab' * 32}"],
)
def test_a_tag_is_never_signed(reference: str) -> None:
    with pytest.raises(ValueError, match="only a digest is signed"):
        signing.sign_command("cosign", Path("k"), reference)
    assert Signer(Path("k")).sign(reference) == [
        f"{reference}: only a digest is signed (repository@sha256:...), never a tag"
    ]


def test_verification_ignores_the_transparency_log_and_reads_json() -> None:
    assert signing.verify_command("cosign", Path("cosign.pub"), "localhost:5000/a:1") == [
        "cosign",
        "verify",
        "--key",
        "cosign.pub",
        "--insecure-ignore-tlog=true",
        *INSECURE,
        "--output",
        "json",
        "localhost:5000/a:1",
    ]
    assert "--allow-http-registry" not in signing.verify_command("cosign", Path("p"), REMOTE)


@pytest.mark.parametrize(
    ("reference", "loopback"),
    [
        ("127.0.0.1:5000/a@x", True),
        ("127.1.2.3/a:1", True),
        ("localhost:5000/a:1", True),
        ("localhost/a", True),
        ("[::1]:5000/a:1", True),
        ("registry.example.com/a:1", False),
        ("127.0.0.1.example.com/a:1", False),
        ("localhost", False),  # a repository on Docker Hub, no registry named
        ("team/localhost:1", False),
    ],
)
def test_plain_http_is_allowed_for_a_registry_on_this_machine_alone(reference: str, loopback: bool) -> None:
    assert signing.is_loopback(reference) is loopback


def recorder(tmp_path: Path, status: int = 0, stderr: str = "") -> tuple[Path, Path]:
    """A cosign that writes its arguments, whether it saw the password in its environment and whether its
    standard input is a terminal, then exits `status` saying `stderr`."""
    said = tmp_path / "said"
    script = (
        f'printf "%s\\n" "$@" > {said}\n'
        f'echo "password=${{COSIGN_PASSWORD-unset}}" >> {said}\n'
        f"[ -t 0 ] && echo tty >> {said}\n"
        f"printf '{stderr}\\n' >&2\n"
        f"exit {status}\n"
    )
    return programs(tmp_path / "bin", cosign=script) / "cosign", said


def test_the_password_reaches_cosign_in_its_environment_never_its_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSIGN_PASSWORD", "s3cret-words")
    cosign, said = recorder(tmp_path)
    assert Signer(tmp_path / "cosign.key", cosign=str(cosign)).sign(LOCAL) == []
    lines = said.read_text().splitlines()
    assert lines[:-1] == signing.sign_command(str(cosign), tmp_path / "cosign.key", LOCAL)[1:]
    assert lines[-1] == "password=s3cret-words"  # and no `tty`: cosign can never prompt
    assert not any("s3cret" in line for line in lines[:-1])


def test_a_failed_signature_is_a_problem_naming_cosigns_error(tmp_path: Path) -> None:
    why = "signing [x]: reading key: decrypt: encrypted: decryption failed"
    cosign, _ = recorder(tmp_path, 1, f"Error: {why}\\nerror during command execution: decryption failed")
    (problem,) = Signer(Path("k"), cosign=str(cosign)).sign(LOCAL)
    assert problem == f"{LOCAL}: not signed: cosign sign failed: {why}"


def test_no_cosign_is_a_problem_not_a_traceback(tmp_path: Path) -> None:
    (problem,) = Signer(Path("k"), cosign=str(tmp_path / "no-cosign")).sign(LOCAL)
    assert problem.startswith(f"{LOCAL}: not signed: cosign sign `{tmp_path / 'no-cosign'}` could not be run:"), problem


def test_a_cosign_that_hangs_is_stopped_at_its_time_limit_or_the_interrupt(tmp_path: Path) -> None:
    cosign = programs(tmp_path / "bin", cosign="exec sleep 30\n") / "cosign"
    (late,) = Signer(Path("k"), cosign=str(cosign), timeout_s=0.5).sign(LOCAL)
    assert late == f"{LOCAL}: not signed: cosign sign no answer within 0.5 s", late
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    assert Signer(Path("k"), cosign=str(cosign)).sign(LOCAL, cancelled) == [
        f"{LOCAL}: not signed: cosign sign interrupted"
    ]


def verified_json(*digests: str) -> str:
    return json.dumps(
        [{"critical": {"identity": {"docker-reference": "r"}, "image": {"docker-manifest-digest": d}}} for d in digests]
    )


def test_verify_reports_the_digest_the_signature_is_for(tmp_path: Path) -> None:
    cosign = programs(tmp_path / "bin", cosign=f"echo '{verified_json(DIGEST, DIGEST)}'\n") / "cosign"
    found = signing.verify("127.0.0.1:5000/team/pytorch:1", Path("cosign.pub"), str(cosign))
    assert found == signing.Verified(True, DIGEST, f"127.0.0.1:5000/team/pytorch:1: verified with cosign.pub: {DIGEST}")


def test_no_matching_signature_is_not_verified(tmp_path: Path) -> None:
    cosign, _ = recorder(
        tmp_path, 12, "WARNING: Skipping tlog verification\\nError: no matching signatures: invalid signature"
    )
    found = signing.verify("a/b:1", Path("cosign.pub"), str(cosign))
    assert found == signing.Verified(False, None, "a/b:1: not verified: no matching signatures: invalid signature")


@pytest.mark.parametrize(
    "output", [b"", b"[]", b"{}", b"not json", verified_json(DIGEST, "sha256:" + "cd" * 32).encode()]
)
def test_output_naming_no_single_digest_names_none(output: bytes) -> None:
    assert signing.signed_digest(output) is None


@dataclass(frozen=True)
class RecordingSigner(Signer):
    """Records what it is asked to sign; refuses with `refusal` when given."""

    refusal: str = ""
    signed: list[str] = field(default_factory=list, compare=False, hash=False)

    def sign(self, reference: str, cancelled: threading.Event | None = None) -> list[str]:
        self.signed.append(reference)
        return [f"{reference}: not signed: {self.refusal}"] if self.refusal else []


def build(
    write_matrix: Callable[[str], Path], tmp_path: Path, signer: Signer, engine: FakeEngine | None = None
) -> tuple[FakeEngine, list[str], list]:  # type: ignore[type-arg]
    from tests.unit.building.test_builder import HOLDS

    selected = plan.select(plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n")), [])
    engine = engine or FakeEngine(HOLDS["2.7.0"])
    options = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs", push=True, signer=signer)
    outcomes = Builder(engine, options, out=lambda _: None).build(selected)
    return engine, [f"{i.repository}@{engine.manifests[i.reference]}" for s in selected for i in s.images], outcomes


def test_each_pushed_image_is_signed_by_its_pushed_digest(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    signer = RecordingSigner(Path("cosign.key"))
    _, digests, outcomes = build(write_matrix, tmp_path, signer)
    assert [o.status for o in outcomes] == ["built", "built"], [o.detail for o in outcomes]
    assert sorted(signer.signed) == sorted(digests) and all("@sha256:" in r for r in signer.signed)


def test_a_failed_signature_fails_the_image_and_says_its_tags_were_pushed(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    engine, _, outcomes = build(
        write_matrix, tmp_path, RecordingSigner(Path("cosign.key"), refusal="cosign sign failed: x")
    )
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for o in outcomes:
        assert "pushed, not signed: the registry holds its tags without a signature" in o.detail, o.detail
        assert "cosign sign failed: x" in o.detail
    assert engine.pushed  # the tags are there: the outcome says so rather than pretend otherwise


class Forgetful(FakeEngine):
    """An engine that pushes, but records no digest of what it pushed (no RepoDigests)."""

    def inspect(self, reference: str) -> ImageInfo | None:
        found = super().inspect(reference)
        return dataclasses.replace(found, repo_digests=()) if found else None


def test_a_pushed_image_whose_digest_the_engine_did_not_record_is_pushed_not_signed(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    from tests.unit.building.test_builder import HOLDS

    signer = RecordingSigner(Path("cosign.key"))
    engine, _, outcomes = build(write_matrix, tmp_path, signer, Forgetful(HOLDS["2.7.0"]))
    assert [o.status for o in outcomes] == ["failed", "failed"]
    for o in outcomes:
        said = f"{o.image.reference}: pushed, not signed: the registry holds its tags without a signature"
        assert f"{said} (the engine recorded no digest of it)" in o.detail, o.detail
    assert signer.signed == [] and engine.pushed  # nothing signed, and the outcome says the tags are there


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeEngine:
    (tmp_path / "matrix.yaml").write_text(MATRIX)
    (tmp_path / "meta.json").write_text('{"2_13_0-cpu-devel": {}, "2_13_0-cpu-runtime": {}}')
    (tmp_path / "cosign.key").write_text("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COSIGN_PASSWORD", "pw")
    engine = FakeEngine()
    monkeypatch.setattr(engine_package, "DockerEngine", lambda docker_cli=None: engine)
    return engine


COMMANDS = [["build"], ["promote", "--from", "meta.json"]]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_sign_key_without_push_is_refused_before_anything(cli: Cli, fake: FakeEngine, command: list[str]) -> None:
    code, _, err = cli(*command, "--sign-key", "cosign.key", "--log-dir", "logs", "*")
    assert code == 2 and "--sign-key cosign.key: only a pushed image is signed" in err and "add --push" in err, err
    assert fake.calls == [] and not Path("logs").exists()


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("missing.key", "missing.key"),
        ("awskms:///alias/k", "a cosign key file is taken, not a URI"),
        (".", "directory"),
    ],
)
def test_a_key_that_is_no_readable_file_is_refused_before_anything(
    cli: Cli, fake: FakeEngine, command: list[str], key: str, said: str
) -> None:
    code, _, err = cli(*command, "--push", "--sign-key", key, "--log-dir", "logs", "*")
    assert code == 2 and said in err, err
    assert fake.calls == [] and not Path("logs").exists()


@pytest.mark.parametrize("command", COMMANDS)
def test_no_cosign_or_no_password_is_refused_before_anything(
    cli: Cli, fake: FakeEngine, command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(programs(tmp_path / "bin")))
    code, _, err = cli(*command, "--push", "--sign-key", "cosign.key", "--log-dir", "logs", "*")
    assert code == 2 and "cosign is not installed" in err and "trixie" in err, err
    monkeypatch.delenv("COSIGN_PASSWORD")
    code, _, err = cli(*command, "--push", "--sign-key", "cosign.key", "--log-dir", "logs", "*")
    assert code == 2 and "set COSIGN_PASSWORD to its password" in err, err
    assert fake.calls == [] and not Path("logs").exists()


def test_a_key_cosign_cannot_open_is_refused_before_anything(
    cli: Cli, fake: FakeEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = "echo 'Error: reading key: decrypt: encrypted: decryption failed' >&2; exit 1\n"
    monkeypatch.setenv("PATH", f"{programs(tmp_path / 'bin', cosign=bad)}:/usr/bin:/bin")
    code, _, err = cli("build", "--push", "--sign-key", "cosign.key", "--log-dir", "logs", "*")
    assert code == 2 and "cosign could not open it with $COSIGN_PASSWORD: reading key: decrypt" in err, err
    assert "pw" not in err.split("COSIGN_PASSWORD")[-1]
    assert fake.calls == [] and not Path("logs").exists()


def test_join_refuses_a_missing_key_before_the_engine(cli: Cli, fake: FakeEngine, tmp_path: Path) -> None:
    entry = "{torch: 2.10.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, "
    entry += "platforms: [linux/amd64, linux/arm64]}"
    two = f"matrix:\n  include:\n    - {entry}\n"
    (tmp_path / "matrix.yaml").write_text(two)
    code, _, err = cli("join", "--sign-key", "missing.key", "*")
    assert code == 2 and "missing.key" in err, err
    assert fake.calls == []


@pytest.mark.parametrize(
    ("script", "code", "said"),
    [
        (f"echo '{verified_json(DIGEST)}'\n", 0, f"127.0.0.1:5000/a/b:1: verified with cosign.pub: {DIGEST}"),
        (
            "echo 'Error: no signatures found' >&2; exit 10\n",
            1,
            "127.0.0.1:5000/a/b:1: not verified: no signatures found",
        ),
        ("echo 'Error: no matching signatures: x' >&2; exit 12\n", 1, "not verified: no matching signatures: x"),
    ],
)
def test_verify_signature_says_the_digest_verified_or_why_not(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, code: int, said: str
) -> None:
    monkeypatch.setenv("PATH", f"{programs(tmp_path / 'bin', cosign=script)}:/usr/bin:/bin")
    (tmp_path / "cosign.pub").write_text("-----BEGIN PUBLIC KEY-----\n")
    monkeypatch.chdir(tmp_path)
    status, out, err = cli("verify-signature", "127.0.0.1:5000/a/b:1", "--key", "cosign.pub")
    assert status == code and said in out, out + err


def test_verify_signature_refuses_bad_input_with_exit_2(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("verify-signature", "127.0.0.1:5000/a/b:1", "--key", "missing.pub")
    assert code == 2 and "missing.pub" in err, err
    (tmp_path / "cosign.pub").write_text("k\n")
    monkeypatch.setenv("PATH", str(programs(tmp_path / "bin")))
    code, _, err = cli("verify-signature", "127.0.0.1:5000/a/b:1", "--key", "cosign.pub")
    assert code == 2 and "cosign is not installed" in err, err
    with pytest.raises(SystemExit) as exited:
        cli("verify-signature", "no such reference", "--key", "cosign.pub")
    assert exited.value.code == 2 and "not an image reference" in capsys.readouterr().err


PEM_LIKE = b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"  # PEM, but no key cosign can load


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"", "it is empty"),
        (b" \n\t\n", "it is empty"),
        (b"\xff\xfe\x00 not text", "not UTF-8 text"),
        (b"garbage\n", "holds no PEM block"),
    ],
)
def test_a_key_file_that_is_no_pem_is_a_problem(data: bytes, said: str) -> None:
    assert said in (signing.public_key_problem(data) or "")


def test_a_pem_key_file_is_left_to_cosign() -> None:
    assert signing.public_key_problem(PEM_LIKE) is None
    assert signing.public_key_problem(b"# a comment \xc3\xa9\n" + PEM_LIKE) is None  # UTF-8 beside the block


@pytest.mark.parametrize(
    "why",
    [
        "loading public key: pem to public key: PEM decoding failed",
        "loading public key: pem to public key: unknown Public key PEM file type: ENCRYPTED SIGSTORE PRIVATE KEY.",
        "loading public key: open k.pub: no such file or directory",
    ],
)
def test_a_key_cosign_cannot_load_is_bad_input_not_unverified(tmp_path: Path, why: str) -> None:
    cosign, _ = recorder(tmp_path, 1, f"WARNING: Skipping tlog verification\\nError: {why}")
    found = signing.verify("a/b:1", Path("k.pub"), str(cosign))
    assert found == signing.Verified(False, None, f"--key k.pub: cosign cannot load it: {why}", bad_input=True)


@pytest.mark.parametrize("status", [signing.NO_SIGNATURES, signing.NO_IMAGE, signing.NO_MATCHING])
def test_a_signature_cosign_rejects_is_not_verified_whatever_it_says(tmp_path: Path, status: int) -> None:
    """cosign's statuses for an answer about the signatures are a verdict, never bad input."""
    cosign, _ = recorder(tmp_path, status, "Error: loading public key: x")
    assert not signing.verify("a/b:1", Path("k.pub"), str(cosign)).bad_input


def test_a_reference_cosign_cannot_parse_is_bad_input(tmp_path: Path) -> None:
    cosign, _ = recorder(tmp_path, 1, "Error: parsing reference: could not parse reference: localhost:5000/x:1")
    assert signing.verify("localhost:5000/x:1", Path("k.pub"), str(cosign)).bad_input


BAD_KEYS = {  # file: what it holds, and what the refusal says of it
    "empty.pub": (b"", "it is empty"),
    "garbage.pub": (b"garbage\n", "holds no PEM block"),
    "not-utf8.pub": (b"\xff\xfe\x00\x80", "not UTF-8 text"),
    "pem-like.pub": (PEM_LIKE, "cosign cannot load it: loading public key: pem to public key: PEM decoding failed"),
}
UNREADABLE = {
    "missing.pub": "cannot read the --key file: No such file or directory",
    "a-folder": "must be a regular file, not a directory",
    "/dev/null": "must be a regular file, not a character device",
}


@pytest.mark.parametrize("name", [*BAD_KEYS, *UNREADABLE])
def test_verify_signature_refuses_a_key_cosign_cannot_load_with_exit_2(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Whatever the file: exit 2 naming it and why, never "not verified" (exit 1). A file that is no PEM text is
    refused before cosign runs; the fake cosign answers as cosign 2.5 does for a PEM block holding no key."""
    script = "echo 'Error: loading public key: pem to public key: PEM decoding failed' >&2; exit 1\n"
    monkeypatch.setenv("PATH", f"{programs(tmp_path / 'bin', cosign=script)}:/usr/bin:/bin")
    for file, (data, _) in BAD_KEYS.items():
        (tmp_path / file).write_bytes(data)
    (tmp_path / "a-folder").mkdir()
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("verify-signature", "127.0.0.1:5000/a/b:1", "--key", name)
    said = BAD_KEYS[name][1] if name in BAD_KEYS else UNREADABLE[name]
    assert code == 2 and name in err and said in err and "not verified" not in out + err, out + err
    assert "Traceback" not in err


@pytest.mark.skipif(shutil.which("cosign") is None, reason="cosign is not installed")
@pytest.mark.parametrize(
    "data",
    [PEM_LIKE, b"-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"],
)
def test_the_real_cosign_refusing_a_key_is_bad_input(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    """cosign loads the key before it asks any registry: its words for a key it cannot load are what
    `verify` reads as bad input (a closed port: nothing is asked of the network)."""
    (tmp_path / "k.pub").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("verify-signature", "127.0.0.1:9/a/b:1", "--key", "k.pub")
    assert code == 2 and "--key k.pub: cosign cannot load it: loading public key" in err, err
