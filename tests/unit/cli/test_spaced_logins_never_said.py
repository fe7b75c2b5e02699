"""A login no word holds whole is never said either (outside attack 5, finding 6): a password with blanks, quotes,
'@' or '%' in every CLI path that takes a URL or a registry (--mirror as a URL, `FAMILY=URL` or a `deb` line,
--index-url, --extra-index-url, --find-links, --base-registry, their TORCHIMAGES_* settings), urllib's message
quoting a piece of it, and a token alone before a registry's host (`ghp_...@ghcr.io/x`). Each piece of a generated
password starts with the marker PW, which nothing else the tool prints holds."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchimages import values
from torchimages.cli.entry import main

MARK = "PW"
PIECE = st.from_regex(r"[A-Za-z][0-9][A-Za-z0-9]{3,7}", fullmatch=True)  # a letter and a digit: no word printed
SEPARATOR = st.sampled_from([" ", "  ", " @", "@ ", " '", "' ", ' "', " %20", "% ", " x@y "])
USER = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789._-"), min_size=1, max_size=10)


@st.composite
def passwords(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A password holding a blank, its pieces each starting with MARK (so any piece said shows it)."""
    pieces = draw(st.lists(PIECE, min_size=2, max_size=4))
    seps = [draw(SEPARATOR) for _ in pieces[1:]]
    text = MARK + pieces[0] + "".join(sep + MARK + piece for sep, piece in zip(seps, pieces[1:], strict=True))
    return text, pieces


# (arguments with {url} or {login}, or None: the value is a setting's), the setting, the value's shape
PATHS = [
    (("build", "--mirror", "{value}", "x"), None, "http://{login}@mirror.example/debian"),
    (("build", "--mirror", "{value}", "x"), None, "debian=http://{login}@mirror.example/debian"),
    (("build", "--mirror", "{value}", "x"), None, "deb http://{login}@mirror.example/debian bookworm main"),
    (("plan", "--index-url", "{value}", "x"), None, "https://{login}@pypi.example/simple"),
    (("plan", "--extra-index-url", "{value}", "x"), None, "https://{login}@pypi.example/simple"),
    (("plan", "--find-links", "{value}", "x"), None, "https://{login}@pypi.example/wheels/"),
    (("plan", "--base-registry", "{value}", "x"), None, "{login}@ghcr.io/org"),
    (("settings",), "TORCHIMAGES_INDEX_URL", "https://{login}@pypi.example/simple"),
    (("settings",), "TORCHIMAGES_MIRROR", "deb http://{login}@mirror.example/debian bookworm main"),
    (("settings",), "TORCHIMAGES_BASE_REGISTRY", "{login}@ghcr.io/org"),
]


def said(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out + err


@pytest.fixture
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("TORCHIMAGES_")]:
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("no_settings")
@pytest.mark.parametrize(("args", "setting", "shape"), PATHS, ids=[f"{p[1] or p[0][1]}:{p[2][:12]}" for p in PATHS])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=USER, password=passwords())
def test_no_output_line_holds_a_password_with_blanks(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    setting: str | None,
    shape: str,
    user: str,
    password: tuple[str, list[str]],
) -> None:
    value = shape.format(login=f"{user}:{password[0]}")
    if setting is not None:
        monkeypatch.setenv(setting, value)
    code, output = said(capsys, [a.format(value=value) for a in args])
    assert code == 2, output
    assert MARK not in output, output
    assert not [piece for piece in password[1] if piece in output], output


@pytest.mark.usefixtures("no_settings")
@pytest.mark.parametrize(
    "value",
    [
        "debian=http://user:pa ss@host/debian",
        "deb http://user:pa ss@host/debian bookworm main",
        "deb [arch=amd64] http://user:pa ss@host/debian bookworm main",
    ],
)
def test_a_mirror_login_with_a_blank_is_refused_without_it(capsys: pytest.CaptureFixture[str], value: str) -> None:
    """The `deb` line's first word (`http://user:pa`) was refused alone: its password piece and urllib's message
    ("Port could not be cast to integer value as 'pa'") were said."""
    code, output = said(capsys, ["build", "--mirror", value, "x"])
    assert code == 2 and "http://host/debian" in output, output
    assert "pa" not in output.split("--mirror:")[-1].replace("password", ""), output


def test_urllib_s_message_is_never_quoted() -> None:
    with pytest.raises(values.BadValue) as refused:
        values.url("http://user:SECRETPIECE")
    assert "SECRETPIECE" not in refused.value.reason and "is no port" in refused.value.reason


@pytest.mark.usefixtures("no_settings")
@pytest.mark.parametrize(
    "token",
    [
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "glpat-abcdefghij0123456789",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "0123456789abcdef0123456789abcdef01234567",
    ],
)
def test_a_token_alone_before_a_registry_is_never_said(capsys: pytest.CaptureFixture[str], token: str) -> None:
    code, output = said(capsys, ["plan", "--base-registry", f"{token}@ghcr.io/org", "x"])
    assert code == 2 and "'ghcr.io/org'" in output and "no credentials" in output, output
    assert token not in output and token[:8] not in output, output


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("'registry.example:5000/x@sha256:" + "0" * 64 + "': not found", None),  # a digest's '@' ends no login
        ("error: 'https://host:8080/simple' did not answer", None),
        ("jenkins-build-automation@git.corp.example/x", "git.corp.example/x"),  # a message hides a user alone
        ("mail jenkins@corp.example", None),  # no registry's path: an e-mail, kept
        ("'user:top secret@ghcr.io/x': refused", "'ghcr.io/x': refused"),
        ("https://u:a b@h1/ and https://v:c d@h2/", "https://h1/ and https://h2/"),
        ("https://host:8080/x and https://u:a b@h", "https://host:8080/x and https://h"),
        ("http://u:a b@c d@host/", "http://host/"),
    ],
)
def test_hide_logins_reads_a_login_with_blanks(text: str, kept: str | None) -> None:
    assert values.hide_logins(text) == (text if kept is None else kept)
