"""One validator each for references, registries, hosts, URLs, wheel sources and digests: what each accepts,
what each refuses and why, and (hypothesis) that no text makes one fail any other way."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchimages import registry, values

HEX = "0123456789abcdef" * 4
DIGEST = "sha256:" + HEX
# Pieces that hostile and nearly valid values are made of.
PIECES = [
    "ghcr.io", "localhost", "localhost:5000", "127.0.0.1:5000", "[::1]:5000", "a", "b1", "A", "/", "//", ".", "..",
    ":", ":1", ":0", ":99999", "@", "@" + DIGEST, DIGEST, "sha256:", "-", "_", "__", "$(", "$(id)", ")", " ", "\n",
    "\t", "\x00", "\x1b[31m", "\u200b", "\udcff", "é", "http://", "https://", "file://", "file:///tmp", "ftp://",
    "?q=1", "#f", "%20", "user:pw@", "{tag}", "x" * 130,
]  # fmt: skip
hostile = st.one_of(
    st.text(max_size=40),
    st.text(st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF) | st.characters(), max_size=10),
    st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
)


@pytest.mark.parametrize(
    ("text", "domain", "path", "tag", "digest"),
    [
        ("ubuntu", "", "ubuntu", "", ""),
        ("ubuntu:24.04", "", "ubuntu", "24.04", ""),
        ("nvidia/cuda:12.6.3-devel-ubuntu24.04", "", "nvidia/cuda", "12.6.3-devel-ubuntu24.04", ""),
        ("localhost:5000/a/b:1", "localhost:5000", "a/b", "1", ""),
        ("[::1]:5000/a__b/c-d", "[::1]:5000", "a__b/c-d", "", ""),
        ("Registry.Example.COM/x@" + DIGEST, "Registry.Example.COM", "x", "", DIGEST),
        ("a/b:_x@" + DIGEST, "", "a/b", "_x", DIGEST),
    ],
)
def test_references_are_split_by_the_grammar(text: str, domain: str, path: str, tag: str, digest: str) -> None:
    assert values.reference(text) == values.ImageReference(domain, path, tag, digest)
    assert str(values.reference(text)) == text


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("../../etc/passwd", "'..' is no path component"),
        ("a/./b", "'.' is no path component"),
        ("a\udcffb", "not UTF-8"),
        ("a b", "no spaces or control characters"),
        ("a\nb", "no spaces or control characters"),
        ("Ubuntu", "capital letters"),
        ("ubuntu:-1", "not a valid tag"),
        ("ubuntu:" + "x" * 129, "not a valid tag"),
        ("ubuntu@sha256:abc", "the digest after '@'"),
        ("ubuntu@" + DIGEST + "\n", "no spaces or control characters"),
        ("host:0/a", "the port must be"),
        ("-host.io/a", "registry host '-host.io'"),
        ("a/" + "b" * 255, "at most 255"),
        ("", "empty"),
        ("pytörch", "ASCII only"),
    ],
)
def test_bad_references_say_the_rule_and_where(text: str, rule: str) -> None:
    with pytest.raises(values.BadValue) as caught:
        values.reference(text, "--image")
    assert rule in str(caught.value) and str(caught.value).startswith("--image ")
    assert str(caught.value).isprintable()


def test_registry_parse_goes_through_the_grammar() -> None:
    assert registry.parse("ubuntu:24.04") == registry.Reference("docker.io", "library/ubuntu", "24.04")
    with pytest.raises(values.BadValue):
        registry.parse("../../v2/x")
    with pytest.raises(registry.RegistryError, match="not an image reference"):
        registry.resolve_digest("a\udcffb", deadline=1)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("a b", "without spaces"),
        ("..", "registry host '..'"),
        ("http://ghcr.io", "without a scheme"),
        ("$(id)", "is not a registry host"),
        ("ghcr.io/$(id)", "prefix component '$(id)'"),
        ("ghcr.io/../x", "'..' is not a path component"),
        ("ghcr.io/Team", "capital letters"),
        ("ghcr.io:99999", "the port must be"),
        ("user@ghcr.io", "no credentials"),
    ],
)
def test_bad_registries_say_the_rule(text: str, rule: str) -> None:
    with pytest.raises(values.BadValue, match="--temporary-registry") as caught:
        values.registry(text, "--temporary-registry")
    assert rule in caught.value.reason


def test_good_registries_and_hosts_pass() -> None:
    assert values.registry("ghcr.io/team/") == "ghcr.io/team"
    for text in ("localhost", "localhost:5000", "127.0.0.1:5000/a/b", "[::1]:5000"):
        assert values.registry(text) == text
    for text in ("pypi.example", "10.0.0.1:8080", "[::1]"):
        assert values.host(text) == text
    for text in ("http://x", "x/y", "x:0", "", "a b"):
        with pytest.raises(values.BadValue):
            values.host(text, "--trusted-host")


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("http://:8080/", "needs a host"),
        ("https:///simple", "needs a host"),
        ("http://h:0/", "the port must be"),
        ("http://h:99999/", "not a URL"),
        ("ftp://h/", "not ftp"),
        ("http://h/a b", "no spaces"),
        ("http://h\u200b.io/", "without control characters"),
        ("http://-h/", "registry host '-h'"),
        ("file://server/share", "absolute path"),
        ("gopher:x", "not gopher"),
    ],
)
def test_bad_urls_say_the_rule(text: str, rule: str) -> None:
    with pytest.raises(values.BadValue) as caught:
        values.wheel_source(text, "--find-links")
    assert rule in caught.value.reason and str(caught.value).startswith("--find-links ")


def test_good_wheel_sources_pass() -> None:
    for text in (
        "https://wheels.example.org/whl/cu126",
        "http://user:pw@10.0.0.1:8080/simple/",
        "http://[::1]:8000/",
        "file:///srv/wheels",
        "/srv/wheels",
        "wheels",
        "/home/me/my wheels",  # a folder is served on loopback: its name never reaches pip.conf
    ):
        assert values.wheel_source(text) == text


SECRET = "topsecret"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (f"https://user:{SECRET}@host:99999/simple", "not a URL: the part after the host's ':' is no port"),
        (f"https://user:{SECRET}@host:0/simple", "the port must be"),
        (f"https://user:{SECRET}@-host/simple", "registry host '-host'"),
        (f"ftp://user:{SECRET}@host/simple", "not ftp"),
        (f"https://user:{SECRET}@host/a\x1b[31m", "control characters"),
        (f"https://user:top/{SECRET}@host/simple", "percent-encode it"),  # pip would read the host as `user`
        (f"https://user:top{SECRET}#x@host/simple", "percent-encode it"),
        (f"https://user:top/{SECRET}@host:99999/simple", "not a URL: the part after the host's ':' is no port"),
    ],
)
def test_a_refused_url_never_says_its_login(text: str, rule: str) -> None:
    """Issue 45: --index-url, --extra-index-url, --find-links and their settings refuse a URL with its login cut."""
    for validator in (values.url, values.wheel_source):
        with pytest.raises(values.BadValue) as caught:
            validator(text, "--index-url")
        assert rule in caught.value.reason, str(caught.value)
        assert SECRET not in str(caught.value) and "user" not in str(caught.value) and "top" not in str(caught.value)


def test_a_url_with_a_percent_encoded_login_is_taken_whole() -> None:
    for text in ("https://user:top%2Fsecret@host/simple", "https://u%40corp:p%23w@host:8443/simple?x=a@b"):
        assert values.url(text) == text


def test_no_bad_value_keeps_a_login() -> None:
    """A refusal of any validator (a reference, a size...) never holds a URL's login, in its value or its reason."""
    refused = values.BadValue("--opt", f"x https://u:{SECRET}@h/ y", f"because http://u:{SECRET}@h/")
    assert SECRET not in str(refused) and SECRET not in refused.value + refused.reason
    assert str(refused) == "--opt 'x https://h/ y': because http://h/"


@pytest.mark.parametrize("text", [DIGEST + "\n", "\n" + DIGEST, DIGEST.upper(), DIGEST[:-1], "sha256:", "md5:00", ""])
def test_a_digest_is_the_whole_text(text: str) -> None:
    assert not values.is_digest(text)
    with pytest.raises(values.BadValue, match="64 lowercase hex"):
        values.digest(text, "lock")
    assert values.digest(DIGEST) == DIGEST


@settings(max_examples=300, deadline=None)
@given(hostile)
def test_no_text_breaks_a_validator(text: str) -> None:
    """Each validator returns or raises BadValue (a printable message naming where); what passes is sound."""
    for validator in (values.reference, values.repository, values.registry, values.host, values.wheel_source):
        try:
            found = validator(text, "--opt")
        except values.BadValue as exc:
            assert str(exc).startswith("--opt ") and str(exc).isprintable(), str(exc)
            continue
        if validator is not values.wheel_source:
            assert text.isascii() and text.isprintable() and " " not in text and ".." not in text.split("/")
        if validator is values.reference:
            assert isinstance(found, values.ImageReference) and str(found) == text
    try:
        url = values.url(text, "--index-url")
    except values.BadValue:
        pass
    else:
        assert urllib.parse.urlsplit(url).hostname
    assert values.is_digest(text) == (len(text) == 71 and text.startswith("sha256:") and set(text[7:]) <= set(HEX))


@pytest.mark.parametrize("text", ["default", "none", "host"])
def test_a_build_network_is_one_buildkit_knows(text: str) -> None:
    assert values.network(text) == text


@pytest.mark.parametrize("text", ["", "bridge", "a b", "host;id", "HOST", "container:x"])
def test_other_networks_are_refused(text: str) -> None:
    with pytest.raises(values.BadValue, match="BuildKit runs RUN steps on default, none, host only"):
        values.network(text)


@pytest.mark.parametrize("text", ["gzip", "zstd"])
def test_a_push_compresses_with_gzip_or_zstd(text: str) -> None:
    assert values.compression(text) == text


@pytest.mark.parametrize("text", ["", "ZSTD", "zstd:chunked", "gz", "none", "zstd ", "estargz"])
def test_other_compressions_are_refused(text: str) -> None:
    with pytest.raises(values.BadValue, match="a push compresses layers with gzip or zstd"):
        values.compression(text)


@pytest.mark.parametrize("text", ["2g", "512m", "1.5GiB", "1073741824", "64MB", "0.5g"])
def test_docker_sizes_are_taken(text: str) -> None:
    assert values.size(text) == text


@pytest.mark.parametrize("text", ["", "0", "0g", "0.0m", "-5", "banana", "2 g", "2gg", "1e9", "\u0662g"])
def test_other_sizes_are_refused(text: str) -> None:
    with pytest.raises(values.BadValue, match="a size is a number above zero"):
        values.size(text)


@pytest.mark.parametrize(
    "text",
    [
        "http://mirror.example.org/debian",
        "file:///srv/mirror",
        "deb http://mirror.example.org/debian bookworm main",
        "deb [trusted=yes] http://127.0.0.1:3142/debian bookworm main contrib",
        "deb [ arch=amd64 ] http://mirror.example.org/debian bookworm main",  # sources.list(5): blanks allowed
        "deb [ arch=amd64 signed-by=/k.gpg ] http://ci:pw@mirror.example.org/debian bookworm main",
    ],
)
def test_mirrors_mmdebstrap_takes_are_taken(text: str) -> None:
    assert values.mirror(text) == text


def test_the_url_of_a_line_with_blank_separated_options_is_its_url() -> None:
    line = "deb [ arch=amd64 signed-by=/k.gpg ] http://ci:pw@mirror.example.org/debian bookworm main"
    login = values.mirror_login(line)
    assert login is not None and login.machine == "http://mirror.example.org/debian" and login.user == "ci"
    assert values.mirror_without_login(line) == line.replace("ci:pw@", "")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ftp://x y",
        "http://:80/",
        "deb http://h",
        "deb ftp://h/ bookworm main",
        "a\nb",
        "x y",
        "deb [ arch=amd64 http://h/ bookworm main",  # options that never close
        "deb [ arch=amd64 ] bookworm main",
    ],
)
def test_other_mirrors_are_refused(text: str) -> None:
    with pytest.raises(values.BadValue):
        values.mirror(text)
