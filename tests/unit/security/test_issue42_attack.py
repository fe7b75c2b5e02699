"""Issue 42's outside attack on the secrets gate and the reading of a URL's login: a credentials file placed by a
link, a user holding '@', catastrophic regex time, forms the rules missed, a user alone taken for a secret, a
refusal that says a password."""

from __future__ import annotations

import re
import tarfile
import time

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.unit.security.test_layers import BASE, _joined, layer, link, scan
from torchimages import values
from torchimages.security import leaks

PROXY_RC = b"export http_proxy=http://bob:hunter2hunter2@proxy:3128\n"
WGETRC = b"password = hunter2hunter2\n"


def details(*tarballs: bytes) -> list[tuple[str, str]]:
    result = scan(*tarballs)
    assert result.scanned, result.note
    return [(f.key, f.detail.removeprefix(f.key + ": ")) for f in result.findings]


# --- 1. a link at a path judged by content holds its target's content, under the rule of the link's path ------


@pytest.mark.parametrize(
    ("target", "content", "at", "linkname", "kind", "what"),
    [
        ("opt/cfg/rc", PROXY_RC, "home/u/.bashrc", "opt/cfg/rc", tarfile.LNKTYPE, "a shell startup file"),
        ("opt/cfg/proxy.sh", PROXY_RC, "etc/profile.d/proxy.sh", "/opt/cfg/proxy.sh", tarfile.SYMTYPE, "a shell"),
        ("opt/cfg/wgetrc.real", WGETRC, "etc/wgetrc", "/opt/cfg/wgetrc.real", tarfile.SYMTYPE, "a wgetrc"),
        ("opt/cfg/wgetrc.real", WGETRC, "etc/wgetrc", "../opt/cfg/wgetrc.real", tarfile.SYMTYPE, "a wgetrc"),
    ],
)
def test_a_link_is_judged_by_its_target_s_content_under_the_link_s_rule(
    target: str, content: bytes, at: str, linkname: str, kind: bytes, what: str
) -> None:
    name = "a hard link" if kind == tarfile.LNKTYPE else "a symbolic link"
    found = details(layer(*BASE), _joined([(target, content)], (link(at, linkname, kind),)))
    assert [key for key, _ in found] == ["/" + at]
    assert found[0][1].startswith(f"{name} to /{target}, {what}")


def test_a_symlink_met_before_its_target_is_judged_when_the_target_comes() -> None:
    """Docker writes a layer's entries in path order: /etc/wgetrc before the /opt file it points to."""
    body = _joined([], (link("etc/wgetrc", "/opt/cfg/wgetrc.real", tarfile.SYMTYPE),))[:-1024]
    found = details(layer(*BASE), body + layer(("opt/cfg/wgetrc.real", WGETRC)))
    assert found == [
        ("/etc/wgetrc", "a symbolic link to /opt/cfg/wgetrc.real, a wgetrc with a password or a login in a URL")
    ]


def test_a_link_to_a_harmless_file_is_no_finding() -> None:
    harmless = b"export http_proxy=http://proxy:3128\nexport REPO=ssh://git@github.com/org/repo.git\n"
    assert details(layer(*BASE), _joined([("opt/cfg/rc", harmless)], (link("home/u/.bashrc", "opt/cfg/rc"),))) == []


# --- 2. a user holding '@' (an e-mail), in the gate and in values ---------------------------------------------

EMAIL_LINE = "deb http://john@corp.example:APIKEY12345678@mirror.example/debian bookworm main"


def test_a_user_holding_an_at_is_read_whole() -> None:
    assert [m[2] for m in leaks.USERINFO.finditer(EMAIL_LINE.encode())] == [b"john@corp.example:APIKEY12345678"]
    assert leaks.credential_rule("/etc/apt/sources.list") is not None
    assert values.mirror_without_login(EMAIL_LINE) == "deb http://mirror.example/debian bookworm main"
    login = values.mirror_login(EMAIL_LINE)
    assert login is not None and (login.user, login.password) == ("john@corp.example", "APIKEY12345678")


def test_an_at_ending_a_user_alone_is_the_login_s_end() -> None:
    """The login ends at the first '@' a host follows: a later '@' in the path is no password's."""
    assert values.mirror_without_login("http://u@proxy:3128/foo@bar x") == "http://proxy:3128/foo@bar x"


NAME = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789._-"), min_size=1, max_size=12)
# a password that does not end the host before it (`john@corp:8080/x@host` reads as a user and a host:port)
# and that is not a shell variable (`$_`, `$x1`: the gate reads those as a reference, not a password) nor a
# placeholder (`*`, `***`, `xxx`, `password`: none is a secret, by rule)
PASSWORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789!$%^*(_+-=~:"), min_size=1, max_size=20).filter(
    lambda p: re.match(r"\$[A-Za-z_]", p) is None and re.fullmatch(r"\*+|x{3,}|password|passwd", p) is None
)


@given(NAME, NAME, PASSWORD, NAME)
@example("0", "0", "*!", "0")  # (hypothesis drew `*` alone, a placeholder: the filter above leaves it out)
def test_an_e_mail_user_s_login_is_found_and_hidden(name: str, domain: str, password: str, host: str) -> None:
    url = f"https://{name}@{domain}:{password}@{host}.example/simple"
    text = f"index-url = {url}\n"
    assert leaks.SECRET_USERINFO.search(text.encode()) is not None
    assert values.mirror_without_login(text) == f"index-url = https://{host}.example/simple\n"
    shown = values.hide_logins(text)
    assert f"{domain}:{password}" not in shown and f"{name}@{domain}" not in shown


# --- 3. linear time -----------------------------------------------------------------------------------------

SHAPES = [b"a://", b"a://b:", b"a://b:c@", b"a://x@", b"ab://" + b"x@" * 10, b"a" * 40 + b"://", b"x" * 4096, b":@"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[:12].decode())
def test_adversarial_text_is_searched_in_linear_time(shape: bytes) -> None:
    """Guards complexity, not speed: 2 MB of each shape took 16 s to minutes with a backtracking reading (O(n^2));
    a linear one takes a fraction of a second, on a loaded machine a few."""
    data = shape * (2_000_000 // len(shape))
    for pattern in (leaks.USERINFO, leaks.SECRET_USERINFO, leaks.WGET_LOGIN, leaks.CURL_LOGIN, leaks.CONDA_LOGIN):
        started = time.monotonic()
        pattern.search(data)
        assert time.monotonic() - started < 5, pattern.pattern[:40]
    started = time.monotonic()
    values.hide_logins(data.decode())
    assert time.monotonic() - started < 5


# --- 4. forms and paths the rules missed ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/etc/wgetrc", b"user = bob\npass_word = hunter2secret\n"),
        ("/etc/wgetrc", b"http-pass-word = hunter2secret\n"),
        ("/root/.curlrc", b'header = "Authorization: Bearer abcdefghijklmnop"\n'),
        ("/root/.curlrc", b'-H "Authorization: Basic dXNlcjpwYXNz"\n'),
        ("/root/.condarc", b"channel_alias: https://conda.anaconda.org/t/abcdef123456\n"),
        ("/root/.conda/condarc", b"channels:\n  - https://u:p@conda.example/x\n"),
        ("/opt/miniconda3/condarc", b"channels:\n  - https://u:p@conda.example/x\n"),
        ("/opt/conda/condarc", b"channels:\n  - https://u:p@conda.example/x\n"),
        ("/etc/zsh/zshrc", PROXY_RC),
        ("/etc/zsh/zshenv", PROXY_RC),
        ("/etc/zshenv", PROXY_RC),
        ("/etc/environment.d/90proxy.conf", b"http_proxy=http://u:pass@proxy:3128\n"),
        ("/etc/profile.d/sub/proxy.sh", PROXY_RC),
        ("/root/.bashrc", b"export ALL_PROXY=socks5h://u:pass@proxy:1080&\n"),
        ("/root/.bashrc", b"X=`echo http://u:pass@proxy:1080`\n"),
    ],
)
def test_a_form_the_rules_missed_is_found(path: str, content: bytes) -> None:
    rule = leaks.credential_rule(path)
    assert rule is not None and rule.mark is not None and rule.mark.search(content) is not None, path


def test_a_python_pass_is_no_curl_passphrase() -> None:
    """Every file is searched for the marks a link may be judged by: Python's `pass  # ...` is none."""
    assert leaks.CURL_LOGIN.search(b"    pass  # nothing to do\n") is None


# --- 5. a user alone is no secret, unless it is a token -----------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"export REPO=ssh://git@github.com/org/repo.git\n",
        b"# mirror: https://anonymous@ftp.example/\n",
        b"export URL=https://oauth2@gitlab.example/x\n",
    ],
)
def test_a_user_alone_in_a_shell_file_is_no_finding(content: bytes) -> None:
    rule = leaks.credential_rule("/root/.bashrc")
    assert rule is not None and rule.mark is not None and rule.mark.search(content) is None


def test_a_user_alone_that_is_a_token_is_a_finding() -> None:
    rule = leaks.credential_rule("/root/.bashrc")
    assert rule is not None and rule.mark is not None
    assert rule.mark.search(b"git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r\n") is not None


# --- 6. a refusal never says a password -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "http://john@corp.example:APIKEY12345678@mirror.example:99x/debian",
        "http://john@corp.example:APIKEY12345678@mirror.example:0/debian",
        "http://john@corp.example:APIKEY12345678@mirror..example/debian",
        "http://u:APIKEY12345678@ho^st/debian",
        "deb http://john@corp.example:APIKEY12345678@mirror.example:0/debian bookworm main",
    ],
)
def test_a_refusal_never_says_a_login(value: str) -> None:
    for check in (values.mirror, values.url):
        with pytest.raises(values.BadValue) as refused:
            check(value)
        assert "APIKEY" not in str(refused.value) and "john" not in str(refused.value)
