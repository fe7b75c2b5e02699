"""Installed OS packages with a newer version in the security suite of the image's own apt sources.

In a throwaway container of the image, as root (images run as a non-root USER) and on the build's network,
apt reads the image's own configuration and sources (sources.list and sources.list.d, one-line and deb822
alike: apt parses them), refreshes the package lists into a scratch folder (images carry none, and nothing
depends on lists left in one) and answers three questions: which package indexes the sources name
(`apt-get indextargets`), which indexes it could read (`apt-cache policy`), and each installed package's
version table (`apt-cache policy PKG...`, newest version first, the installed one marked `***`). A package
is pending when a version above the installed one comes from the security suite, `<codename>-security`
(VERSION_CODENAME of os-release: bookworm-security, noble-security), recognised by the suite an index's
sources entry names or by the codename of its Release file (a `stable-security` entry counts).

Where it cannot look the scan says why and is never clean (scanned=False): no apt in the image, no codename,
the security index not read (the archive did not answer: apt's own errors are in the note), apt failing,
the time bound passed. Sources without the security suite at all are not scanned either, rather than checked
against the distribution's standard security archive: its host would be a mirror the image's configuration
does not name (the project takes mirrors from configuration only), and an image that cannot see its own
security updates is what the gate should report (`--require-scan` fails it), not quietly repair.

The refresh reads only the security suite's lists where it can: a first look (LOOK, a container without
network) prints os-release, apt's configuration, which entry of which sources file names each Packages index
and those files, the sha256 of the keyrings (apt's folders, those Dir::Etc::Trusted and Dir::Etc::TrustedParts
name, any a sources entry names; links followed: what they point to is summed), of apt's auth.conf files and
of every file an apt option names by an absolute path (CA bundles: `Acquire::https::CaInfo`,
`Acquire::https::<host>::CaInfo`; client certificates and keys; `Dir::Bin::apt-key`) and of each regular file
below a folder one names so (`Acquire::https::CaPath`: by name and sha256, links followed; not apt's root `/`),
and the installed packages; every line of image text in it prefixed `|` (no file of the image can make a
`### ` mark), every reading of it split at `\n` only, as sh and apt split lines (`lines`); the entries of the security
suites are copied verbatim into a scratch sources list (apt_sources), and the refresh uses it (`Dir::Etc::SourceList`,
`Dir::Etc::SourceParts`) only once apt, in the container, says the copy names exactly the security indexes
the image's own sources name. Otherwise (no entry names a `-security` suite, an entry that cannot be copied,
the copy naming other indexes) every list is refreshed, as before, and the note says why. Within one run, an
image whose first look is that of an image already scanned on the same network, with the same proxies in its
Env, gets that answer (os_answers), the note saying for which tag; the look's text keeps every byte (the
engine's `_exact`: one that is not UTF-8 as a lone surrogate), so looks that differ in any byte are two keys,
and the notes show such a byte replaced (`shown`); a look that cannot stand for its image (a sources file past
the bytes it prints, a folder an option names past FOLDER_FILES files or with a name holding a newline, no
sha256sum) is shared with none.

apt bounds each download (Acquire timeouts and retries), `timeout` bounds the refresh, and the engine stops
the container at TIME_LIMIT_S: the check never hangs a build.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from torchimages.engine import Engine, ShellResult
from torchimages.security import apt_sources, os_answers
from torchimages.security.apt_sources import Copy
from torchimages.security.model import OS_UPDATES, Finding, Scan

UPDATE_LIMIT_S = 240  # the package lists' refresh (`timeout`, where the image has it)
TIME_LIMIT_S = 300  # the whole container: then it is stopped and removed
ROOT = "0:0"  # by number: an image's /etc/passwd may name root otherwise, or not at all
DEFAULT_NETWORK = "default"  # the engine's default bridge, where the build names no network
MARK = "### "
BLANKS = " \t\r"  # what sh takes off around a word (and a CRLF file's `\r`); str.strip takes more
LINE = "|"  # every line of a section's text starts so: no text of the image can read as a mark
OS_RELEASE_BYTES = 65536  # read no further: an os-release that is a link to /dev/zero never ends
LOOK_LIMIT_S = 60  # the first look: no network, no download
SOURCE_BYTES = 65536  # of each sources file the look prints (a longer one: the answer is not shared)
PROXY_NAMES = ("http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy")  # apt reads any case
# Files that change what apt's refresh reads or whether it may (their checksums, never their contents).
FIXED_FILES = "/etc/ssl/certs/ca-certificates.crt /etc/nsswitch.conf /etc/gai.conf /etc/ssl/openssl.cnf"
FOLDER_FILES = 1000  # of a folder an apt option names, the look sums at most these (more: the answer is not shared)

# Each command's output goes through `frame`: its every line prefixed (a file with no last newline included).
FRAME = rf"""frame() {{ sed 's/^/{LINE}/'; echo; }}
"""

# POSIX sh, as in a minbase (no xargs, no python). The first look; each answer under its own `### name` line.
# `unshared` says the look cannot stand for the image (an answer is then never shared).
LOOK = rf"""export LC_ALL=C
{FRAME}echo '{MARK}os-release'
{{ head -c {OS_RELEASE_BYTES} /etc/os-release 2>/dev/null \
  || head -c {OS_RELEASE_BYTES} /usr/lib/os-release 2>/dev/null; }} | frame
for tool in apt-get apt-config dpkg-query; do
  command -v "$tool" >/dev/null 2>&1 || {{ echo '{MARK}no-apt'; exit 0; }}
done
command -v sha256sum >/dev/null 2>&1 || echo '{MARK}unshared no sha256sum'
checksum() {{
  if [ -f "$1" ]; then printf '%s %s\n' "$(sha256sum < "$1" | cut -d ' ' -f 1)" "$1"; else echo "none $1"; fi
}}
echo '{MARK}config'
apt-config dump 2>&1 | frame
echo '{MARK}sourced'
apt-get indextargets --no-release-info --format '$(RELEASE) $(SOURCESENTRY) $(DESCRIPTION)' \
  'Identifier: Packages' 2>&1 \
  | frame
files=$(apt-get indextargets --no-release-info --format '$(SOURCESENTRY)' 'Identifier: Packages' 2>/dev/null \
  | sed 's/:[0-9]*$//' | sort -u)
printf '%s\n' "$files" | while IFS= read -r file; do
  [ -n "$file" ] && [ "$(head -c {SOURCE_BYTES + 1} "$file" 2>/dev/null | wc -c)" -gt {SOURCE_BYTES} ] \
    && echo '{MARK}unshared a sources file passes {SOURCE_BYTES} bytes'
done
echo '{MARK}source'
printf '%s\n' "$files" | while IFS= read -r file; do
  [ -n "$file" ] || continue
  {{ echo "@$file"; head -c {SOURCE_BYTES} "$file" 2>/dev/null | sed 's/^/|/'; echo; }} | frame
done
echo '{MARK}keys'
eval "$(apt-config shell TRUSTED Dir::Etc::Trusted/f TRUSTEDPARTS Dir::Etc::TrustedParts/d 2>/dev/null)"
{{
  find -L /etc/apt/trusted.gpg /etc/apt/trusted.gpg.d /etc/apt/keyrings /usr/share/keyrings \
    ${{TRUSTED:+"$TRUSTED"}} ${{TRUSTEDPARTS:+"$TRUSTEDPARTS"}} -type f 2>/dev/null
  printf '%s\n' "$files" | while IFS= read -r file; do head -c {SOURCE_BYTES} "$file" 2>/dev/null; echo; done \
    | tr -s ' \t,;=:"\133\135' '\n' | grep '^/[^/]'
}} | sort -u | while IFS= read -r file; do checksum "$file"; done | frame
echo '{MARK}auth'
eval "$(apt-config shell NETRC Dir::Etc::netrc/f NETRCPARTS Dir::Etc::netrcparts/d)"
named=$(apt-config dump 2>/dev/null | sed -n 's/^[^ ]* "\(\/[^"]*\)";$/\1/p' | sort -u)
{{
  checksum "${{NETRC:-/etc/apt/auth.conf}}"
  find -L "${{NETRCPARTS:-/etc/apt/auth.conf.d}}" -type f 2>/dev/null | sort \
    | while IFS= read -r file; do checksum "$file"; done
  printf '%s\n' "$named" | while IFS= read -r file; do
    if [ "$file" != / ] && [ -d "$file" ]; then
      echo "folder $file"
      find -L "$file" -type f 2>/dev/null | head -n {FOLDER_FILES} | sort \
        | while IFS= read -r each; do checksum "$each"; done
    elif [ -n "$file" ]; then
      checksum "$file"
    fi
  done
  for file in {FIXED_FILES}; do checksum "$file"; done
}} 2>&1 | frame
nl='
'
printf '%s\n' "$named" | while IFS= read -r file; do
  [ "$file" != / ] && [ -d "$file" ] || continue
  if [ "$(find -L "$file" -type f 2>/dev/null | head -n {FOLDER_FILES + 1} | wc -l)" -gt {FOLDER_FILES} ]; then
    echo '{MARK}unshared a folder an apt option names holds more than {FOLDER_FILES} files'
  elif [ -n "$(find -L "$file" -name "*$nl*" 2>/dev/null | head -n 1)" ]; then
    echo '{MARK}unshared a file name in a folder an apt option names holds a newline'
  fi
done
echo '{MARK}packages'
out=$(dpkg-query -W -f '${{db:Status-Status}} ${{Package}} ${{Architecture}} ${{Version}}\n' 2>&1)
status=$?
printf '%s\n' "$out" | frame
echo "{MARK}look-status $status"
"""

# The refresh, each answer under its own `### name` line (NARROWING goes before its `targets`).
SCRIPT = rf"""export LC_ALL=C
{FRAME}echo '{MARK}os-release'
{{ head -c {OS_RELEASE_BYTES} /etc/os-release 2>/dev/null \
  || head -c {OS_RELEASE_BYTES} /usr/lib/os-release 2>/dev/null; }} | frame
for tool in apt-get apt-cache dpkg-query; do
  command -v "$tool" >/dev/null 2>&1 || {{ echo '{MARK}no-apt'; exit 0; }}
done
scratch=$(mktemp -d) || exit 1
trap 'rm -rf "$scratch"' EXIT
chmod 755 "$scratch" && mkdir -p "$scratch/lists/partial" "$scratch/cache/archives/partial" || exit 1
set -- -o "Dir::State::Lists=$scratch/lists" -o "Dir::Cache=$scratch/cache" -o Acquire::Languages=none \
  -o Acquire::Retries=2 -o Acquire::http::Timeout=30 -o Acquire::https::Timeout=30
echo '{MARK}targets'
apt-get "$@" indextargets --no-release-info --format '$(RELEASE) $(DESCRIPTION)' 'Identifier: Packages' 2>&1 | frame
limit=
command -v timeout >/dev/null 2>&1 && limit="timeout {UPDATE_LIMIT_S}"
echo '{MARK}update'
out=$($limit apt-get "$@" update 2>&1)
status=$?
printf '%s\n' "$out" | frame
echo "{MARK}update-status $status"
echo '{MARK}files'
apt-cache "$@" policy 2>&1 | frame
echo '{MARK}installed'
installed=$(dpkg-query -W -f '${{db:Status-Status}} ${{binary:Package}}\n' | sed -n 's/^installed //p')
out=$(apt-cache "$@" policy $installed 2>&1)
status=$?
printf '%s\n' "$out" | frame
echo "{MARK}policy-status $status"
"""


@dataclass(frozen=True)
class Version:
    """One row of a package's version table: the version, whether it is the installed one, and the package
    indexes it comes from (as apt names them: `URI SUITE/COMPONENT ARCH Packages`)."""

    version: str
    installed: bool
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A package's version table (`apt-cache policy PKG`), newest version first."""

    package: str
    versions: tuple[Version, ...]


@dataclass(frozen=True)
class IndexFile:
    """A package index apt read (`apt-cache policy`'s package files): its name and its Release fields (n=...)."""

    name: str
    release: Mapping[str, str]


@dataclass(frozen=True)
class Pending:
    """An installed package with a newer version in the security suite."""

    package: str
    installed: str
    newer: str
    suite: str

    def finding(self) -> Finding:
        key = self.package.split(":", 1)[0]  # what an allowlist entry names: the package, not its architecture
        return Finding(OS_UPDATES, key, f"{self.package} {self.installed}", f"newer in {self.suite}: {self.newer}")


@dataclass(frozen=True)
class Look:
    """What the first look gives: the copy of the security entries (or why there is none) and the look's text,
    which an answer of this run is kept under (empty: the look did not answer, nothing is kept)."""

    copy: Copy
    text: str = ""


def scan(
    engine: Engine,
    reference: str,
    network: str | None,
    answers: os_answers.Answers | None = None,
    tag: str = "",
) -> Scan:
    """The pending security updates of `reference` (see the module); `network` the build's (None: the default
    bridge); `answers` this run's (None: none shared), `tag` the image's name in them. EngineError when no
    container could run (the gate says it could not run)."""
    on = network or DEFAULT_NETWORK
    seen = look(engine.run_shell(reference, LOOK, user=ROOT, network=None, timeout_s=float(LOOK_LIMIT_S)))
    info = engine.inspect(reference) if answers is not None and seen.text else None
    found = os_answers.key(on, seen.text, proxies(info.env)) if info is not None else ""  # unknown Env: none
    if found and answers is not None and (known := answers.get(found)) is not None:
        return dataclasses.replace(known.scan, note=f"{known.scan.note} (as for {known.tag or 'an image before'})")
    result = engine.run_shell(reference, script(seen.copy), user=ROOT, network=on, timeout_s=float(TIME_LIMIT_S))
    done = read(result, seen.copy.why)
    if found and answers is not None:
        answers.put(found, done, tag)
    return done


def look(result: ShellResult) -> Look:
    """The first look's answer: the copy of the security entries, and the text an answer is kept under (none
    where the look says it cannot stand for the image: `unshared`)."""
    parts = sections(result.stdout)
    if result.status != 0 or result.timed_out or result.overflowed or "no-apt" in parts:
        return Look(Copy(why="the first look did not answer"))
    if parts.get("look-status", "").strip() != "0" or "sourced" not in parts:
        return Look(Copy(why="the first look did not answer"))
    suite = f"{codename(parts.get('os-release', ''))}-security"
    targets = apt_sources.sourced_targets(parts["sourced"])
    copied = apt_sources.copy(targets, apt_sources.source_files(parts.get("source", "")), suite)
    return Look(copied, "" if "unshared" in parts else result.stdout)


def proxies(env: Mapping[str, str]) -> str:
    """The image's Env that apt's downloads heed (its proxies, by name in any case, and APT_CONFIG), as one
    text for an answer's key."""
    kept = {k: v for k, v in env.items() if k.lower() in PROXY_NAMES or k == "APT_CONFIG"}
    return "\n".join(f"{k}={v}" for k, v in sorted(kept.items()))


NARROW_LIST = "$scratch/none.list"  # not there: no entry from the main list
NARROW_PARTS = "$scratch/parts"


def script(copy: Copy) -> str:
    """SCRIPT, with the copy of the security entries used where apt says it names exactly the security
    indexes the image's sources name (`### narrowed yes`; otherwise every list is refreshed, `no`)."""
    if not copy.usable:
        return SCRIPT
    quoted = " ".join
    lines = [f'mkdir -p "{NARROW_PARTS}" || exit 1']
    if copy.one_line:
        lines.append(
            f"printf '%s\\n' {quoted(shlex.quote(e) for e in copy.one_line)} > \"{NARROW_PARTS}/security.list\""
        )
    if copy.deb822:
        lines.append(
            f"printf '%s\\n\\n' {quoted(shlex.quote(e) for e in copy.deb822)} > \"{NARROW_PARTS}/security.sources\""
        )
    lines += [
        f"expected=$(printf '%s\\n' {quoted(shlex.quote(e) for e in copy.expected)} | sort)",
        f'got=$(apt-get -o "Dir::Etc::SourceList={NARROW_LIST}" -o "Dir::Etc::SourceParts={NARROW_PARTS}" \\',
        "  indextargets --no-release-info --format '$(RELEASE) $(DESCRIPTION)' 'Identifier: Packages' 2>/dev/null \\",
        "  | sort)",
        'if [ -n "$expected" ] && [ "$got" = "$expected" ]; then',
        f'  set -- "$@" -o "Dir::Etc::SourceList={NARROW_LIST}" -o "Dir::Etc::SourceParts={NARROW_PARTS}"',
        f"  echo '{MARK}narrowed yes'",
        "else",
        f"  echo '{MARK}narrowed no'",
        "fi",
    ]
    return SCRIPT.replace(f"echo '{MARK}targets'\n", "\n".join(lines) + f"\necho '{MARK}targets'\n", 1)


def read(result: ShellResult, why: str = "") -> Scan:
    """The scan that the script's answer gives: the pending updates, or why it could not look; `why` there was
    no copy of the security entries (every list refreshed)."""
    result = dataclasses.replace(result, stdout=shown(result.stdout), stderr=shown(result.stderr))
    why = shown(why)
    if result.timed_out:
        return _not_scanned(f"apt did not finish within {TIME_LIMIT_S} s (the archive did not answer in time)")
    if result.overflowed:
        return _not_scanned("the scan's output passed the engine's limit: stopped (an image file that never ends?)")
    parts = sections(result.stdout)
    if "no-apt" in parts:
        return _not_scanned("the image has no apt (apt-get, apt-cache, dpkg-query): not a Debian or Ubuntu image")
    if "installed" not in parts or result.status != 0:
        return _not_scanned(f"the scan script failed (exit {result.status}): {_tail(result.stderr or result.stdout)}")
    name = codename(parts.get("os-release", ""))
    if not name:
        return _not_scanned("/etc/os-release names no VERSION_CODENAME, so no security suite to look in")
    suite = f"{name}-security"
    files = index_files(parts.get("files", ""))
    security = {f.name for f in files if _is_suite(f, suite)}
    if not security:
        named = [r for r, _ in targets(parts.get("targets", "")) if r == suite or r.endswith("-security")]
        if not named:
            return _not_scanned(
                f"the image's apt sources name no {suite} suite, so its security updates cannot be seen "
                f"(add {suite} to the image's sources)"
            )
        return _not_scanned(f"{suite} did not answer: {_apt_errors(parts.get('update', ''), suite)}")
    status = parts.get("policy-status", "0").strip()
    tables = version_tables(parts["installed"])
    if status != "0" or not tables:
        return _not_scanned(f"apt-cache policy failed (exit {status}): {_tail(parts['installed'])}")
    found = pending(tables, security, suite)
    note = f"{len(tables)} packages against {suite}{_refreshed(parts.get('narrowed', '').strip(), why)}"
    return Scan(OS_UPDATES, tuple(p.finding() for p in found), note=note)


def sections(output: str) -> dict[str, str]:
    """The script's answers by name: the text under each `### name` line, its lines prefixed `|` (the prefix
    taken off; a line of neither shape is none of the text); a value on the mark (`### update-status 0`) is
    the section's text. A mark named twice: its texts one after the other."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.split("\n"):  # the shell's lines only (see `lines`)
        if line.startswith(MARK):
            name, _, value = line[len(MARK) :].strip().partition(" ")
            current = found.setdefault(name, [])
            if value:
                current.append(value)
        elif line.startswith(LINE) and current is not None:
            current.append(line[len(LINE) :])
    return {name: "\n".join(lines) for name, lines in found.items()}


def shown(text: str) -> str:
    """An engine's exact text (its undecodable bytes kept as lone surrogates) as text to show: each such byte
    replaced (U+FFFD), as a note or finding may be printed or written as UTF-8."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate no decoding made
        raw = text.encode("utf-8", "replace")
    return raw.decode("utf-8", "replace")


def lines(text: str) -> list[str]:
    """The lines of an image's text as the shell and apt split them: at `\\n` only (str.splitlines would also
    split at \\r, \\x0b, \\x0c, \\x1c-\\x1e, \\x85, \\u2028, \\u2029: a field of one line read as two)."""
    return text.split("\n")


def codename(os_release: str) -> str:
    """VERSION_CODENAME of an os-release file (UBUNTU_CODENAME where it is missing); empty when neither. Its
    lines as sh reads them: split at `\n` only, only blanks (and a CRLF's `\r`) around a field taken off."""
    fields = {}
    for line in lines(os_release):
        key, sep, value = line.strip(BLANKS).partition("=")
        if sep:
            fields[key] = value.strip(BLANKS).strip("'\"")
    return fields.get("VERSION_CODENAME") or fields.get("UBUNTU_CODENAME") or ""


def targets(text: str) -> list[tuple[str, str]]:
    """`apt-get indextargets --format '$(RELEASE) $(DESCRIPTION)'`: each package index the sources name, as
    (suite, description)."""
    rows = [line.strip(BLANKS).partition(" ") for line in lines(text)]
    return [(suite, description) for suite, _, description in rows if suite and description.endswith("Packages")]


_FILE = re.compile(r"^ (-?\d+) (\S.*)$")  # ` 500 http://deb.example.org/debian bookworm/main amd64 Packages`
_RELEASE = re.compile(r"^ {2,}release (\S+)$")  # `     release v=12,o=Debian,n=bookworm,...`


def index_files(text: str) -> list[IndexFile]:
    """The package files of `apt-cache policy` (no package named), each with its Release fields."""
    files: list[IndexFile] = []
    for line in lines(text):
        if line.startswith("Pinned packages:"):
            break
        if match := _FILE.match(line):
            files.append(IndexFile(match.group(2), {}))
        elif (match := _RELEASE.match(line)) and files:
            fields = dict(item.partition("=")[::2] for item in match.group(1).split(","))
            files[-1] = IndexFile(files[-1].name, fields)
    return files


_PACKAGE = re.compile(r"^(\S+):$")  # `libc6:`, `libc6:i386:`
_VERSION = re.compile(r"^ (\*\*\*| {3}) (\S+) -?\d+(?: .*)?$")  # ` *** 2.36-9+deb12u7 500`, `     1.2 500 (phased 10%)`
_SOURCE = re.compile(r"^ {6,}-?\d+ (\S.*)$")  # `        500 http://... bookworm-security/main amd64 Packages`


def version_tables(text: str) -> list[Table]:
    """The version tables of `apt-cache policy PKG...`, in its order (each table newest version first)."""
    tables: list[tuple[str, list[Version]]] = []
    for line in lines(text):
        if match := _PACKAGE.match(line):
            tables.append((match.group(1), []))
        elif tables and (match := _VERSION.match(line)):
            tables[-1][1].append(Version(match.group(2), match.group(1) == "***", ()))
        elif tables and tables[-1][1] and (match := _SOURCE.match(line)):
            last = tables[-1][1][-1]
            tables[-1][1][-1] = Version(last.version, last.installed, (*last.sources, match.group(1)))
    return [Table(name, tuple(versions)) for name, versions in tables]


def pending(tables: Iterable[Table], security: set[str], suite: str) -> list[Pending]:
    """The installed packages with a version above the installed one from a `security` index: the newest such.
    A table is newest first, so the versions before the installed one are the newer ones; a package not
    installed (no `***` row) is none."""
    found = []
    for table in tables:
        rows = list(table.versions)
        here = next((i for i, v in enumerate(rows) if v.installed), None)
        if here is None:
            continue
        newer = next((v for v in rows[:here] if security.intersection(v.sources)), None)
        if newer is not None:
            found.append(Pending(table.package, rows[here].version, newer.version, suite))
    return found


def _is_suite(index: IndexFile, suite: str) -> bool:
    """Whether a package index is the suite's: its Release's codename, or the suite its sources entry names
    (`URI SUITE/COMPONENT ARCH Packages`)."""
    words = index.name.split()
    named = words[1].split("/", 1)[0] if len(words) > 1 else ""
    return index.release.get("n") == suite or named == suite


def _apt_errors(update: str, suite: str, most: int = 3) -> str:
    """apt's own words on what failed (its W: and E: lines), those naming the suite first."""
    said = [line.strip() for line in lines(update) if line.startswith(("W:", "E:"))]
    said = sorted(said, key=lambda line: suite not in line)
    return "; ".join(line[:300] for line in said[:most]) or "apt read no index of it (no error said)"


def _refreshed(narrowed: str, why: str) -> str:
    """What the note says of the lists refreshed."""
    if narrowed == "yes":
        return " (only the security lists refreshed)"
    if narrowed == "no":
        why = "the copy of the security entries named other indexes than the image's sources"
    return f" (every list refreshed: {why})" if why else ""


def _tail(text: str, lines: int = 3) -> str:
    last = [line.strip() for line in text.strip().split("\n") if line.strip()][-lines:]
    return " | ".join(last)[-600:] or "no output"


def _not_scanned(why: str) -> Scan:
    return Scan(OS_UPDATES, scanned=False, note=why)
