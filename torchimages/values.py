"""One validator each for the values the tool is handed: image references, registries, hosts, URLs, digests.

Each returns the parsed value or raises `BadValue`, whose message names where the value came from (an
option, an environment variable, a file and line), shows the value escaped (control characters and
undecodable bytes as escapes, a huge value cut) and says the rule it breaks. Nothing here touches the
network or the disk, and the module imports nothing of the package: every layer may use it.

Image references follow the OCI distribution grammar (distribution/reference):

    reference       := name [':' tag] ['@' digest]
    name            := [domain '/'] path-component ['/' path-component]*      (at most 255 characters)
    domain          := host [':' port]        host := domain-component ['.' domain-component]* | '[' IPv6 ']'
    domain-component:= /[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]/
    path-component  := /[a-z0-9]+/ [separator /[a-z0-9]+/]*                 separator := /[_.]|__|-+/
    tag             := /[\\w][\\w.-]{0,127}/                                   digest := sha256:<64 hex>

As Docker reads names, the first component is a registry host when it has a '.' or ':' or is `localhost`.
"""

from __future__ import annotations

import bisect
import ipaddress
import re
import urllib.parse
from dataclasses import dataclass, field

MAX_NAME = 255  # the distribution spec's limit on a repository name, domain included
MAX_SHOWN = 200  # a value longer than this is shown by its start and end
PATH_RULE = "lowercase letters and digits, separated by one '.', one '_', two '_' or any number of '-'"
DIGEST_RULE = "sha256: and 64 lowercase hex digits"
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN_COMPONENT = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?")
_PORT = re.compile(r"[0-9]{1,5}")
_TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def show(value: str) -> str:
    """`value` quoted for a message: escapes for what is not printable (a newline, NUL, an undecodable byte
    read as a surrogate), the start and end of a huge value."""
    if len(value) > MAX_SHOWN:
        value = f"{value[: MAX_SHOWN // 2]}...{value[-MAX_SHOWN // 4 :]}"
    return repr(value)


class BadValue(ValueError):
    """A value that breaks its rule: `where` it came from, the value, and `reason` (the rule it breaks); a URL's
    login in either is never kept (mirror_without_login)."""

    def __init__(self, where: str, value: str, reason: str) -> None:
        value, reason = hide_logins(value), hide_logins(reason)  # a login is never said
        self.where, self.value, self.reason = where, value, reason
        super().__init__(f"{where} {show(value)}: {reason}" if where else f"{show(value)}: {reason}")


@dataclass(frozen=True)
class ImageReference:
    """An image reference as written, split by the grammar: `domain` is "" when the name has none (Docker
    Hub); `tag` and `digest` are "" when absent."""

    domain: str
    path: str
    tag: str = ""
    digest: str = ""

    @property
    def name(self) -> str:
        """The repository: `[domain/]path`."""
        return f"{self.domain}/{self.path}" if self.domain else self.path

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def _plain_problem(text: str, what: str) -> str | None:
    """Why `text` cannot be any such value at all: empty, spaces or control characters, not ASCII."""
    if not text:
        return f"{what} is empty"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):  # how Python reads a byte that is not UTF-8
        return f"{what} is text: this one has a byte that is not UTF-8"
    if any(c.isspace() or not c.isprintable() for c in text):
        return f"{what} has no spaces or control characters"
    if not text.isascii():
        return f"{what} is ASCII only (undecodable bytes and other letters are not allowed)"
    return None


def _host_problem(host: str) -> str | None:
    """Why `host` (a name, an IPv4 address, or `[IPv6]`) is not a registry host."""
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return f"'{host}' is not an IPv6 address in brackets"
        return None
    if not host or not all(_DOMAIN_COMPONENT.fullmatch(part) for part in host.split(".")):
        return f"registry host '{host}' must be names of letters, digits and inner '-', separated by one '.'"
    return None


def _domain_problem(domain: str) -> str | None:
    """Why `domain` is not `host[:port]`."""
    host, colon, port = domain.rpartition(":") if not domain.endswith("]") else (domain, "", "")
    if not colon:
        host = domain
    elif not (_PORT.fullmatch(port) and 0 < int(port) < 65536):
        return f"'{domain}': the port must be a number from 1 to 65535"
    return _host_problem(host)


def _is_domain(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost" or component.startswith("[")


def _path_problem(components: list[str], what: str = "path component") -> str | None:
    for component in components:
        if not component:
            return "no empty path component ('//', or a '/' at an end)"
        if component in (".", ".."):
            return f"'{component}' is not a path component: " + PATH_RULE
        if _PATH_COMPONENT.fullmatch(component):
            continue
        if _PATH_COMPONENT.fullmatch(component.lower()):
            return f"{what} '{component}' has capital letters; repository paths are lowercase"
        return f"{what} '{component}' must be " + PATH_RULE
    return None


def digest(text: str, where: str = "") -> str:
    """A content digest: the whole text is `sha256:<64 lowercase hex>` (a trailing newline is not)."""
    if not isinstance(text, str) or not _DIGEST.fullmatch(text):
        raise BadValue(where, str(text), f"a digest is {DIGEST_RULE}")
    return text


def is_digest(text: object) -> bool:
    """Whether `text` is a whole sha256 digest."""
    return isinstance(text, str) and _DIGEST.fullmatch(text) is not None


def reference(text: str, where: str = "", what: str = "an image reference") -> ImageReference:
    """An image reference `[domain/]path[:tag][@sha256:...]` by the OCI grammar (the module's docstring)."""

    def refuse(reason: str) -> BadValue:
        return BadValue(where, text, f"not {what}: {reason}" if what else reason)

    if problem := _plain_problem(text, "a reference"):
        raise refuse(problem)
    name, at, found_digest = text.partition("@")
    if at and not _DIGEST.fullmatch(found_digest):
        raise refuse(f"the digest after '@' must be {DIGEST_RULE}")
    components = name.split("/")
    if dots := next((c for c in components if c in (".", "..")), None):
        raise refuse(f"'{dots}' is no path component: a reference names an image, not a path")
    domain = ""
    if len(components) > 1 and _is_domain(components[0]):
        domain = components.pop(0)
        if problem := _domain_problem(domain):
            raise refuse(problem)
    last, colon, tag = components[-1].partition(":")
    if colon:
        if not _TAG.fullmatch(tag):
            raise refuse(
                f"the tag {show(tag)} is not a valid tag: letters, digits, '_', '.', '-' (not first), 1 to 128"
            )
        components[-1] = last
    if problem := _path_problem(components):
        raise refuse(problem)
    path = "/".join(components)
    if len(domain) + len(path) + bool(domain) > MAX_NAME:
        raise refuse(f"the name is at most {MAX_NAME} characters long")
    return ImageReference(domain, path, tag, found_digest)


def repository(text: str, where: str = "") -> str:
    """A repository alone, `[domain/]path`: no tag, no digest."""
    if "@" in text and "@sha256:" not in text:  # a login (`user:pw@host/x`, a token or a user alone), no digest
        shown = text.rpartition("@")[2]
        raise BadValue(where, shown, "a repository has no credentials (shown without them): log in with docker login")
    if "@" in text:
        raise BadValue(where, text, "a repository has no digest (@sha256:...): name the repository alone")
    if ":" in text.rsplit("/", 1)[-1]:
        raise BadValue(where, text, "a repository has no tag (:TAG)")
    return reference(text, where, "").name


def host(text: str, where: str = "") -> str:
    """A registry or server host, `HOST[:PORT]` (`ghcr.io`, `127.0.0.1:5000`, `[::1]:5000`), no scheme."""
    if problem := _plain_problem(text, "a host"):
        raise BadValue(where, text, problem)
    if "://" in text or "/" in text:
        raise BadValue(where, text, "name the host alone, HOST[:PORT], without a scheme or a path")
    if problem := _domain_problem(text):
        raise BadValue(where, text, problem)
    return text


def registry(text: str, where: str = "") -> str:
    """A registry with an optional repository prefix, `HOST[:PORT][/PREFIX]` (one '/' at the end is
    dropped); the host needs a '.' or a ':PORT' or is `localhost`, as Docker reads names."""
    rule = "name a registry as HOST[:PORT][/PREFIX]"
    if _plain_problem(text, "a registry"):
        raise BadValue(where, text, f"{rule}, without spaces, control characters or other than ASCII")
    if "://" in text:
        raise BadValue(where, text, f"{rule}, without a scheme (not https://...)")
    if "@" in text:
        if "@sha256:" in text:
            raise BadValue(where, text, f"{rule}: no digest")
        shown = text.rpartition("@")[2]  # all before the last '@' may be a login: a token or a user alone
        raise BadValue(where, shown, f"{rule}: no credentials (shown without them): log in with docker login")
    trimmed = text.removesuffix("/")
    first, _, prefix = trimmed.partition("/")
    if not _is_domain(first):
        raise BadValue(where, text, f"'{first}' is not a registry host: it needs a '.' or a ':PORT' (or is localhost)")
    if problem := _domain_problem(first):
        raise BadValue(where, text, problem)
    if prefix and (problem := _path_problem(prefix.split("/"), "prefix component")):
        raise BadValue(where, text, problem)
    if len(trimmed) > MAX_NAME:
        raise BadValue(where, text, f"a registry is at most {MAX_NAME} characters long")
    return trimmed


def url(text: str, where: str = "", schemes: tuple[str, ...] = ("http", "https"), encoded_login: bool = True) -> str:
    """A URL of one of `schemes`: http(s) with a host (and a valid port), file: with an absolute path. The URL is
    read without its login (a refusal never says it); `encoded_login`: the URL is handed on whole (to pip), so a
    '/', '?', '#' or '@' of its login must be percent-encoded (False: the login is taken apart, as a mirror's)."""
    allowed = "/".join(schemes)
    bare = mirror_without_login(text)
    if problem := _plain_problem(text, "a URL"):
        raise BadValue(where, bare, f"{problem} (percent-encode what needs it)")
    try:
        parts = urllib.parse.urlsplit(bare)
        port = parts.port
    except ValueError as exc:  # urllib's message quotes what it could not read (a piece of a login): not said
        raise BadValue(where, bare, f"not a URL: {_split_problem(str(exc))}") from None
    if parts.scheme not in schemes:
        raise BadValue(where, bare, f"a URL here is {allowed}://..., not {parts.scheme or 'one without a scheme'}")
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/") or bare != text:
            raise BadValue(where, bare, "a file: URL names an absolute path on this machine (file:///path)")
        return text
    if not parts.hostname:
        raise BadValue(where, bare, "a URL needs a host (http://HOST[:PORT]/...)")
    if port == 0 or (problem := _domain_problem(parts.netloc.rpartition("@")[2])):  # never a login in a reason
        raise BadValue(where, bare, problem or "the port must be a number from 1 to 65535")
    if encoded_login and _host_part(text) != parts.netloc:
        raise BadValue(where, bare, "the URL's login has a '/', '?' or '#': percent-encode it (%2F, %3F, %23)")
    return text


def _split_problem(message: str) -> str:
    """Why urllib could not split a URL, in words that quote none of it."""
    if message.startswith("Port"):
        return "the part after the host's ':' is no port (a number from 1 to 65535)"
    if "IPv6" in message:
        return "an IPv6 host is written in brackets, closed: [ADDRESS]"
    return "it does not split into a scheme, a host and a path"


def _host_part(text: str) -> str | None:
    """The host and port of a URL as it is read whole (the netloc after its last '@'); None: it does not split."""
    try:
        return urllib.parse.urlsplit(text).netloc.rpartition("@")[2]
    except ValueError:
        return None


def wheel_source(text: str, where: str = "") -> str:
    """A wheel source: an http(s) URL with a host, a file: URL, or a folder path on this machine."""
    if not text or not text.isprintable():  # an undecodable byte (a surrogate) is not printable either
        raise BadValue(where, text, "a wheel source is a URL or a folder, without control characters")
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", text) and not re.match(r"[A-Za-z]:[\\/]", text):
        return url(text, where, ("http", "https", "file"))
    return text


NETWORKS = ("default", "none", "host")  # all BuildKit runs RUN steps on (a named network is refused by it)


def network(text: str, where: str = "") -> str:
    """The network of a build's RUN steps: one BuildKit knows (`default`, `none`, `host`)."""
    if text not in NETWORKS:
        raise BadValue(where, text, f"BuildKit runs RUN steps on {', '.join(NETWORKS)} only")
    return text


GZIP, ZSTD = "gzip", "zstd"
COMPRESSIONS = (GZIP, ZSTD)  # how a push compresses layers: gzip (docker push's own), zstd (decompresses faster)


def compression(text: str, where: str = "") -> str:
    """How a push compresses the layers: `gzip` (the default: what every engine pulls) or `zstd` (pulled
    by Docker 23+ and containerd 1.5+ only)."""
    if text not in COMPRESSIONS:
        raise BadValue(where, text, f"a push compresses layers with {' or '.join(COMPRESSIONS)}")
    return text


def gzip_level(text: str, where: str = "") -> str:
    """A gzip level for the layers a build exports: 1 (fastest) to 9 (smallest)."""
    if len(text) != 1 or text not in "123456789":
        raise BadValue(where, text, "a gzip level is one digit, 1 (fastest) to 9 (smallest)")
    return text


_SIZE = re.compile(r"[0-9]+(?:\.[0-9]+)?[kKmMgGtTpP]?[iI]?[bB]?")


def size(text: str, where: str = "") -> str:
    """A size as Docker takes it (`2g`, `512m`, `1.5GiB`, `1073741824`), more than zero."""
    if not _SIZE.fullmatch(text) or not re.search(r"[1-9]", text.split(".")[0] + text.partition(".")[2]):
        raise BadValue(where, text, "a size is a number above zero with an optional unit: 512m, 2g, 1.5GiB")
    return text


MIRROR_FAMILIES = ("debian", "ubuntu")  # `--mirror FAMILY=MIRROR`


def mirror_family(text: str) -> tuple[str | None, str]:
    """A `--mirror` value split into the family it names (`ubuntu=URL` -> `ubuntu`; None for a bare mirror) and
    the mirror itself."""
    head, equals, rest = text.partition("=")
    return (head, rest) if equals and head.isidentifier() else (None, text)


# A URL's userinfo (`scheme://USER[:PASSWORD]@`): a user without '/', '?', '#' or ':' (an e-mail's '@' is kept:
# `http://john@corp.example:KEY@mirror/`), then a password of any non-blank characters, up to the first '@' that a
# host (and port) follows, ending the word or followed by '/', '?' or '#'. A password as users type it ('/', '?',
# '#' not percent-encoded) is all of it, save a `://` (a URL of its own: read from there); an '@' in a path
# (`https://host/simple/@scope`, `http://u:p@host/debian@2026/`) is no login and is kept. A scheme starts where a
# run of scheme characters does, so each `://` is read once: the search takes time linear in the text.
# The pieces are shared with the release gate (security/leaks.py searches files with the same reading).
_PASSWORD = r"(?:(?!://)\S)"  # a character of a password
_HOST_CHAR = r"[A-Za-z0-9.\-\[\]:%_~]"
HOST_CHAR = _HOST_CHAR  # a character of a URL's host (and port), for the gate's readings
_SCHEME_CHAR = r"[A-Za-z0-9+.-]"
URL_END = r"[/?#\s]"  # what ends a host in a value: its path, query or fragment, a blank (or the value's end)
# A user alone that is a secret: a token. One of the known prefixes (GitHub's ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_,
# GitLab's glpat-/gldt-/glrt-/..., Slack's xox?- and xapp-, Hugging Face's hf_, npm_, pypi-, Docker Hub's dckr_pat_,
# OpenAI's and Stripe's sk-/sk_live_/rk_live_, DigitalOcean's dop_v1_) and 16 or more token characters, an AWS key id
# (AKIA/ASIA and 16), a Google access token (ya29.), or else 20 or more of `A-Za-z0-9_-` mixing letters and digits
# with a run of 16 letters and digits (what a random token looks like), or a UUID (8-4-4-4-12 hex: npm's legacy
# tokens, Heroku's API keys): a name (`jenkins-build-automation`) is none.
TOKEN_PREFIXES = (
    r"gh[pousr]_|github_pat_|gl(?:pat|dt|rt|oas|ptt|cbt|ft|imt|soat|agent|ffct)-|xox[a-z]-|xapp-|hf_|npm_|pypi-"
    r"|dckr_pat_|sk-|sk_live_|rk_live_|dop_v1_"
)
TOKEN_USER = (
    rf"(?:(?:{TOKEN_PREFIXES})[A-Za-z0-9_-]{{16,1024}}|(?:AKIA|ASIA)[A-Z0-9]{{16}}|ya29\.[A-Za-z0-9_.-]{{16,1024}}"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?=[A-Za-z_-]{0,1024}[0-9])(?=[0-9_-]{0,1024}[A-Za-z])(?=[A-Za-z0-9_-]{0,1024}?[A-Za-z0-9]{16})"
    r"[A-Za-z0-9_-]{20,1024})"
)


def userinfo_pattern(
    many: str = "*",
    some: str = "+",
    end: str = URL_END,
    scheme: str = "*",
    secret_only: bool = False,
    not_password: str = "",
) -> str:
    """The regex of a URL's userinfo as the project reads it: group 1 the scheme and `://`, group 2 the login
    (`USER[:PASSWORD]`), up to the first '@' that a host follows and then `end` (or the text's end). `many` and
    `some` are the quantifiers of "any" and "one or more" (`{0,N}`, `{1,N}`: a bounded match, for a search in
    chunks), `scheme` that of the scheme's characters after its first (a longer run before `://` is no scheme);
    `end` what ends a host (in a file, a quote may close the URL). `secret_only`: a login that is a secret, with
    a password (`user:password`) or a user alone that is a token (TOKEN_USER); `git@`, `anonymous@`, an e-mail
    alone are not. `not_password`: a regex of passwords that are no login (the whole password up to the host)."""
    host = rf"@(?={_HOST_CHAR}{some}(?:{end}|$))"  # an '@' that a host follows: the login's end
    user = rf"(?:[^\s/?#:@]|@(?!{_HOST_CHAR}{some}(?:{end}|$))){many}+"  # no '@' that a host follows
    password = rf"{_PASSWORD}{some}?" if secret_only else rf"{_PASSWORD}{many}?"
    if not_password:  # a password that is no secret (a variable of the shell, a placeholder): no login
        password = rf"(?!(?:{not_password}){host}){password}"
    alone = rf"{TOKEN_USER}(?={host})" if secret_only else rf"[^\s/?#@:]{some}+(?={host})"
    login = rf"{user}:{password}(?={host})|{alone}"
    return rf"((?<!{_SCHEME_CHAR}){_SCHEME_CHAR}{_SCHEME_CHAR}{scheme}+://)({login}){host}"


_HOST_AFTER = rf"(?={_HOST_CHAR}+(?:{URL_END}|$))"
_USERINFO = re.compile(userinfo_pattern())
# A registry written without a scheme (`USER:PASSWORD@HOST/PREFIX`): hidden from a refusal's message too.
_BARE_LOGIN = re.compile(rf"^[^\s/?#@:]*:{_PASSWORD}*?@" + _HOST_AFTER)


@dataclass(frozen=True)
class MirrorLogin:
    """The login of a mirror's URL (`http://USER:PASSWORD@HOST[:PORT]/PATH`), decoded: what apt is given in an
    auth.conf (`machine SCHEME://HOST[:PORT]/PATH login USER password PASSWORD`), never in a sources.list."""

    machine: str  # SCHEME://HOST[:PORT]/PATH: apt matches it with the scheme (http needs it said)
    user: str
    password: str = field(repr=False)

    def auth_conf(self) -> str:
        """The apt auth.conf line (apt_auth.conf(5)) that gives apt this login for the mirror."""
        return f"machine {self.machine} login {self.user} password {self.password}\n"


# What a message hides besides, word by word (linear in the text): in a word with a `://`, all from it up to the
# word's last '@' (a malformed URL's login: `https://u:pw@`); in one without, all up to its last '@' where a ':'
# comes before it and a host after it (a netloc or a registry quoted alone: `'john@corp:KEY@mirror'`, `u:p@host`).
_WORD = re.compile(r"\S+")
# each quote or bracket that may open a login, with its closer: a login it opened ends before that closer (an '@'
# past it is no part of that login)
_CLOSERS = {"'": "'", '"': '"', "(": ")", "[": "]", "{": "}", "<": ">"}
_OPENERS = "".join(_CLOSERS)
_CLOSING = frozenset(_CLOSERS.values())
_CLOSERS_RUN = 16  # closers after a login's closer that an '@' may follow (`("u:p w")@h`), bounded: linear


def _hide_word(found: re.Match[str]) -> str:
    word = found[0]
    at = word.rfind("@")
    while at >= 0 and word.startswith("sha256:", at + 1):  # a digest's '@' ends no login (`host:5000/x@sha256:`)
        at = word.rfind("@", 0, at)
    scheme = word.find("://")
    if at < 0:
        return word
    if 0 <= scheme < at:
        return word[: scheme + 3] + word[at + 1 :]
    start = len(word) - len(word.lstrip(_OPENERS))
    hosted = re.match(_HOST_CHAR, word[at + 1 :]) is not None  # `USER:PASSWORD@` alone, a rule's text, is none
    if hosted and _TOKEN_USER.fullmatch(word, start, at):  # a token alone: `ghp_...@ghcr.io/org`
        return word[:start] + word[at + 1 :]
    if _REGISTRY_AFTER.match(word, at + 1) and start < at:  # any user alone before a registry: `NAME@host/x`
        return word[:start] + word[at + 1 :]
    return word[:start] + word[at + 1 :] if hosted and ":" in word[start:at] else word


# A login with blanks (`http://user:pa ss@host/`, `'user:top secret@registry/x'`), which no word holds whole: on each
# line, every '@' that a host follows (not a digest's `@sha256:`) hides all back to the nearest login's start before
# it, `scheme://USER:` anywhere, or `USER:` starting the text, a value quoted or bracketed after anything but a
# letter, a digit or `_` (`'USER:`, `(USER:`, `{"u":"USER:`, `--proxy="USER:`, `-x'USER:`; it ends at its closer), an
# option's value (`--proxy USER:`, `--proxy=USER:`, a short option's: `-x USER:`, `-uUSER:`) or a field after a blank
# that is not a space (`\rUSER:`, a line a terminal overwrites; `\tUSER:`); never `USER: `, a blank after its ':'
# (a label: `error: --cache-from: '@0'`; no password starts with a blank).
_TOKEN_USER = re.compile(TOKEN_USER)
_REGISTRY_AFTER = re.compile(rf"{_HOST_CHAR}+/")  # a host and a path: a registry's (`ghcr.io/org`)
_HOST_AT = re.compile(rf"@(?!sha256:)(?={_HOST_CHAR}+(?:[/?#\s'\"<>;,)\]}}\\&|`]|$))")
_URL_START = re.compile(rf"(?<!{_SCHEME_CHAR}){_SCHEME_CHAR}+://[^\s/?#:]*:")
_BARE_START = re.compile(
    r"(?:(?<![A-Za-z0-9_])['\"([{<]|(?:^|(?<=\s))(?:--[A-Za-z0-9][A-Za-z0-9-]{0,64}[ =]|-[A-Za-z][ \t]{0,64}['\"]?)"
    r"|^|(?<=[^\S ]))"
    r"(?P<user>[^\s/?#:'\"([{<]*):(?!//|[ \t])"  # `word: ` is a label (`error: ...`): no password starts blank
)


def _hide_spaced(line: str) -> str:
    """One line without its logins that hold blanks (linear: one pass over its '@'s and its logins' starts)."""
    ends = [m.start() for m in _HOST_AT.finditer(line)]
    if not ends:
        return line
    closers = {c: [m.start() for m in re.finditer(re.escape(c), line)] for c in _CLOSING}

    def closed_at(user: int) -> int:  # where the quote or bracket just before `user` closes (none: the line's end),
        closer = _CLOSERS.get(line[user - 1]) if user else None  # with the closers right after it: `("u:p w")@h`
        if closer is None:
            return len(line)
        found = closers[closer]
        at = bisect.bisect_left(found, user)
        if at == len(found):
            return len(line)
        stop = found[at]
        while stop + 1 < min(len(line), found[at] + _CLOSERS_RUN + 1) and line[stop + 1] in _CLOSING:
            stop += 1
        return stop

    starts = sorted(
        [(m.end() - 1, m.start() + m.group().index("://") + 3, len(line)) for m in _URL_START.finditer(line)]
        + [(m.end() - 1, m.start("user"), closed_at(m.start("user"))) for m in _BARE_START.finditer(line)]
    )  # (the ':' after USER, where the hidden part starts, where a quote or bracket that opened it closes)
    hidden: list[tuple[int, int]] = []
    at_start = 0
    for end in ends:
        while at_start + 1 < len(starts) and starts[at_start + 1][0] < end:
            at_start += 1
        if starts and starts[at_start][0] < end <= starts[at_start][2] + 1:  # `"user:pa ss"@host` too
            begin = max(starts[at_start][1], hidden[-1][1] if hidden else 0)
            if hidden and begin <= hidden[-1][1]:
                hidden[-1] = (hidden[-1][0], end + 1)
            else:
                hidden.append((begin, end + 1))
    kept, last = [], 0
    for begin, stop in hidden:
        kept.append(line[last:begin])
        last = stop
    return "".join(kept) + line[last:]


def hide_logins(text: str) -> str:
    """`text` as a message may say it: without any URL's login (a malformed one too: it may over-hide a path's
    '@', never under-hide), nor a scheme-less registry's or netloc's (`u:p@host`), nor a token alone before a host
    (`ghp_...@ghcr.io`), nor a login holding blanks (`http://user:pa ss@host`). For messages only: what is
    written, labelled or hashed is mirror_without_login's."""
    text = "\n".join(_hide_spaced(line) for line in text.split("\n"))
    return _WORD.sub(_hide_word, _BARE_LOGIN.sub("", mirror_without_login(text)))


def has_url_login(text: str) -> bool:
    """Whether `text` holds a URL with a login (`scheme://USER[:PASSWORD]@HOST`), read as mirror_without_login
    reads one."""
    return _USERINFO.search(text) is not None


def mirror_without_login(text: str) -> str:
    """A `--mirror` value (`[FAMILY=]URL` or a sources.list line) with every URL's login removed: what may be
    shown, written in a base's sources.list, labelled or hashed into a digest."""
    return _USERINFO.sub(r"\1", text)


def _after_options(words: list[str]) -> list[str]:
    """A sources.list line's words after `deb` and its options (`[arch=amd64]`, `[ arch=amd64 signed-by=K ]`):
    URL, SUITE, COMPONENT..."""
    rest = words[1:]
    if not rest or not rest[0].startswith("["):
        return rest
    for at, word in enumerate(rest):
        if word.endswith("]"):
            return rest[at + 1 :]
    return []  # the options never close


def _mirror_url(text: str) -> str:
    """The URL of a `--mirror` value: the value itself, or a sources.list line's."""
    words = mirror_family(text)[1].split()
    if words and words[0] in ("deb", "deb-src"):
        return next(iter(_after_options(words)), "")
    return words[0] if words else ""


def mirror_login(text: str) -> MirrorLogin | None:
    """The login in a `--mirror` value's URL, None without one (a value `mirror` took): what mirror_without_login
    removes, decoded."""
    word = _mirror_url(text)
    found = _USERINFO.match(word)
    if found is None:
        return None
    scheme, login, rest = found.group(1), word[found.end(1) : found.end() - 1], word[found.end() :]
    user, _, password = login.partition(":")
    parts = urllib.parse.urlsplit(scheme + rest)
    machine = f"{parts.scheme}://{parts.netloc}{parts.path}"
    return MirrorLogin(machine, urllib.parse.unquote(user), urllib.parse.unquote(password))


def mirror(text: str, where: str = "") -> str:
    """A distribution mirror as mmdebstrap takes it: a URL (http(s) with a host, file:///path), or a whole
    sources.list line (`deb URL SUITE COMPONENT...`) whose URL is one; `FAMILY=` before it (ubuntu, debian)
    names the one distribution it serves. A login in the URL (`http://USER:PASSWORD@HOST/...`) is taken (apt
    gets it from an auth.conf); a refusal shows the value without it (as every BadValue)."""
    return _mirror(text, where)


def _mirror(text: str, where: str) -> str:
    if not text or not text.isprintable():
        raise BadValue(where, text, "a mirror is a URL or a sources.list line, without control characters")
    family, rest = mirror_family(text)
    if family is not None:
        if family not in MIRROR_FAMILIES:
            raise BadValue(where, text, f"a mirror's family is {' or '.join(MIRROR_FAMILIES)} (FAMILY=MIRROR)")
        if mirror_family(rest)[0] is not None:
            raise BadValue(where, text, "a mirror names one family (FAMILY=MIRROR), once")
        return f"{family}={_mirror(rest, where)}"
    words = text.split()
    if not words:
        raise BadValue(where, text, "a mirror is a URL or a sources.list line, not blanks")
    if _hide_spaced(text) != text and mirror_without_login(text) == text:  # `http://user:pa ss@host/`: no word
        raise BadValue(where, text, "a mirror's login is USER:PASSWORD, both set, without blanks or controls")
    if words[0] in ("deb", "deb-src"):
        after = _after_options(words)
        if len(after) < 2:
            raise BadValue(where, text, "a sources.list line is `deb [OPTIONS] URL SUITE [COMPONENT...]`")
        url(after[0], where, ("http", "https", "file"), encoded_login=False)
    elif len(words) != 1:
        raise BadValue(where, text, "a mirror is one URL (or a whole `deb URL SUITE ...` line), without spaces")
    else:
        url(text, where, ("http", "https", "file"), encoded_login=False)
    login = mirror_login(text)
    if login is not None and not (login.user and login.password and _login_word(login.user + login.password)):
        raise BadValue(where, text, "a mirror's login is USER:PASSWORD, both set, without blanks or controls")
    return text


def _login_word(text: str) -> bool:
    """Whether `text` (a decoded login) is one word of an apt auth.conf: printable, without blanks."""
    return text.isprintable() and not any(c.isspace() for c in text)
