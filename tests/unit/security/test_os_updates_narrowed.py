"""The os-updates check refreshes only the security suite's lists where it can copy their entries faithfully,
and pays once per answer within a run: the first look's answers are literals (apt's own output shape, captured
from bookworm and noble images, hosts replaced by placeholders), never computed by the code under test."""

from __future__ import annotations

import argparse
import datetime
import subprocess
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from tests.unit.security.look_harness import run_look
from tests.unit.security.test_os_updates import DEBIAN_LOOK, LOOKS, answer
from torchimages.cli import common
from torchimages.engine import ImageInfo, ShellResult
from torchimages.security import allowlist, apt_sources, gate, os_answers, os_updates
from torchimages.security.model import FAILED, OS_UPDATES, PYTHON, SECRETS

TODAY = datetime.date(2026, 12, 1)
ENV = {"PATH": "/usr/bin:/bin", "HTTP_PROXY": "http://proxy.example.org:3128"}
SECURITY_LINE = (
    "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
    "http://security.example.org/debian-security bookworm-security main"
)
EXPECTED = (
    "bookworm-security http://security.example.org/debian-security bookworm-security/main all Packages",
    "bookworm-security http://security.example.org/debian-security bookworm-security/main amd64 Packages",
)

# A noble image with deb822 sources (as ubuntu:24.04 ships them): a comment paragraph, then two stanzas.
NOBLE_SOURCES = """\
# Ubuntu sources have moved to /etc/apt/sources.list.d/ubuntu.sources

Types: deb
URIs: http://archive.example.org/ubuntu/
Suites: noble noble-updates noble-backports
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

## the security pocket
Types: deb
URIs: http://security.example.org/ubuntu/
Suites: noble-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
"""
NOBLE_SOURCED = """\
noble /etc/apt/sources.list.d/ubuntu.sources:1 http://archive.example.org/ubuntu noble/main amd64 Packages
noble-updates /etc/apt/sources.list.d/ubuntu.sources:1 http://archive.example.org/ubuntu noble-updates/main amd64 Packages
noble-backports /etc/apt/sources.list.d/ubuntu.sources:1 http://archive.example.org/ubuntu noble-backports/main amd64 Packages
noble-security /etc/apt/sources.list.d/ubuntu.sources:2 http://security.example.org/ubuntu noble-security/main amd64 Packages
noble-security /etc/apt/sources.list.d/ubuntu.sources:2 http://security.example.org/ubuntu noble-security/universe amd64 Packages
W: Target Packages (main/binary-amd64/Packages) is configured multiple times in /etc/apt/sources.list:7 and /etc/apt/sources.list.d/ubuntu.sources:2
"""  # noqa: E501


def files_of(path: str, text: str) -> dict[str, str]:
    return {path: text.rstrip("\n")}


def engine_with(look: str = DEBIAN_LOOK, refresh: str | None = None, status: int = 0) -> FakeEngine:
    engine = FakeEngine()
    engine.shell_answers[LOOKS] = ShellResult(status, look, "")
    engine.shell_answer = ShellResult(0, refresh if refresh is not None else answer(), "")
    for reference in ("runtime:1", "devel:1"):  # the image config's Env, as the engine knows it
        engine.images[reference] = {}
        engine.details[reference] = ImageInfo(reference, "sha256:" + "0" * 64, {}, dict(ENV), "", ())
    return engine


def refresh_script(engine: FakeEngine) -> str:
    """The script of the refresh (the run after the look)."""
    (script,) = [s for _, s, _, _, _ in engine.shells if s != os_updates.LOOK]
    return script


# --- part 1: only the security suite's lists -------------------------------------------------------------


def test_the_refresh_reads_only_the_security_entry_copied_verbatim() -> None:
    engine = engine_with(refresh=answer().replace("### targets", "### narrowed yes\n### targets"))
    scan = os_updates.scan(engine, "img:1", None)
    script = refresh_script(engine)
    assert f"printf '%s\\n' '{SECURITY_LINE}' > \"$scratch/parts/security.list\"" in script
    assert "bookworm-updates main" not in script and "debian bookworm main" not in script
    assert (
        'set -- "$@" -o "Dir::Etc::SourceList=$scratch/none.list" -o "Dir::Etc::SourceParts=$scratch/parts"' in script
    )
    assert f"expected=$(printf '%s\\n' '{EXPECTED[0]}' '{EXPECTED[1]}' | sort)" in script
    assert script.index("### narrowed") < script.index("update 2>&1")  # narrowed before the refresh
    assert scan.scanned and scan.note == "5 packages against bookworm-security (only the security lists refreshed)"
    assert [f.key for f in scan.findings] == ["libexpat1", "libssl3", "libgcc-s1"]


def test_a_copy_apt_finds_unfaithful_refreshes_every_list_and_still_finds_the_updates() -> None:
    engine = engine_with(refresh=answer().replace("### targets", "### narrowed no\n### targets"))
    scan = os_updates.scan(engine, "img:1", None)
    assert scan.scanned and [f.key for f in scan.findings] == ["libexpat1", "libssl3", "libgcc-s1"]
    assert scan.note == (
        "5 packages against bookworm-security (every list refreshed: the copy of the security entries named other "
        "indexes than the image's sources)"
    )


def test_the_copy_is_used_only_where_apt_names_exactly_the_expected_indexes() -> None:
    """The script's own test, run by a real sh: `got` equal to `expected` narrows, anything else does not."""
    copy = apt_sources.Copy((SECURITY_LINE,), (), EXPECTED)
    script = os_updates.script(copy)
    block = script[script.index('mkdir -p "$scratch/parts"') : script.index("echo '### targets'")]
    for said, narrowed in (
        (EXPECTED, "yes"),
        (EXPECTED[:1], "no"),
        ((*EXPECTED, "bookworm http://deb.example.org/debian bookworm/main amd64 Packages"), "no"),
    ):
        fake_apt = "apt_get() { printf '%s\\n' " + " ".join(f"'{line}'" for line in reversed(said)) + "; }\n"
        body = block.replace("got=$(apt-get ", "got=$(apt_get ")
        done = subprocess.run(
            ["sh", "-c", f'scratch=$(mktemp -d); trap \'rm -rf "$scratch"\' EXIT\n{fake_apt}{body}echo "$@"'],
            capture_output=True,
            text=True,
            check=True,
        )
        assert f"### narrowed {narrowed}" in done.stdout, done
        assert ("Dir::Etc::SourceParts=" in done.stdout) == (narrowed == "yes")


def test_sources_naming_no_security_suite_by_name_refresh_every_list_and_say_why() -> None:
    """`stable-security`'s lists are seen by their Release codename only after a full refresh: nothing is
    proven less than before."""
    look = DEBIAN_LOOK.replace("bookworm-security /etc", "stable /etc")
    engine = engine_with(look=look)
    scan = os_updates.scan(engine, "img:1", None)
    assert refresh_script(engine) == os_updates.SCRIPT
    assert scan.note.endswith("(every list refreshed: no entry of the sources names a -security suite by name)")


def test_a_look_that_fails_refreshes_every_list() -> None:
    for look, status in ((DEBIAN_LOOK, 1), ("### os-release\nID=debian\n### no-apt\n", 0), ("", 0)):
        engine = engine_with(look=look, status=status)
        scan = os_updates.scan(engine, "img:1", None)
        assert refresh_script(engine) == os_updates.SCRIPT
        assert scan.note.endswith("(every list refreshed: the first look did not answer)")


def test_deb822_stanzas_are_counted_as_apt_counts_them_and_their_suites_narrowed() -> None:
    targets = apt_sources.sourced_targets(NOBLE_SOURCED)
    assert len(targets) == 5  # apt's warning is no target
    copy = apt_sources.copy(
        targets, files_of("/etc/apt/sources.list.d/ubuntu.sources", NOBLE_SOURCES), "noble-security"
    )
    assert copy.usable and copy.one_line == ()
    assert copy.deb822 == (
        "Types: deb\nURIs: http://security.example.org/ubuntu/\nSuites: noble-security\n"
        "Components: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg",
    )
    mixed = NOBLE_SOURCES.replace("Suites: noble noble-updates noble-backports", "Suites: noble noble-security")
    sourced = NOBLE_SOURCED.replace(
        "noble-security /etc/apt/sources.list.d/ubuntu.sources:2",
        "noble-security /etc/apt/sources.list.d/ubuntu.sources:1",
    )
    copied = apt_sources.copy(
        apt_sources.sourced_targets(sourced),
        files_of("/etc/apt/sources.list.d/ubuntu.sources", mixed),
        "noble-security",
    )
    assert copied.usable and len(copied.deb822) == 1 and "Suites: noble-security\n" in copied.deb822[0]
    assert "URIs: http://archive.example.org/ubuntu/" in copied.deb822[0]  # the entry's own options kept


def test_an_entry_that_cannot_be_copied_faithfully_is_not_copied() -> None:
    path = "/etc/apt/sources.list.d/ubuntu.sources"
    targets = apt_sources.sourced_targets(NOBLE_SOURCED)
    folded = NOBLE_SOURCES.replace("Suites: noble-security\n", "Suites: noble-security\n noble-proposed\n")
    cases = {
        "could not be read": {},
        "could not be narrowed": files_of(path, folded),
        "entry 2 of": files_of(path, NOBLE_SOURCES.split("## the security pocket")[0]),  # no second stanza
        "could not be copied": files_of(
            path, NOBLE_SOURCES.replace("Types: deb\nURIs: http://sec", "Types: deb\x1b\nURIs: http://sec")
        ),
    }
    for why, files in cases.items():
        copy = apt_sources.copy(targets, files, "noble-security")
        assert not copy.usable and why in copy.why, (why, copy)
        assert os_updates.script(copy) == os_updates.SCRIPT
    huge = files_of("/etc/apt/sources.list", "\n".join(["# x"] * 3 + [SECURITY_LINE + " " + "c" * 40000]))
    sourced = f"bookworm-security /etc/apt/sources.list:4 {EXPECTED[1].split(' ', 1)[1]}\n"
    assert "pass 32768 bytes" in apt_sources.copy(apt_sources.sourced_targets(sourced), huge, "bookworm-security").why


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text(), st.text(alphabet=st.characters(codec="utf-8"), max_size=40))
def test_the_look_parsers_take_any_text(sourced: str, source: str, suite: str) -> None:
    targets = apt_sources.sourced_targets(sourced)
    files = apt_sources.source_files(source)
    copy = apt_sources.copy(targets, files, suite)
    for entry in (*copy.one_line, *copy.deb822):
        assert entry and not any(ch in entry for ch in "\x00\x1b\x7f")
    os_updates.look(ShellResult(0, f"### sourced\n{sourced}\n### source\n{source}\n### look-status 0\n", ""))


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cc", "Cs")), min_size=1, max_size=200))
def test_an_entry_with_odd_characters_is_written_exactly_as_it_reads(odd: str) -> None:
    """Quotes, `$(...)`, backquotes and `### ` in an entry reach the scratch sources list unchanged (a real sh)."""
    entry = f"deb [signed-by=/k] http://x.example.org/{odd} bookworm-security main".strip()
    copy = apt_sources.Copy((entry,), (f"Types: deb\nURIs: {odd}\nSuites: bookworm-security",), ("e",))
    script = os_updates.script(copy)
    block = script[script.index('mkdir -p "$scratch/parts"') : script.index("expected=")]
    done = subprocess.run(
        [
            "sh",
            "-c",
            f'scratch=$(mktemp -d)\n{block}cat "$scratch/parts/security.list" "$scratch/parts/security.sources"\n'
            'rm -rf "$scratch"',
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == f"{entry}\nTypes: deb\nURIs: {odd}\nSuites: bookworm-security\n\n"


def test_a_huge_look_is_read_in_bounded_time() -> None:
    sourced = DEBIAN_LOOK.split("### sourced\n")[1].split("### source\n")[0] * 20000
    look = DEBIAN_LOOK.replace("### source\n", sourced + "### source\n")
    seen = os_updates.look(ShellResult(0, look, ""))
    assert seen.copy.usable and seen.copy.one_line == (SECURITY_LINE,) and seen.copy.expected == EXPECTED


# --- part 2: paid once per answer within a run ------------------------------------------------------------


def test_an_image_with_the_same_look_gets_the_answer_without_a_second_refresh() -> None:
    engine = engine_with()
    answers = os_answers.Answers()
    first = os_updates.scan(engine, "runtime:1", None, answers, "2.9.1-cpu-runtime")
    second = os_updates.scan(engine, "devel:1", None, answers, "2.9.1-cpu-devel")
    assert [s for _, s, _, _, _ in engine.shells].count(os_updates.LOOK) == 2 and len(engine.shells) == 3
    assert second.findings == first.findings and second.scanned
    assert second.note == f"{first.note} (as for 2.9.1-cpu-runtime)"
    shared = allowlist.apply(second, (), "2.9.1-cpu-devel", TODAY)
    assert shared.status == FAILED and len(shared.failing) == 3  # a pending update fails the second image too


def test_an_answer_is_not_shared_across_packages_sources_networks_or_runs() -> None:
    other_package = DEBIAN_LOOK.replace(
        "installed libssl3 amd64 3.0.20-1~deb12u2", "installed libssl3 amd64 3.0.22-1~deb12u2"
    )
    other_arch = DEBIAN_LOOK.replace("installed libgcc-s1 i386", "installed libgcc-s1 amd64")
    other_source = DEBIAN_LOOK.replace(
        "|deb http://deb.example.org/debian bookworm main", "|deb http://m.example.org/debian bookworm main"
    )
    other_key = DEBIAN_LOOK.replace("|506b815cbb32d9b6066b", "|506b815cbb32d9b6066c")
    others = (other_package, other_arch, other_source, other_key, *OTHER_ANSWERS)
    for look, network in (*((o, None) for o in others), (DEBIAN_LOOK, "build-net")):
        engine = engine_with()
        answers = os_answers.Answers()
        os_updates.scan(engine, "runtime:1", None, answers, "runtime")
        engine.shell_answers[LOOKS] = ShellResult(0, look, "")
        second = os_updates.scan(engine, "devel:1", network, answers, "devel")
        assert len(engine.shells) == 4 and "as for" not in second.note, look
    engine = engine_with()
    os_updates.scan(engine, "runtime:1", None, os_answers.Answers(), "runtime")
    os_updates.scan(engine, "devel:1", None, os_answers.Answers(), "devel")  # another run: its own answers
    assert len(engine.shells) == 4


# Looks that change the answer (issue 44's review): an auth.conf, a CA bundle that apt's configuration names, a
# keyring a sources entry names outside the four folders, a sources file longer than the look prints.
AUTH = "|none /etc/apt/auth.conf\n"
OTHER_ANSWERS = (
    DEBIAN_LOOK.replace(AUTH, "|9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 /etc/apt/auth.conf\n"),
    DEBIAN_LOOK.replace(
        AUTH, AUTH + "|60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 /etc/apt/auth.conf.d/x.conf\n"
    ),
    DEBIAN_LOOK.replace(
        AUTH, AUTH + "|fd61a03af4f77d870fc21e05e7e80678095c92d808cfb3b5c279ee04c74aca13 /etc/corp/ca.pem\n"
    ),
    DEBIAN_LOOK.replace(
        "### auth", "|2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae /opt/corp/key.gpg\n### auth"
    ),
    DEBIAN_LOOK.replace("### look-status 0", "### unshared a sources file passes 65536 bytes\n### look-status 0"),
)


def test_an_answer_is_not_shared_where_the_images_proxies_differ() -> None:
    """apt heeds http_proxy, https_proxy, no_proxy, ALL_PROXY in any case (the image's Env, from the engine)."""
    for name, value in (("http_proxy", "http://other.example.org:3128"), ("No_Proxy", "*"), ("ALL_PROXY", "x")):
        engine = engine_with()
        engine.details["devel:1"] = ImageInfo("devel:1", "sha256:" + "1" * 64, {}, {**ENV, name: value}, "", ())
        answers = os_answers.Answers()
        os_updates.scan(engine, "runtime:1", None, answers, "runtime")
        second = os_updates.scan(engine, "devel:1", None, answers, "devel")
        assert len(engine.shells) == 4 and "as for" not in second.note, name
    engine = engine_with()
    engine.details["devel:1"] = ImageInfo("devel:1", "sha256:" + "1" * 64, {}, {**ENV, "CUDA_VERSION": "12.4"}, "", ())
    answers = os_answers.Answers()
    os_updates.scan(engine, "runtime:1", None, answers, "runtime")
    assert "(as for runtime)" in os_updates.scan(engine, "devel:1", None, answers, "devel").note  # not a proxy
    del engine.images["devel:1"]  # the engine does not know the image's Env: nothing shared
    assert "as for" not in os_updates.scan(engine, "devel:1", None, answers, "devel").note


def test_a_look_that_says_it_cannot_stand_for_the_image_shares_nothing() -> None:
    """A sources file past the 64 KB the look prints (or no sha256sum): two such looks alike say nothing of the
    bytes they left out, so the second image is refreshed on its own."""
    engine = engine_with(look=OTHER_ANSWERS[-1])
    answers = os_answers.Answers()
    first = os_updates.scan(engine, "runtime:1", None, answers, "runtime")
    second = os_updates.scan(engine, "devel:1", None, answers, "devel")
    assert len(engine.shells) == 4 and "as for" not in second.note and second.note == first.note


def test_an_answer_that_could_not_look_is_not_shared() -> None:
    engine = engine_with(refresh=answer(files="Package files:\n 100 /var/lib/dpkg/status\n"))
    answers = os_answers.Answers()
    assert not os_updates.scan(engine, "runtime:1", None, answers, "runtime").scanned
    os_updates.scan(engine, "devel:1", None, answers, "devel")
    assert len(engine.shells) == 4


def test_a_look_that_did_not_answer_shares_nothing() -> None:
    engine = engine_with(status=1)
    answers = os_answers.Answers()
    os_updates.scan(engine, "runtime:1", None, answers, "runtime")
    os_updates.scan(engine, "devel:1", None, answers, "devel")
    assert len(engine.shells) == 4


def test_the_gate_of_one_run_shares_the_answer_and_each_command_has_its_own(tmp_path: Path) -> None:
    engine = engine_with()
    options = gate.GateOptions(skip=frozenset({SECRETS, PYTHON}), today=TODAY, answers=os_answers.Answers())
    gate.run(engine, "2.9.1-cpu-runtime", "runtime:1", options)
    (result,) = [r for r in gate.run(engine, "2.9.1-cpu-devel", "devel:1", options) if r.check == OS_UPDATES]
    assert result.status == FAILED and "(as for 2.9.1-cpu-runtime)" in result.note
    assert len(engine.shells) == 3
    (tmp_path / "matrix.yaml").write_text("")
    args = argparse.Namespace(allowlist=None, matrix=tmp_path / "matrix.yaml", require_scan=False, skip_check=[])
    one, two = common.security_options(args), common.security_options(args)
    assert one.answers is not None and two.answers is not None and one.answers is not two.answers


def test_a_whitespace_only_line_joins_two_stanzas_as_apt_reads_them() -> None:
    """apt 2.6.1 (`apt-get indextargets` on this layout) reads one stanza where a line of spaces stands between two:
    only an empty line ends a stanza; its fields named twice count once, the last. A line of spaces before a
    stanza is skipped."""
    path = "/etc/apt/sources.list.d/debian.sources"
    joined = (
        "Types: deb\nURIs: http://deb.example.org/debian\nSuites: bookworm\nComponents: main\n   \n"
        "Types: deb\nURIs: http://security.example.org/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n\t\n"
        "Types: deb\nURIs: http://deb.example.org/debian\nSuites: bookworm-updates\nComponents: main\n"
    )
    sourced = (  # apt 2.6.1's own answer for `joined`: the security suite is entry 1, the updates entry 2
        f"bookworm-security {path}:1 http://security.example.org/debian-security bookworm-security/main amd64 Packages\n"  # noqa: E501
        f"bookworm-security {path}:1 http://security.example.org/debian-security bookworm-security/main all Packages\n"
        f"bookworm-updates {path}:2 http://deb.example.org/debian bookworm-updates/main amd64 Packages\n"
        f"bookworm-updates {path}:2 http://deb.example.org/debian bookworm-updates/main all Packages\n"
    )
    copy = apt_sources.copy(apt_sources.sourced_targets(sourced), files_of(path, joined), "bookworm-security")
    assert copy.usable, copy.why
    assert copy.deb822 == (
        "Types: deb\nURIs: http://deb.example.org/debian\nComponents: main\n   \n"
        "Types: deb\nURIs: http://security.example.org/debian-security\nSuites: bookworm-security\n"
        "Components: main",
    )
    assert apt_sources.copy(
        apt_sources.sourced_targets(sourced.replace(":1 ", ":2 ")),
        files_of(path, joined),
        "bookworm-security",
    ).why.startswith("the Suites of entry 2")  # entry 2 is the updates stanza (no security suite in it)


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=300)
    | st.just("a\x0b### sourced")
)
def test_no_file_content_can_make_or_end_a_section(content: str) -> None:
    """Any os-release (or sources file, apt config) text, printed through the scripts' `frame` by a real sh,
    reads back as that section's text only: no `### sourced`, `### look-status` or `### unshared` of its own."""
    done = subprocess.run(
        [
            "sh",
            "-c",
            os_updates.FRAME + "echo '### os-release'\nprintf '%s' \"$1\" | frame\necho '### look-status 0'",
            "-",
            content,
        ],
        capture_output=True,
        check=True,
    )
    parts = os_updates.sections(done.stdout.decode())
    assert set(parts) == {"os-release", "look-status"} and parts["look-status"] == "0"
    assert parts["os-release"].rstrip("\n") == content.rstrip("\n")


def test_the_look_sums_auth_files_ca_bundles_and_keyrings_any_entry_names(tmp_path: Path) -> None:
    """The look's `keys` and `auth` blocks, run by a real sh (apt-config a stub saying where apt's files are):
    each file's sha256 (the literals: `sha256sum` of the contents below), never a line of its contents."""
    (tmp_path / "auth.conf.d").mkdir()
    (tmp_path / "auth.conf.d" / "x.conf").write_text("machine x login y password z\n")
    (tmp_path / "ca.pem").write_text("ca\n")
    (tmp_path / "key.gpg").write_text("key\n")
    (tmp_path / "corp.sources").write_text(
        f"Types: deb\nURIs: http://x.example.org/d\nSuites: bookworm-security\nSigned-By: {tmp_path}/key.gpg\n"
    )
    output = run_look(
        tmp_path,
        shell=f"NETRC='{tmp_path}/auth.conf'\nNETRCPARTS='{tmp_path}/auth.conf.d/'\n",
        dump=f'Acquire::https::mirror.example.org::CAInfo "{tmp_path}/ca.pem";\n',
        files=f"{tmp_path}/corp.sources",
    )
    parts = os_updates.sections(output)
    assert f"a7998f247bd965694ff227fa325c81169a07471a8b6808d3e002a486c4e65975 {tmp_path}/key.gpg" in parts["keys"]
    auth = parts["auth"].split("\n")
    assert f"none {tmp_path}/auth.conf" in auth
    assert f"89fc2a1df3b411807ea1ae570cfa075ca4b3ef0d398f79f108b68027643107bf {tmp_path}/auth.conf.d/x.conf" in auth
    assert f"314a01b67979d4ecc6667666046246e726d9848903e33d0e63fab1165aea9d94 {tmp_path}/ca.pem" in auth
    assert "password" not in output
