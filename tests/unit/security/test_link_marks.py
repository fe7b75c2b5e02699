"""The marks a link at a path judged by content is judged by (leaks.LINK_MARKS), as content.Search finds them:
only in a small text file, each part behind its literals (leaks.LINK_PARTS), and what was not searched said.
The searched result is compared with the marks' own regexes over the whole text (the rule it must equal)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from torchimages.security import content, leaks

RC = b"export http_proxy=http://bob:hunter2hunter2@proxy:3128\n"
SHELL = leaks.SHELL_LOGIN.pattern  # the shells' and environment files' mark

# pieces of the marks' shapes and of what is near them, joined at random
FRAGMENTS = [
    b"://",
    b"@",
    b":",
    b"=",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b'"',
    b"'",
    b"#",
    b"/",
    b"/t/",
    b"-",
    b"_",
    b"http",
    b"https",
    b"proxy",
    b"user",
    b"-u",
    b"-U",
    b"--user",
    b"proxy-user",
    b"pass",
    b"passwd",
    b"PassWord",
    b"p-a_ss-W_d",
    b"http_password",
    b"oauth2-bearer",
    b"header",
    b"-H",
    b"Authorization",
    b"AUTHORIZATION",
    b"bob",
    b"hunter2hunter2",
    b"proxy.example:3128",
    b"ghp_abcdefghijklmnopqrstu",
    b"tok_abcdefgh12345678",
    b"x" * 300,
    b"host",
    b"export ",
    b"HTTPS_PROXY",  # a proxy's login without a scheme (leaks.SHELL_LOGIN's second part)
    b"DEFAULT=",
    b"setenv ",
    b"$TOKEN",
    b"password",
]


def searched(data: bytes, chunk: int = 1 << 20) -> content.Facts:
    search = content.Search((), None, len(data))
    for at in range(0, len(data), chunk):
        search.feed(data[at : at + chunk])
    return search.facts()


def whole(data: bytes) -> frozenset[bytes]:
    """The marks' own regexes over the whole text: what the parts must find."""
    return frozenset(mark.pattern for mark in leaks.LINK_MARKS if mark.search(data))


def test_every_link_mark_is_split_into_parts() -> None:
    assert set(leaks.LINK_PARTS) == {mark.pattern for mark in leaks.LINK_MARKS}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_the_parts_find_what_the_whole_marks_find(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert searched(data).linked == whole(data)


def test_each_mark_found_in_a_small_text_file() -> None:
    cases = {
        RC: SHELL,
        b"  http_proxy = http://u:pw@proxy.example/\n": leaks.WGET_LOGIN.pattern,
        b"# a wgetrc\nPROXY-PASSWD = s3cret\n": leaks.WGET_LOGIN.pattern,
        b'user = "bob:s3cret"\n': leaks.CURL_LOGIN.pattern,
        b"-U bob:s3cret\n": leaks.CURL_LOGIN.pattern,
        b'# the user\'s settings: ask the user\nuser = "bob:s3cret"\n': leaks.CURL_LOGIN.pattern,
        b"export P=git+https://bob:hunter2hunter2@git.example/r\n": SHELL,
        b"export HTTPS_PROXY=bob:hunter2hunter2@proxy.example:3128\n": SHELL,
        b"setenv http_proxy bob:hunter2hunter2@proxy:3128\n": SHELL,
        b"--oauth2-bearer TOKEN\n": leaks.CURL_LOGIN.pattern,
        b'header = "Authorization: Bearer T"\n': leaks.CURL_LOGIN.pattern,
        b"channels:\n  - https://conda.example/t/abcdefgh1234/main\n": leaks.CONDA_LOGIN.pattern,
    }
    for data, pattern in cases.items():
        facts = searched(b"# text\n" * 100 + data)
        assert pattern in facts.linked, data
        assert facts.unread == ""


def test_a_login_after_a_long_run_without_a_blank_is_found() -> None:
    data = b"x" * 5000 + b"://" + b"y" * 5000 + b" export p=http://bob:hunter2hunter2@proxy:3128\n"
    assert searched(data).linked == whole(data) == {m.pattern for m in leaks.LINK_MARKS}
    run = b"a" * 300 + b" http://bob:hunter2hunter2@proxy" + b"/" * 5000  # the blank after: 5000 bytes on
    assert searched(run).linked == whole(run) != frozenset()


def test_a_binary_file_is_not_searched_and_that_is_said() -> None:
    facts = searched(RC + b"\0" + RC)
    assert facts.linked == frozenset()
    assert "binary" in facts.unread
    assert not facts  # not a fact by itself: a binary is not kept for it


def test_a_file_larger_than_the_bound_is_not_searched_and_that_is_said() -> None:
    big = RC + b"#" * leaks.LINK_READ_MAX
    facts = searched(big)
    assert facts.linked == frozenset()
    assert "larger than 1 MiB" in facts.unread
    at_bound = RC + b"#" * (leaks.LINK_READ_MAX - len(RC))
    assert searched(at_bound).linked == whole(RC)
    assert searched(at_bound).unread == ""


def test_a_private_key_in_a_binary_is_still_found() -> None:
    key = b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
    facts = searched(b"\0" * 10 + key + b"\0" * (2 << 20))
    assert facts.key == "-----BEGIN PRIVATE KEY-----"
