"""The fourth outside attack on the secrets gate's forms and on hiding logins (findings 7, 9, 10, 11): a login with
a blank after a short option or a control blank, shell forms that are no variable nor placeholder, a home folder
named `test`, and an anchored mark at a chunk's overlap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.cli.test_spaced_logins_never_said import MARK, USER, passwords
from tests.unit.security.test_layers import BASE, keys, layer, scan
from torchimages import values
from torchimages.security import content, layers, leaks

# 1 (finding 9): a password with a blank after a short option (`curl -x u:pa ss@proxy`, `-uuser:pa ss@proxy`), or
# after a blank that is not a space (a `\r` a terminal overwrites the line at, a tab): hidden
SPACED = [
    ("curl -x user:pa ss@proxy.corp:3128 https://x", "curl -x proxy.corp:3128 https://x"),
    ("curl -uuser:pa ss@proxy.corp https://x", "curl -uproxy.corp https://x"),
    ("curl -U bob:pa ss@proxy.corp", "curl -U proxy.corp"),
    ("-uuser:pa ss@proxy.corp", "-uproxy.corp"),
    ("progress\ruser:pa ss@ghcr.io/org", "progress\rghcr.io/org"),
    ("'\ruser:pa ss@ghcr.io/org'", "'\rghcr.io/org'"),
    ("a\tuser:pa ss@host", "a\thost"),
    ("https://u:secret\r@host", "https://host"),
    ("said: 'https://u:pa ss\r@host/x'", "said: 'https://host/x'"),
]


@pytest.mark.parametrize(("text", "kept"), SPACED)
def test_a_login_with_a_blank_after_a_short_option_or_a_control_is_hidden(text: str, kept: str) -> None:
    assert values.hide_logins(text) == kept


@pytest.mark.parametrize("value", ["\ru:PWa1 PWb2@ghcr.io/org", "x\ru:PWa1 PWb2@ghcr.io/org", "x\tu:PWa1 PWb2@h/x"])
def test_a_refused_value_with_a_control_never_says_its_password(value: str) -> None:
    with pytest.raises(values.BadValue) as refused:
        values.registry(value, "--base-registry:")
    assert "PW" not in str(refused.value), str(refused.value)


@settings(max_examples=200, deadline=None)
@given(
    user=USER,
    password=passwords(),
    before=st.sampled_from(["curl -x ", "curl -U ", "curl -u", "-x", "-u ", "x\r", "\r", "a\t", "x\x0b", "'\r"]),
    host=st.sampled_from(["proxy.corp:3128", "ghcr.io/org", "host"]),
)
def test_no_piece_of_a_spaced_password_after_an_option_or_a_control_is_said(
    user: str, password: tuple[str, list[str]], before: str, host: str
) -> None:
    shown = values.hide_logins(f"{before}{user}:{password[0]}@{host} done")
    assert MARK not in shown and not [piece for piece in password[1] if piece in shown], shown
    assert shown.endswith(f"{host} done"), shown


# 2 (finding 10): what a shell or a tool would send decides. A command substitution is no variable (`$(echo${IFS}pw)`
# sends pw; in a .env or environment.d file it is sent as written); `<...>` is a placeholder only holding a
# placeholder's word (`<password>`, `<token>`, `<your-...>`), never `<hunter2>`; `Password` (not all lower or upper
# case) is what someone typed as a password
REAL = ["$(echo${IFS}hunter2)", "$(printf${IFS}hunter2)", "`echo${IFS}hunter2`", "<hunter2>", "<hunter>", "Password",
        "PassWord", "<Password1>"]  # fmt: skip
NO_SECRET = ["password", "PASSWORD", "passwd", "<password>", "<pass>", "<token>", "<your-proxy-password>",
             "<YOUR_TOKEN>", "<PROXY_PASSWORD>", "<api-key>", "<...>", "${PROXY_PASS}", "$PROXY_PASS", "***",
             "xxx"]  # fmt: skip
FORMS = [
    ("home/u/.bashrc", "export http_proxy=http://bob:{}@proxy.corp:3128\n"),
    ("home/u/.bashrc", "export https_proxy=bob:{}@proxy.corp:3128\n"),
    ("app/.env", "DATABASE_URL=postgres://app:{}@db.corp:5432/app\n"),
    ("etc/environment.d/10-proxy.conf", "http_proxy=http://bob:{}@proxy.corp:3128\n"),
    ("home/u/.curlrc", 'proxy = "http://bob:{}@proxy.corp:3128"\n'),
    ("etc/wgetrc", "http_proxy = http://bob:{}@proxy.corp:3128/\n"),
    ("home/u/.condarc", "channels:\n  - https://bob:{}@conda.corp/main\n"),
]


@pytest.mark.parametrize("password", REAL)
@pytest.mark.parametrize(("name", "form"), FORMS, ids=[n for n, _ in FORMS])
def test_a_password_shaped_like_a_command_or_a_placeholder_is_found(name: str, form: str, password: str) -> None:
    content = form.format(password).encode()
    assert keys(scan(layer(*BASE), layer((name, content)))) == ["/" + name], content


@pytest.mark.parametrize("password", NO_SECRET)
@pytest.mark.parametrize(("name", "form"), FORMS, ids=[n for n, _ in FORMS])
def test_a_variable_or_a_placeholder_still_passes(name: str, form: str, password: str) -> None:
    content = form.format(password).encode()
    assert keys(scan(layer(*BASE), layer((name, content)))) == [], content


@pytest.mark.parametrize("password", REAL)
def test_the_marks_read_such_a_password_as_one(password: str) -> None:
    line = f"export http_proxy=http://bob:{password}@proxy.corp:3128\n".encode()
    assert leaks.SHELL_LOGIN.search(line) is not None
    assert leaks.SHELL_LOGIN.search(f"export http_proxy=bob:{password}@proxy.corp:3128\n".encode()) is not None


# 3 (finding 11): a home, /etc's or /opt's folder named `test` or `docs` is a user's or an application's: a `.env`
# there is judged (the folders below such a root still say a test's: test_attack8_forms); a package's
# (site-packages, dist-packages, node_modules, conda's pkgs) is not
ENV_LOGIN = b"DATABASE_URL=postgres://app:hunter2@db.corp:5432/app\n"


@pytest.mark.parametrize(
    "name",
    [
        "home/test/.env",
        "home/tests/project/.env.production",
        "etc/test/.env",
        "etc/docs/app/.env",
        "opt/test/.env",
    ],
)
def test_a_env_file_of_a_home_etc_or_opt_folder_named_test_is_judged(name: str) -> None:
    assert leaks.credential_rule("/" + name) is not None
    assert keys(scan(layer(*BASE), layer((name, ENV_LOGIN)))) == ["/" + name]


@pytest.mark.parametrize(
    "name",
    [
        "home/u/.local/lib/python3.11/site-packages/foo/tests/.env",
        "home/u/.cache/pypoetry/virtualenvs/x/lib/python3.11/site-packages/foo/docs/.env",
        "opt/venv/lib/python3.11/site-packages/foo/test/.env",
        "opt/app/node_modules/foo/.env.test",
        "opt/conda/pkgs/x/info/test/.env.ci",
        "usr/lib/python3/dist-packages/foo/tests/.env",
        "srv/api/test/.env",
    ],
)
def test_a_package_s_env_file_is_still_not_judged(name: str) -> None:
    assert leaks.credential_rule("/" + name) is None
    assert keys(scan(layer(*BASE), layer((name, ENV_LOGIN)))) == []


# 4 (finding 7): a mark anchored at a line's start (rclone's `pass = ...`, curl's `-u user:password`) is searched in a
# file over 1 MiB in chunks; the overlap a chunk is searched with starts mid-line, where no line starts
CHUNK = layers.CHUNK
PAD = b"# a comment that pads the file to its first chunk's end\n"


def big(line_head: bytes, line_rest: bytes, at: int) -> bytes:
    """A text over 1 MiB of comment lines with one line `line_head + line_rest`, `line_rest` starting at `at`."""
    before = PAD * ((at - len(line_head) - 1) // len(PAD))
    before += b"#" * (at - len(line_head) - len(before) - 1) + b"\n"
    text = before + line_head + line_rest + b"\n" + PAD * (200_000 // len(PAD))
    assert text[at : at + len(line_rest)] == line_rest and text[at - len(line_head) - 1] == ord("\n")
    return text


OVERLAP_START = CHUNK - leaks.MATCH_MAX  # where the overlap the second chunk is searched with starts
ANCHORED = [
    ("home/u/.config/rclone/rclone.conf", b"description = my by", b"pass = not-a-password-option"),
    ("home/u/.curlrc", b"# see man curl for", b'-u "user:password" and other options'),
    ("home/u/.config/rclone/rclone.conf", b"description = my\t ", b"pass = not-a-password-option"),
    ("home/u/.curlrc", b"# see man curl for ", b'-u "user:password" and other options'),
]


@pytest.mark.parametrize(("name", "head", "rest"), ANCHORED, ids=[f"{n}:{h[-3:]!r}" for n, h, _ in ANCHORED])
@pytest.mark.parametrize("at", [OVERLAP_START, OVERLAP_START - 1, OVERLAP_START + 1])
def test_an_anchored_mark_mid_line_at_a_chunk_s_overlap_is_no_finding(
    name: str, head: bytes, rest: bytes, at: int
) -> None:
    text = big(head, rest, at)
    assert len(text) > CHUNK
    assert keys(scan(layer(*BASE), layer((name, text)))) == []
    whole = leaks.credential_rule("/" + name)
    assert whole is not None and whole.mark is not None and whole.mark.search(text) is None  # read whole: none


@pytest.mark.parametrize(("name", "head", "rest"), ANCHORED, ids=[f"{n}:{h[-3:]!r}" for n, h, _ in ANCHORED])
@pytest.mark.parametrize("at", [OVERLAP_START, CHUNK, CHUNK - 3, OVERLAP_START + 7])
def test_an_anchored_mark_starting_a_line_at_a_chunk_s_overlap_is_found(
    name: str, head: bytes, rest: bytes, at: int
) -> None:
    text = big(b"", rest, at)
    assert len(text) > CHUNK
    assert keys(scan(layer(*BASE), layer((name, text)))) == ["/" + name]


@pytest.mark.parametrize("size", [1000, 7, leaks.MATCH_MAX])
def test_small_chunks_never_start_a_line_mid_line(size: int) -> None:
    """Fed in chunks of any size, a search starts a line only where the file does (the line's middle is where the
    overlap of a later chunk starts)."""
    at = (40_000 + leaks.MATCH_MAX) // size * size - leaks.MATCH_MAX
    text = big(b"description = my ", b"pass = not-a-password-option", at)[:60_000]
    rule = leaks.credential_rule("/home/u/.config/rclone/rclone.conf")
    assert rule is not None
    search = content.Search([], rule.mark, len(text))
    for start in range(0, len(text), size):
        search.feed(text[start : start + size])
    assert not search.facts().marked
    curlrc = big(b"# see man curl for ", b'-u "user:password" and other options', at)[:60_000]
    linked = content.Search([], None, len(curlrc))  # what a link at a curlrc's path would be judged by
    for start in range(0, len(curlrc), size):
        linked.feed(curlrc[start : start + size])
    assert not linked.facts().linked and not linked.facts().unread
    found = content.Search([], rule.mark, len(text) + 9)
    found.feed(b"pass = x\n")
    assert found.facts().marked  # the file's first line starts the first chunk
