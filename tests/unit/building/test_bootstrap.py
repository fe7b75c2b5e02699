"""The bootstrapped base: what shapes it (the digest), what it records (provenance labels), and the rules
of `ensure` (a network failure is tried again with backoff, a real error is not, an interrupt stops it and
imports nothing), with a stand-in mmdebstrap on PATH and an in-memory engine."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from torchimages import compat
from torchimages.building import bootstrap, machine_lock
from torchimages.engine import EngineError
from torchimages.engine.process import CANCEL_GRACE_S
from torchimages.security import layer_cache

DEBIAN = compat.load().os["debian12"]


def importing_engine(labels: dict[str, str] | None = None) -> FakeEngine:
    """An engine holding the base with these labels (None: no base yet); imports are recorded."""
    fake = FakeEngine()
    if labels is not None:
        fake.images[DEBIAN.image] = labels
    return fake


@pytest.fixture
def fake_mmdebstrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `mmdebstrap` on PATH acting out FAKE_SCRIPT (one line per run: fail-network, fail-real, slow, ok);
    each run writes a small tar to its output argument and the provenance files its hook would."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "mmdebstrap"
    script.write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            count=$(cat "$FAKE_COUNT" 2>/dev/null || echo 0); count=$((count + 1)); echo $count > "$FAKE_COUNT"
            what=$(sed -n "${count}p" "$FAKE_SCRIPT")
            for last; do :; done
            case "$what" in
              fail-network) echo "E: Failed to fetch http://deb.example.org/debian/dists/bookworm/InRelease" >&2
                exit 1;;
              fail-real) echo "E: no such suite: bookworm" >&2; exit 1;;
              slow) sleep 600;;
            esac
            record=$(dirname "$last")
            mkdir -p "$record/releases"
            printf 'Origin: Debian\\nDate: Sat, 11 Jul 2026 10:16:37 UTC\\n' > "$record/releases/x_InRelease"
            echo "deb http://deb.example.org/debian bookworm main" > "$record/sources.list"
            tar -cf "$last" -C "$record" sources.list
            """
        )
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_COUNT", str(tmp_path / "count"))
    monkeypatch.setenv("FAKE_SCRIPT", str(tmp_path / "script"))
    return tmp_path / "script"


def test_the_command_writes_a_tar_and_records_the_release_date_and_sources(tmp_path: Path) -> None:
    record = tmp_path / "record"
    cmd = bootstrap.command(DEBIAN, "http://mirror.example/debian", "/x/rootfs.tar", record)
    assert cmd[:2] == ["mmdebstrap", "--variant=minbase"]
    assert '--aptopt=Acquire::Retries "3"' in cmd
    assert cmd[-3:] == [DEBIAN.suite, "/x/rootfs.tar", "http://mirror.example/debian"]
    ready, hook = [c for c in cmd if c.startswith("--customize-hook=")]
    assert ready == f"--customize-hook={bootstrap.BUILD_READY_HOOK}"  # /etc/hosts there, apt's locks gone
    assert '> "$1/etc/hosts"' in ready
    assert hook == f"--customize-hook={bootstrap.record_hook(record)}"
    assert not any(c.startswith("--setup-hook=") for c in cmd)  # no login: no auth.conf


# Release files as the archive serves them (heads), literal: the suite's, updates' and security's.
NOBLE = "Origin: Ubuntu\nLabel: Ubuntu\nSuite: noble\nCodename: noble\nDate: Thu, 25 Apr 2024 15:10:33 UTC\n"
NOBLE_UPDATES = (
    "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Ubuntu\nSuite: noble-updates\n"
    "Date: Fri, 04 Dec 2026 21:07:12 UTC\nValid-Until: Never\n"
)
NOBLE_SECURITY = "Origin: Ubuntu\nSuite: noble-security\nDate: Thu, 03 Dec 2026 09:40:01 UTC\n"


def test_the_release_date_is_the_newest_date_of_the_suites_the_base_was_made_from() -> None:
    assert bootstrap.release_date([NOBLE, NOBLE_UPDATES, NOBLE_SECURITY]) == "Fri, 04 Dec 2026 21:07:12 UTC"
    assert bootstrap.release_date([NOBLE_SECURITY, NOBLE]) == "Thu, 03 Dec 2026 09:40:01 UTC"  # any order
    assert bootstrap.release_date([NOBLE]) == "Thu, 25 Apr 2024 15:10:33 UTC"
    # by time, not by text; another zone; a file without a Date: (or an unreadable one) is no answer
    west = "Date: Fri, 04 Dec 2026 20:00:00 -0500\n"  # 01:00 UTC on the 5th
    assert bootstrap.release_date([NOBLE_UPDATES, west, "Origin: x\n", "Date: soon\n"]) == west[6:-1]
    assert bootstrap.release_date(["Origin: x\n"]) == "unknown"


def test_the_record_hook_keeps_every_suites_release_file_and_the_sources(tmp_path: Path) -> None:
    """The hook run as mmdebstrap runs it (`sh -c HOOK exec ROOT`) on a root with apt's lists."""
    root, record = tmp_path / "root", tmp_path / "record"
    lists = root / "var/lib/apt/lists"
    lists.mkdir(parents=True)
    (root / "etc/apt").mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text("deb http://archive.example/ubuntu noble main\n")
    (lists / "archive.example_ubuntu_dists_noble_InRelease").write_text(NOBLE)
    (lists / "archive.example_ubuntu_dists_noble-updates_InRelease").write_text(NOBLE_UPDATES)
    (lists / "security.example_ubuntu_dists_noble-security_Release").write_text(NOBLE_SECURITY)
    (lists / "archive.example_ubuntu_dists_noble_main_binary-amd64_Packages").write_text("Package: x\n")
    record.mkdir()
    subprocess.run(["sh", "-c", bootstrap.record_hook(record), "exec", str(root)], check=True)
    provenance = bootstrap.read_provenance("noble", record)
    assert provenance.release_date == "Fri, 04 Dec 2026 21:07:12 UTC"
    assert provenance.sources == ("http://archive.example/ubuntu noble main",)
    assert len(list((record / "releases").iterdir())) == 3  # the Packages index is no Release file


def test_the_digest_follows_what_shapes_the_image_only(tmp_path: Path) -> None:
    assert bootstrap.digest(DEBIAN, None) == bootstrap.digest(DEBIAN, None)
    assert bootstrap.digest(DEBIAN, None) != bootstrap.digest(DEBIAN, "http://mirror.example/debian")
    shaped = "\0".join(bootstrap.command(DEBIAN, None))
    assert "release-date" not in shaped and "rootfs.tar" not in shaped  # the record hook is no part of it
    assert bootstrap.BUILD_READY_HOOK in shaped  # what the base holds is
    # a base labelled by older rules (its release date the release suite's) is made again, not kept
    older = "sha256:" + hashlib.sha256(shaped.encode()).hexdigest()
    assert bootstrap.digest(DEBIAN, None) != older


def test_provenance_becomes_quoted_labels(tmp_path: Path) -> None:
    (tmp_path / "releases").mkdir()
    (tmp_path / "releases/x_dists_bookworm_InRelease").write_text("Date: Sat, 11 Jul 2026 10:16:37 UTC\n")
    (tmp_path / "sources.list").write_text(
        "deb http://deb.example.org/debian bookworm main\n# a comment\n"
        "deb http://security.example.org/debian-security bookworm-security main\n"
    )
    provenance = bootstrap.read_provenance("bookworm", tmp_path)
    assert provenance.sources == (
        "http://deb.example.org/debian bookworm main",
        "http://security.example.org/debian-security bookworm-security main",
    )
    changes = bootstrap.import_changes("sha256:1", provenance)
    assert changes == (
        'LABEL io.torchimages.bootstrap-digest="sha256:1"',
        'LABEL io.torchimages.bootstrap.suite="bookworm"',
        'LABEL io.torchimages.bootstrap.sources="http://deb.example.org/debian bookworm main; '
        'http://security.example.org/debian-security bookworm-security main"',
        'LABEL io.torchimages.bootstrap.release-date="Sat, 11 Jul 2026 10:16:37 UTC"',
        'CMD ["/bin/bash"]',
    )
    assert bootstrap.read_provenance("bookworm", tmp_path / "absent").release_date == "unknown"


@pytest.mark.parametrize(
    ("log", "network"),
    [
        ("E: Failed to fetch http://deb.example.org/debian/pool/x.deb  503  Service Unavailable", True),
        ("W: Could not connect to deb.example.org:80", True),
        ("Temporary failure resolving 'deb.example.org'", True),
        ("E: Hash Sum mismatch", True),
        ("E: Unable to locate package python3.11", False),
        ("mmdebstrap: no such suite", False),
    ],
)
def test_network_failures_are_told_from_real_errors(log: str, network: bool) -> None:
    assert bootstrap.network_failure(log) is network


def test_an_up_to_date_base_is_not_bootstrapped(tmp_path: Path, fake_mmdebstrap: Path) -> None:
    engine = importing_engine({bootstrap.DIGEST_LABEL: bootstrap.digest(DEBIAN, None)})
    assert bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log") == f"base {DEBIAN.image} is up to date"
    assert engine.imported == [] and not (tmp_path / "count").exists()


def test_a_network_failure_is_tried_again_with_backoff_and_said(tmp_path: Path, fake_mmdebstrap: Path) -> None:
    fake_mmdebstrap.write_text("fail-network\nfail-network\nok\n")
    engine, said, slept = importing_engine(), list[str](), list[float]()
    result = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", said.append, sleep=slept.append)
    assert result == f"base {DEBIAN.image} bootstrapped from the {DEBIAN.suite} archive"
    assert slept == [10.0, 20.0]
    assert [line.split("; ")[-1] for line in said[1:]] == ["retry 1/2 in 10 s", "retry 2/2 in 20 s"]
    ((reference, changes, size),) = engine.imported
    assert reference == DEBIAN.image and size > 0 and size % 512 == 0  # the tar, as imported
    assert 'LABEL io.torchimages.bootstrap.release-date="Sat, 11 Jul 2026 10:16:37 UTC"' in changes
    assert (tmp_path / "b.log").read_text().count("Failed to fetch") == 2, "every attempt's output is kept"


def test_network_failures_are_tried_a_bounded_number_of_times(tmp_path: Path, fake_mmdebstrap: Path) -> None:
    fake_mmdebstrap.write_text("fail-network\n" * 5)
    engine = importing_engine()
    with pytest.raises(EngineError, match=r"bootstrapping .* failed \(mmdebstrap exit 1\); see "):
        bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", sleep=lambda _: None)
    assert (tmp_path / "count").read_text().strip() == str(bootstrap.BOOTSTRAP_TRIES) and engine.imported == []


def test_a_real_error_is_not_tried_again(tmp_path: Path, fake_mmdebstrap: Path) -> None:
    fake_mmdebstrap.write_text("fail-real\nok\n")
    engine, slept = importing_engine(), list[float]()
    with pytest.raises(EngineError):
        bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", sleep=slept.append)
    assert slept == [] and (tmp_path / "count").read_text().strip() == "1"


def test_an_interrupt_stops_the_bootstrap_and_imports_nothing(tmp_path: Path, fake_mmdebstrap: Path) -> None:
    fake_mmdebstrap.write_text("slow\n")
    engine, cancelled = importing_engine(), threading.Event()
    threading.Timer(0.5, cancelled.set).start()
    start = time.monotonic()
    result = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", cancelled=cancelled)
    took = time.monotonic() - start
    # stopped far sooner than its own 600 s: the escalation's bound (SIGINT's grace, SIGTERM's 5 s, SIGKILL)
    # plus a busy machine's slack, not a tight clock (a missed SIGINT alone costs the 10 s grace)
    assert took < CANCEL_GRACE_S + 5 + 30, f"mmdebstrap was not stopped ({took:.1f} s)"
    assert result == f"base {DEBIAN.image}: bootstrap interrupted, nothing imported" and engine.imported == []


def test_apt_locks_are_dropped_from_the_root_filesystem_and_nothing_else(tmp_path: Path) -> None:
    """mmdebstrap's cleanup leaves apt's lock files; removing them in a build step would leave whiteouts."""
    source, target = tmp_path / "rootfs.tar", tmp_path / "ready.tar"
    with tarfile.open(source, "w") as tar:
        for name in ("./etc/hosts", "./var/lib/apt/lists/lock", "./var/cache/apt/archives/lock", "./var/lib/dpkg/lock"):
            member = tarfile.TarInfo(name)
            member.size, member.mtime = 3, 1795910400
            tar.addfile(member, io.BytesIO(b"abc"))
    bootstrap.without(source, target, bootstrap.DROPPED)
    with tarfile.open(target) as tar:
        kept = {m.name: (m.mtime, tar.extractfile(m).read()) for m in tar}  # type: ignore[union-attr]
    assert kept == {"./etc/hosts": (1795910400, b"abc"), "./var/lib/dpkg/lock": (1795910400, b"abc")}


ARM64 = bootstrap.Base(DEBIAN, "linux/arm64", f"{DEBIAN.image}-arm64")


def test_another_platforms_base_is_bootstrapped_for_its_architecture_and_imported_as_it(
    tmp_path: Path, fake_mmdebstrap: Path
) -> None:
    fake_mmdebstrap.write_text("ok\n")
    engine = importing_engine()
    said = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", base=ARM64)
    assert said == f"base {DEBIAN.image}-arm64 bootstrapped from the bookworm archive"
    ((name, changes, platform),) = [args for call, args in engine.calls if call == "import_rootfs"]
    assert (name, platform) == (f"{DEBIAN.image}-arm64", "linux/arm64")
    assert f'LABEL {bootstrap.DIGEST_LABEL}="{bootstrap.digest(DEBIAN, None, "linux/arm64")}"' in changes
    assert "--architectures=arm64" in bootstrap.command(DEBIAN, None, platform="linux/arm64")
    assert not any(a.startswith("--arch") for a in bootstrap.command(DEBIAN, None))  # linux/amd64's as before
    assert bootstrap.digest(DEBIAN, None, "linux/arm64") != bootstrap.digest(DEBIAN, None)


def test_the_linux_amd64_base_of_a_two_platform_dockerfile_is_the_base_under_its_platforms_name(
    tmp_path: Path, fake_mmdebstrap: Path
) -> None:
    engine = importing_engine({bootstrap.DIGEST_LABEL: bootstrap.digest(DEBIAN, None)})
    amd64 = bootstrap.Base(DEBIAN, "linux/amd64", f"{DEBIAN.image}-amd64")
    assert bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", base=amd64) == (
        f"base {DEBIAN.image}-amd64 is {DEBIAN.image}"
    )
    assert engine.imported == [] and engine.tagged == [f"{DEBIAN.image}-amd64"]
    assert not (tmp_path / "count").exists()  # no mmdebstrap


def test_a_base_another_process_is_bootstrapping_is_waited_for_and_not_made_twice(
    tmp_path: Path, fake_mmdebstrap: Path
) -> None:
    """While another process holds the base's lock (it bootstraps), ensure waits, says so, then finds the
    base made by that process: no mmdebstrap run of its own, no import."""
    fake_mmdebstrap.write_text("ok\n")
    engine, said = importing_engine(), list[str]()
    folder = layer_cache.tool_folder()
    job = bootstrap.lock_name(DEBIAN.image)
    holding = threading.Event()

    def other_process() -> None:
        with machine_lock.held(job, folder):
            holding.set()
            time.sleep(0.6)
            engine.images[DEBIAN.image] = {bootstrap.DIGEST_LABEL: bootstrap.digest(DEBIAN, None)}

    threading.Thread(target=other_process).start()
    holding.wait(5)
    result = bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log", said.append)
    assert result == f"base {DEBIAN.image} is up to date (another process bootstrapped it meanwhile)"
    assert any("another process is at it; waiting" in line for line in said), said
    assert engine.imported == [] and not (tmp_path / "count").exists()


def test_a_base_is_bootstrapped_under_its_lock(tmp_path: Path, fake_mmdebstrap: Path) -> None:
    fake_mmdebstrap.write_text("ok\n")
    engine, folder = importing_engine(), layer_cache.tool_folder()
    job = bootstrap.lock_name(DEBIAN.image)
    seen: list[bool] = []
    original = engine.import_rootfs

    def importing(*args: object, **kwargs: object) -> int:
        with machine_lock.held(job, folder, wait_s=0) as free:  # EngineError: the lock is held (by ensure)
            seen.append(free)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    engine.import_rootfs = importing  # type: ignore[method-assign]
    with pytest.raises(EngineError, match="has held its lock"):
        bootstrap.ensure(engine, DEBIAN, None, tmp_path / "b.log")
    assert seen == []
