"""The gate's reading of a URL's login (security/leaks.py USERINFO) is values.py's: a user, then a password of any
non-blank characters up to the first '@' a host follows (issue 42: a password with a '/' or a quote was missed);
an '@' in a URL's path is no login, nor is scp's `git@host:path`."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from torchimages import values
from torchimages.security import leaks

PRINTABLE = "".join(c for c in string.printable if not c.isspace())
USER = st.text(st.sampled_from([c for c in PRINTABLE if c not in "/?#@:"]), min_size=1, max_size=20)
PASSWORD = st.text(st.sampled_from(PRINTABLE), min_size=1, max_size=30).filter(lambda p: "://" not in p)  # a URL
LABEL = st.text(st.sampled_from(string.ascii_lowercase + string.digits), min_size=1, max_size=10)
HOST = st.builds(lambda labels, port: ".".join(labels) + port, st.lists(LABEL, min_size=1, max_size=3),
                 st.sampled_from(["", ":3128", ":8080"]))  # fmt: skip
SCHEME = st.sampled_from(["http", "https", "ftp", "socks5h", "git+https"])
PATH_TEXT = st.text(st.sampled_from([c for c in PRINTABLE if c not in "#?"]), max_size=30)
# how a URL sits in a configuration file: bare, quoted, exported, in apt.conf, a value in JSON or YAML
CONTEXTS = [
    "{url}",
    "http_proxy = {url}\n",
    "export https_proxy='{url}'\n",
    'export HTTP_PROXY="{url}"; export x=1\n',
    'Acquire::http::Proxy "{url}";\n',
    '{{"httpProxy": "{url}"}}',
    "proxy_servers:\n  http: {url}\n",
]


def found(text: str) -> list[str]:
    return [m[2].decode() for m in leaks.USERINFO.finditer(text.encode())]


@given(SCHEME, USER, PASSWORD, HOST, st.sampled_from(["", "/", "/simple/", "/debian@2026/"]), st.sampled_from(CONTEXTS))
def test_a_login_with_any_printable_password_is_found(
    scheme: str, user: str, password: str, host: str, path: str, context: str
) -> None:
    url = f"{scheme}://{user}:{password}@{host}{path}"
    logins = found(context.format(url=url))
    assert logins, url
    if "@" not in password:  # the login is read whole (a password's '@' followed by a host: read up to it)
        assert logins[0] == f"{user}:{password}"


@given(SCHEME, HOST.filter(lambda h: ":" not in h), PATH_TEXT, PATH_TEXT, st.sampled_from(CONTEXTS))
def test_an_at_in_a_path_is_no_login(scheme: str, host: str, before: str, after: str, context: str) -> None:
    url = f"{scheme}://{host}/{before}@{after}"
    assume(url.count("://") == 1)  # a URL in the path is a URL of its own
    assert found(context.format(url=url)) == [], url


@pytest.mark.parametrize(
    ("text", "login"),
    [
        ("http://user:pa/ss@host/", "user:pa/ss"),
        ("http://user:it's@host", "user:it's"),
        ("index-url = https://u:p%40ss@pypi.example.org/simple\n", "u:p%40ss"),
        ("proxy = http://u:p@ss@proxy.example:3128/\n", "u:p@ss"),
        ("https://token@pypi.example.org/simple", "token"),
        ("deb http://u:p@mirror.example/debian@2026/ bookworm main", "u:p"),
    ],
)
def test_the_login_read_is_values_login(text: str, login: str) -> None:
    assert found(text) == [login]
    assert values.mirror_without_login(text) == text.replace(login + "@", "", 1)  # values reads the same login


@pytest.mark.parametrize(
    "text",
    [
        "https://host/pkg@1.0/",
        "git@github.com:org/repo.git",
        "url = https://github.com/pytorch/pytorch.git\n# maintainer: builder@example.org\n",
        "#http_proxy = http://proxy.yoyodyne.com:18023/\n",
        "#header = From: Your Name <username@site.domain>\n",
        "PS1='${debian_chroot:+($debian_chroot)}\\u@\\h:\\w\\$ '\n",
        '{"url": "https://pypi.example.org/simple", "email": "me@example.org"}',
    ],
)
def test_no_login_in_ordinary_text(text: str) -> None:
    assert found(text) == []


def test_a_match_is_bounded_for_the_search_in_chunks() -> None:
    """Every content pattern matches at most MATCH_MAX bytes (content.py's chunks overlap by that much)."""
    longest = "h" * 30 + "://" + "u" * 1024 + ":" + "p" * 1024 + "@" + "a" * 1024 + "/"
    assert len(longest) < leaks.MATCH_MAX
    assert found(longest) == ["u" * 1024 + ":" + "p" * 1024]
    assert found("http://" + "u" * 2000 + ":p@host/") == []  # past the bound: no match, never a longer one
