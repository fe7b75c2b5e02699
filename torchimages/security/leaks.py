"""What no layer of a released image may hold, as rules on one entry of a layer (layers.py reads the layers
and applies them; content.py searches a file's whole content with these patterns).

The rules, each a table below:
    credentials    by path, anywhere in the image (any home): CREDENTIAL_FILES; some only with a mark in their
                   content (an auth token in .npmrc, a password in a pip.conf URL, in apt's sources or apt.conf,
                   in a gitconfig or /etc/environment, one in apt's auth.conf, a login in a wgetrc, a curlrc, a
                   shell's startup file or a condarc), searched in the whole file; a URL's login is read as
                   values.py reads it (USERINFO)
    private keys   by content, anywhere in any file, whatever its name and size: a PEM private key (PKCS#8,
                   encrypted, RSA, EC, DSA, OpenSSH's, PGP's private key block) whose BEGIN line is followed by
                   its base64 body (also with JSON's escaped newlines: a service account key), or a PuTTY key;
                   not in the test data of Python packages and of Python itself (KEY_TEST_FOLDERS under
                   site-packages, dist-packages or lib/pythonX.Y: published test keys)
    build secrets  the build's BuildKit secrets that may hold credentials (its pip.conf and uv.toml): a file
                   holding one's whole content anywhere in it, or a login from one (an index URL's userinfo,
                   its password), under any name; a secret too short to search for is matched as a whole file
    stray files    anything in /tmp, /var/tmp and /root but what the distribution puts there (STRAY_PLACES);
                   not folders, whiteouts, nor empty files (BuildKit leaves one at each file mount's target,
                   e.g. /tmp/requirements.lock: it holds nothing)
A hard link or symlink at a credentials file's path is refused by its path where the rule says so (`links`: its
target's content is not always in the same layer), said as that file only for a rule by path alone; one to a
file of the same layer holds that file's content, judged at the link's path too (links.py follows chains and
folder links; a target not read is said).

Every content pattern matches at most MATCH_MAX bytes, so that a search in chunks overlapping by that much
finds whatever a search of the whole file would.
"""

from __future__ import annotations

import fnmatch
import hashlib
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from torchimages import values

MATCH_MAX = 16384  # bytes: the longest match of any content pattern below, or key block (the chunks' overlap)
KEY_BLOCK_MAX = 8192  # bytes from a key's BEGIN line to its END line looked at to know it for a published one
NEEDLE_MIN = 12  # bytes: a secret's content or login shorter than this is not searched for inside files
NEEDLE_MAX = 64 * 1024  # bytes: a secret larger than this is matched as a whole file (and its logins searched)

_NL = rb"(?:\r?\n|\\r\\n|\\n)"  # a newline, or one escaped in a JSON string (a service account's key file)
# RFC 7468's PRIVATE KEY and ENCRYPTED PRIVATE KEY, OpenSSL's RSA, EC and DSA, OpenSSH's own, RFC 4880's PGP
# PRIVATE KEY BLOCK: the BEGIN line, optional headers (Proc-Type, DEK-Info, Version, Comment), a blank line,
# then the body's first 16 base64 characters (a library that only names the line, e.g. libssh2, is no key).
PEM_KEY = re.compile(
    rb"-----BEGIN ((?:[A-Z0-9]{1,16} ){0,4}PRIVATE KEY(?: BLOCK)?)-----[ \t]{0,8}"
    + _NL
    + rb"(?:[A-Za-z0-9-]{1,40}:[^\r\n\\]{0,200}"
    + _NL
    + rb"){0,8}(?:[ \t]{0,8}"
    + _NL
    + rb"){0,2}[ \t]{0,16}[A-Za-z0-9+/]{16}"
)
PUTTY_KEY = re.compile(rb"(PuTTY-User-Key-File-[0-9]{1,2}): [A-Za-z0-9@.-]{3,64}\r?\nEncryption: ")
KEY_PATTERNS = ((b"-----BEGIN ", PEM_KEY), (b"PuTTY-User-Key-File-", PUTTY_KEY))  # (a literal it starts with, it)
NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/=]")
# Private keys published with the software that embeds them, by the sha256 of their body (base64 characters
# between the BEGIN and END lines, `key_digest`): not anyone's secret. GnuTLS's FIPS self-test keys
# (lib/crypto-selftests-pk.c), in libgnutls.so.30 of Debian 12 (3.7.9), Ubuntu 22.04 (3.7.3) and 24.04 (3.8.3).
PUBLISHED_KEYS = frozenset(
    {
        "bf552d2ff30b20f0b0ee2bcc357a5ab68dbe899ae09a0071b097bee2d2434332",  # PRIVATE KEY (PKCS#8)
        "cadf1e62661d5d21a7fce2c80b3319022ee366137e4b302a7ea78b7f17d6f599",  # PRIVATE KEY (PKCS#8)
        "6d03bbf47115fad00d6f990593a6465ca693d0f6d797721cfc94b0190349b50d",  # PRIVATE KEY (PKCS#8)
        "24a2416c5abbb67327599619c25906553b849d79cbc413e2a061f12de6718838",  # EC PRIVATE KEY (P-256)
        "9ab6db67523ba6071fdb948b3ce38349ec08fb726f359abbbca33a3a84238ba2",  # DSA PRIVATE KEY
        "f287c70b1db074fe73f73bfb1f09a8b0231e0d951d5bfd30a742bcb9de9195ab",  # RSA PRIVATE KEY
    }
)
KEY_TEST_FOLDERS = frozenset({"test", "tests", "testing", "testdata", "test_data"})
# Where a `.env` file is a test's, a document's, an example's or a package's (site-packages, dist-packages,
# node_modules, conda's pkgs, /usr/share/doc): no application's, its logins are fixtures (`postgres:postgres@`)
PACKAGE_FOLDERS = frozenset({"site-packages", "dist-packages", "node_modules", "pkgs"})
DOTENV_NOT_BELOW = (
    KEY_TEST_FOLDERS
    | frozenset({"example", "examples", "sample", "samples", "fixtures", "doc", "docs"})
    | PACKAGE_FOLDERS
)
# An owned place's own root, whose name says nothing of whose a `.env` is (`/home/test/`: a user named test;
# `/opt/docs/`: an application named docs): below it, only the folders below that root say a `.env` is a test's, a
# document's, an example's or a package's (`/home/u/app/tests/.env`, a repository's fixture, is not judged)
OWNED_PLACES = (("home", "*"), ("root",), ("etc", "*"), ("opt", "*"))
# A home's own folders are its user's (`/home/u/docs/.env`, `/root/test/.env`: judged): there the names say a test's,
# a document's or an example's `.env` only inside a folder of the home (a repository: `/home/u/app/tests/.env`); a
# package folder's name counts anywhere below the root (`/home/u/node_modules/x/.env`)
HOMES = (("home", "*"), ("root",))
# A URL's userinfo (group 2: `user[:password]`), read as values.py reads it (a user, then a password of any
# non-blank characters up to the first '@' a host follows: `http://u:pa/ss@host`, `http://u:it's@host`; an '@' in
# a path is no login), each part bounded (MATCH_MAX); in a file a host may also end at a quote or a delimiter
# that closes the URL (`"http://u:p@proxy:3128";`, `'http://u:p@proxy'`)
URL_END_IN_FILES = r"""[/?#\s"'<>;,)}\\&|`]"""  # values.URL_END, and what closes a URL in a file or a shell line
USERINFO = re.compile(values.userinfo_pattern("{0,1024}", "{1,1024}", URL_END_IN_FILES, "{0,255}").encode())
# What a file judged for a secret login may hold as a password that is no secret, by what the shell or the tool
# would send: the shell's variable (sh, bash, zsh, csh: `$NAME`, `${NAME}`, `${NAME:-}` or `${NAME:-$OTHER}` (a
# default that is empty or a variable: a literal default, `${NAME:-hunter2}`, is a password written in the file),
# `${NAME:?message}`; fish's `{$NAME}`; systemd's, pam_env's, dotenv's and conda's `${NAME}`), and a placeholder
# (`password`, `passwd` all lower or all upper case; `<...>` holding a secret's name as a word of its own:
# `<password>`, `<token>`, `<your-api-key>`; `***`, `xxx`, `...`). A command substitution is no variable
# (`$(echo${IFS}pw)` sends pw, and a .env or environment.d file sends it as written), nor is `<hunter2>` a
# placeholder, nor `Password` (typed so)
SHELL_VARIABLE = (
    r"\$[A-Za-z_][A-Za-z0-9_]{0,255}"
    r"|\$\{[A-Za-z0-9_]{1,255}(?::?[-=](?:\$[A-Za-z_][A-Za-z0-9_]{0,255})?|:?\?[^\s{}@]{0,255})?\}"
    r"|\{\$[A-Za-z_][A-Za-z0-9_]{0,255}\}"
)
# `<...>` is a placeholder when it holds a secret's or a login's name as a word of its own, its other words (joined
# by `-`, `_` or `.`, or camelCase: a capital after a small letter begins a word) letters only, in any case
# (`<password>`, `<your-proxy-password>`, `<HF_TOKEN>`, `<ldap_password>`, `<your.password>`, `<yourPassword>`,
# `<accessToken>`, `<user>`), or `<...>`: `<Mysecret>`, `<yourpassword>`, `<hunter2>` are passwords. A name among
# other words passes too (`<key_hunter>`, `<SecretSauce>`: a known limit, the price of no false finding on the
# placeholders documentation writes, `<GITHUB_TOKEN>`, `<admin-password>`, `<yourPassword>`); a run of capitals is
# one word with the small letters after it (`<HFToken>` is no placeholder: a known limit)
PLACEHOLDER_NAMES = frozenset(
    {"password", "passwd", "passphrase", "pass", "pwd", "pw", "token", "secret", "key", "apikey", "credentials",
     "credential", "creds", "cred", "user", "username", "login", "auth", "pat", "value"}
)  # fmt: skip
_PLACEHOLDER_NAME = rf"(?i:{'|'.join(sorted(PLACEHOLDER_NAMES))})"
# a word: capitals then small letters, or small letters (`your`, `Password`, `HF`, `TOKEN`), so that where each word
# ends is never a choice (a choice per capital would make the search exponential); case-sensitive even in a
# pattern that ignores case (wgetrc's), where [a-z] would be any letter
_PLACEHOLDER_WORD = r"(?:[A-Z]{1,32}[a-z]{0,32}|[a-z]{1,32})"
_PLACEHOLDER_JOIN = r"(?:[-_.]|(?<=[a-z])(?=[A-Z]))"  # `-`, `_`, `.`, or camelCase's capital (`yourPassword`)
_ANGLE_PLACEHOLDER = (
    rf"<(?-i:\.{{3}}|(?:{_PLACEHOLDER_WORD}{_PLACEHOLDER_JOIN}){{0,8}}{_PLACEHOLDER_NAME}"
    rf"(?:{_PLACEHOLDER_JOIN}{_PLACEHOLDER_WORD}){{0,8}})>"
)
PLACEHOLDER = rf"(?-i:password|PASSWORD|passwd|PASSWD)|{_ANGLE_PLACEHOLDER}|\*{{1,64}}|[xX]{{3,64}}|\.{{3}}"
_NO_SECRET = rf"{SHELL_VARIABLE}|{PLACEHOLDER}"
# the same, for a login that is a secret (a password, or a user alone that is a token: values.TOKEN_USER), its
# password no variable or placeholder (_NO_SECRET): in files where a URL with a user alone is common and no secret
# (`ssh://git@github.com/...` in a shell startup file): the shells', wget's, curl's, conda's
SECRET_USERINFO = re.compile(
    values.userinfo_pattern(
        "{0,1024}", "{1,1024}", URL_END_IN_FILES, "{0,255}", secret_only=True, not_password=_NO_SECRET
    ).encode()
)
# a proxy's login without a scheme (`http_proxy=user:password@proxy:3128`: curl and wget take it): a variable whose
# name ends in `proxy` (any case) set (`=`, a blank: csh's setenv, fish's set; pam_env's DEFAULT=/OVERRIDE=; YAML's
# `: `), then USER:PASSWORD@HOST, a password that is no secret (_NO_SECRET) left out; a password holds no blank,
# quote, nor `proxy=` (where the next such variable may start: each is read once, the search stays linear); a
# password holding `proxy` otherwise (`Proxy2024!`) is read
_PROXY_LOGIN = (
    rf"(?i:proxy)(?![A-Za-z0-9_])[\"']?[ \t]{{0,64}}(?:=|:(?=[ \t])|(?<=[ \t]))[ \t]{{0,64}}"
    rf"(?:(?:DEFAULT|OVERRIDE)=)?[\"']?[^\s/?#:@\"'$=]{{1,1024}}:(?!//|(?:{_NO_SECRET})@)"
    rf"(?:(?!(?i:proxy)=)[^\s\"']){{1,1024}}?@(?={values.HOST_CHAR}{{1,1024}}(?:{URL_END_IN_FILES}|$))"
)
# the shells' and environment files' mark: a login that is a secret in a URL (its password no variable or
# placeholder), or a proxy's login without a scheme
SHELL_LOGIN = re.compile(SECRET_USERINFO.pattern + b"|" + _PROXY_LOGIN.encode())
# /etc/environment's mark (pam_env reads it, as it reads pam_env.conf): any login in a URL, or a proxy's login
# without a scheme
ENVIRONMENT_LOGIN = re.compile(USERINFO.pattern + b"|" + _PROXY_LOGIN.encode())
# kaggle.json's API key (`{"username": "...", "key": "..."}`), set
KAGGLE_KEY = re.compile(rb'"key"[ \t\r\n]{0,64}:[ \t\r\n]{0,64}"[^"]')
# rclone.conf's secrets (rclone.org/docs: each backend's options): a password (obscured: readable by anyone), a
# token, a key
RCLONE_SECRET = re.compile(
    rb"^[ \t]{0,64}(?:pass|password|password2|token|bearer_token|access_token|session_token|secret_access_key"
    rb"|client_secret|key|account_key|sas_url|api_key|app_key|service_account_credentials|key_file_pass|auth_token"
    rb"|application_credential_secret|client_certificate_password)[ \t]{0,64}=[ \t]{0,64}\S",
    re.MULTILINE,
)
# apt_auth.conf(5) (netrc's format): a `password` token and its value
APT_PASSWORD = re.compile(rb"(?:^|\s)password[ \t\r\n]{1,64}\S", re.IGNORECASE)


def _wget_word(word: str) -> str:
    """A wgetrc command name as wget reads it: any case (the pattern's flag), `-` and `_` anywhere ignored."""
    return "[-_]{0,16}".join(word)


# wget's startup files (wgetrc(5) commands, `-` and `_` ignored anywhere, any case): a password command on a line
# of its own (`password`, `http_password`, `ftp_passwd`, `proxy_password`, `pass_word`, `http-pass-word`), or a
# login that is a secret in a URL (`http_proxy = URL`)
_WGET_PASSWORD = (
    rf"^[ \t]{{0,64}}[-_]{{0,16}}(?:(?:{_wget_word('http')}|{_wget_word('ftp')}|{_wget_word('proxy')})[-_]{{0,16}})?"
    rf"{_wget_word('passw')}[-_]{{0,16}}(?:{_wget_word('or')}[-_]{{0,16}})?d[-_]{{0,16}}"
    rf"[ \t]{{0,64}}=[ \t]{{0,64}}[^\s#]"
)
WGET_LOGIN = re.compile(_WGET_PASSWORD.encode() + rb"|" + SECRET_USERINFO.pattern, re.IGNORECASE | re.MULTILINE)
_CURL_USER = (
    rb"^[ \t]{0,64}(?:-[uU]|(?:--)?(?:proxy-)?user)(?=[ \t=:])[ \t]{0,64}[=:]?[ \t]{0,64}\"?[^\s\":]{0,1024}:[^\s\"]"
)
_CURL_PASS = rb"^[ \t]{0,64}(?:--)?(?:oauth2-bearer|pass|proxy-pass)(?=[ \t=:])[ \t=:]{1,64}\"?[^\s\"#]"
_CURL_HEADER = (
    rb"^[ \t]{0,64}(?:-H|(?:--)?(?:proxy-)?header)(?=[ \t=:\"'])[ \t=:]{0,64}[\"']?[ \t]{0,64}"
    rb"(?i:(?:proxy-)?authorization)[ \t]{0,64}:[ \t]{0,64}[^\s\"']"
)
_CONDA_TOKEN = rb"://[^\s/]{1,255}/t/[A-Za-z0-9_-]{8,128}(?![A-Za-z0-9_-])"
# curl's config file (`--user u:p`, `-u u:p`, `user = "u:p"`, `proxy-user`: a user with a password; a bearer
# token; a key's passphrase; an Authorization header: `header = "Authorization: Bearer T"`, `-H "Authorization:
# Basic B"`), or a login that is a secret in a URL (`proxy = "http://u:p@host"`)
CURL_LOGIN = re.compile(b"|".join((_CURL_USER, _CURL_PASS, _CURL_HEADER, SECRET_USERINFO.pattern)), re.MULTILINE)
# conda's channels and proxies: a login that is a secret in a URL, or an anaconda.org token in a channel's path
# (`/t/TOKEN/`, `/t/TOKEN` ending the URL)
CONDA_LOGIN = re.compile(_CONDA_TOKEN + rb"|" + SECRET_USERINFO.pattern)


@dataclass(frozen=True)
class CredentialFile:
    """A credentials file by path: `suffix` its last path components (fnmatch patterns), found wherever it is
    (any home, any prefix); with a `mark`, only when its content matches it somewhere. A hard link or symlink
    at its path is a finding by its path alone where `links` (its target may be in another layer: not read
    through the link); without, only what it links to in its own layer is judged (layers.py)."""

    suffix: tuple[str, ...]
    what: str
    mark: re.Pattern[bytes] | None = None
    unless: frozenset[str] = frozenset()  # names the last pattern does not take (apt's folders beside its files)
    links: bool = True  # a link at this path is refused whatever it points to (False: no finding by its path)
    not_below: frozenset[str] = frozenset()  # folders whose files of this name are not judged (a test's, a package's)


CREDENTIAL_FILES = (
    # curl, git, pip, requests and Python's netrc module read it (`_netrc` too: curl, git): login, password
    CredentialFile((".netrc",), "a netrc file (logins and passwords)"),
    CredentialFile(("_netrc",), "a netrc file (logins and passwords)"),
    # postgresql.org/docs/current/libpq-pgpass.html: host:port:database:user:password
    CredentialFile((".pgpass",), "a PostgreSQL password file"),
    # dev.mysql.com/doc/refman/8.0/en/option-files.html: a [client] password
    CredentialFile(
        (".my.cnf",), "a MySQL option file with a password", re.compile(rb"password[ \t]{0,16}=[ \t]{0,16}[^\s#]")
    ),
    # docs.docker.com/reference/cli/docker/login: `auths` hold base64 user:password, or identity tokens
    CredentialFile(
        (".docker", "config.json"),
        "a Docker client configuration with registry credentials",
        re.compile(
            rb'"(?:auth|identitytoken|registrytoken)"[ \t\r\n]{0,64}:[ \t\r\n]{0,64}"[^"]|' + USERINFO.pattern,
            re.IGNORECASE,
        ),
    ),
    # packaging.python.org/specifications/pypirc: twine's upload credentials
    CredentialFile((".pypirc",), "a .pypirc (PyPI upload credentials)"),
    # git-scm.com/docs/git-credential-store (both places); a remote's URL with a login in a repository's config
    CredentialFile((".git-credentials",), "a git credential store"),
    CredentialFile((".config", "git", "credentials"), "a git credential store"),
    CredentialFile((".git", "config"), "a git repository configuration with a login in a URL", USERINFO),
    # docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html
    CredentialFile((".aws", "credentials"), "AWS credentials"),
    # s3cmd's and boto's configurations: secret keys
    CredentialFile(
        (".s3cfg",), "an s3cmd configuration with a secret key", re.compile(rb"secret_key[ \t]{0,16}=[ \t]{0,16}\S")
    ),
    CredentialFile(
        (".boto",),
        "a boto configuration with a secret key",
        re.compile(rb"(?:aws_secret_access_key|gs_secret_access_key|gs_oauth2_refresh_token)[ \t]{0,16}=[ \t]{0,16}\S"),
    ),
    # cloud.google.com/docs/authentication/application-default-credentials; gcloud's own stores
    CredentialFile((".config", "gcloud", "application_default_credentials.json"), "Google Cloud credentials"),
    CredentialFile((".config", "gcloud", "credentials.db"), "Google Cloud credentials (gcloud)"),
    CredentialFile((".config", "gcloud", "access_tokens.db"), "Google Cloud access tokens (gcloud)"),
    CredentialFile((".config", "gcloud", "legacy_credentials", "*", "*"), "Google Cloud credentials (gcloud)"),
    # learn.microsoft.com/cli/azure: the Azure CLI's token caches and service principals
    CredentialFile((".azure", "accessTokens.json"), "Azure CLI access tokens"),
    CredentialFile((".azure", "msal_token_cache.*"), "Azure CLI token cache"),
    CredentialFile((".azure", "service_principal_entries.*"), "Azure CLI service principal secrets"),
    # kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig
    CredentialFile((".kube", "config"), "a kubeconfig (cluster credentials)"),
    # huggingface.co/docs/huggingface_hub/package_reference/environment_variables (HF_TOKEN_PATH; the old place)
    CredentialFile((".cache", "huggingface", "token"), "a Hugging Face token"),
    CredentialFile((".cache", "huggingface", "stored_tokens"), "Hugging Face tokens"),
    CredentialFile((".huggingface", "token"), "a Hugging Face token"),
    # cli.github.com/manual/gh_auth_login: oauth_token in hosts.yml; hub's the same
    CredentialFile(
        (".config", "gh", "hosts.yml"), "GitHub CLI tokens", re.compile(rb"oauth_token[ \t]{0,16}:[ \t]{0,16}\S")
    ),
    CredentialFile((".config", "hub"), "hub's GitHub tokens", re.compile(rb"oauth_token[ \t]{0,16}:[ \t]{0,16}\S")),
    # docs.npmjs.com/cli/configuring-npm/npmrc: `//registry/:_authToken=...`, _auth, _password, or a registry
    # URL's login; Yarn 2+'s
    CredentialFile(
        (".npmrc",),
        "an .npmrc with an auth token or credentials in a URL",
        re.compile(USERINFO.pattern + rb"|_(?:authToken|auth|password)[ \t]{0,16}=", re.IGNORECASE),
    ),
    CredentialFile(
        (".yarnrc.yml",),
        "a .yarnrc.yml with an auth token",
        re.compile(rb"npmAuth(?:Token|Ident)[ \t]{0,16}:[ \t]{0,16}\S"),
    ),
    # pip.pypa.io/en/stable/topics/configuration; docs.astral.sh/uv/reference/settings: an index URL's userinfo
    CredentialFile(("pip.conf",), "a pip.conf with credentials in a URL", USERINFO),
    CredentialFile(("uv.toml",), "a uv.toml with credentials in a URL", USERINFO),
    # apt's sources (sources.list(5): one-line .list and deb822 .sources) with a mirror's login in a URL, and
    # apt's copies of them (sources.list.save, *.list.distUpgrade: do-release-upgrade's, *.list~): sources.list*
    # and any file below sources.list.d (a sub-folder's too: apt reads none, but what is there is in the image);
    # apt.conf(5) with a login in a proxy's or source's URL (`Acquire::http::Proxy "http://user:password@proxy"`);
    # its logins (apt_auth.conf(5)): a build gives apt a mirror's login through a BuildKit secret, never a file
    CredentialFile(
        ("apt", "sources.list*"), "apt sources with credentials in a URL", USERINFO, frozenset({"sources.list.d"})
    ),
    CredentialFile(("apt", "sources.list.d", "**"), "apt sources with credentials in a URL", USERINFO),
    CredentialFile(
        ("apt", "apt.conf*"), "an apt configuration with credentials in a URL", USERINFO, frozenset({"apt.conf.d"})
    ),
    CredentialFile(("apt", "apt.conf.d", "**"), "an apt configuration with credentials in a URL", USERINFO),
    CredentialFile(("apt", "auth.conf"), "an apt auth.conf with a password", APT_PASSWORD),
    CredentialFile(("apt", "auth.conf.d", "*"), "an apt auth.conf with a password", APT_PASSWORD),
    # git-scm.com/docs/git-config#FILES: the user's, XDG and system configurations; a login in a URL
    # (`[url "https://user:token@host/"] insteadOf = https://host/`, a remote's or a proxy's URL)
    CredentialFile((".gitconfig",), "a git configuration with a login in a URL", USERINFO),
    CredentialFile((".config", "git", "config"), "a git configuration with a login in a URL", USERINFO),
    CredentialFile(("etc", "gitconfig"), "a git configuration with a login in a URL", USERINFO),
    # pip's configuration under its Windows name (pip.ini), read where it is named (PIP_CONFIG_FILE)
    CredentialFile(("pip.ini",), "a pip.ini with credentials in a URL", USERINFO),
    # pam_env's environment (http_proxy=http://user:password@proxy), read at every login
    CredentialFile(("etc", "environment"), "an /etc/environment with credentials in a URL", ENVIRONMENT_LOGIN),
    # URL-bearing configurations where a proxy's or a mirror's login commonly sits (issue 42), judged by their
    # content; a link there is no finding by its path (shell startup files are often links to shared ones).
    # wget (gnu.org/software/wget/manual: Startup File): /etc/wgetrc, ~/.wgetrc
    CredentialFile(("wgetrc",), "a wgetrc with a password or a login in a URL", WGET_LOGIN, links=False),
    CredentialFile((".wgetrc",), "a wgetrc with a password or a login in a URL", WGET_LOGIN, links=False),
    # curl (curl.se/docs/manpage.html#-K): ~/.curlrc, $XDG_CONFIG_HOME/curlrc, _curlrc
    CredentialFile((".curlrc",), "a curlrc with a login, a token or a login in a URL", CURL_LOGIN, links=False),
    CredentialFile(("curlrc",), "a curlrc with a login, a token or a login in a URL", CURL_LOGIN, links=False),
    CredentialFile(("_curlrc",), "a curlrc with a login, a token or a login in a URL", CURL_LOGIN, links=False),
    # shells' startup files (`export http_proxy=http://user:password@proxy`, `http_proxy=user:password@proxy`):
    # bash's, the POSIX profile, zsh's, the system-wide ones (Debian's /etc/zsh/*), /etc/profile.d's snippets (and
    # its sub-folders'), csh's and tcsh's (`setenv http_proxy ...`: /etc/csh.cshrc, /etc/csh.login, Debian's
    # /etc/csh/cshrc.d/* and login.d/*, ~/.cshrc, ~/.tcshrc, ~/.login) and fish's (`set -gx http_proxy ...`:
    # config.fish, conf.d/*.fish, vendor_conf.d/*.fish, the system's and the user's); a login that is a secret (a
    # user alone, `ssh://git@github.com/...`, is none; nor a password that is a variable or a placeholder)
    *(
        CredentialFile(suffix, "a shell startup file with a login in a URL", SHELL_LOGIN, links=False)
        for suffix in (
            (".bashrc",),
            (".bash_profile",),
            (".bash_login",),
            (".profile",),
            (".zshrc",),
            (".zshenv",),
            (".zprofile",),
            ("etc", "profile"),
            ("etc", "bash.bashrc"),
            ("etc", "zshenv"),
            ("etc", "zshrc"),
            ("etc", "zprofile"),
            ("etc", "zlogin"),
            ("etc", "zsh", "*"),
            ("etc", "profile.d", "*"),
            ("etc", "profile.d", "*", "*"),
            ("etc", "csh.cshrc"),
            ("etc", "csh.login"),
            ("etc", "csh", "cshrc.d", "*"),
            ("etc", "csh", "login.d", "*"),
            (".cshrc",),
            (".tcshrc",),
            (".login",),
            ("fish", "config.fish"),
            ("fish", "conf.d", "*.fish"),
            ("fish", "vendor_conf.d", "*.fish"),
        )
    ),
    # systemd's environment.d(5) (/etc/environment.d/*.conf, ~/.config/environment.d/*.conf)
    CredentialFile(
        ("environment.d", "*.conf"), "an environment.d file with a login in a URL", SHELL_LOGIN, links=False
    ),
    # pam_env(8)'s files, read at every login: /etc/security/pam_env.conf (`http_proxy DEFAULT=...`), the user's
    CredentialFile(("security", "pam_env.conf"), "a pam_env file with a login in a URL", SHELL_LOGIN, links=False),
    CredentialFile((".pam_environment",), "a pam_env file with a login in a URL", SHELL_LOGIN, links=False),
    # dotenv files (docker compose, python-dotenv, direnv): `.env` and `.env.*` anywhere (`/app/.env`,
    # `.env.production`), but their templates (`.env.example`, `.sample`, `.template`, `.dist`) and those below a
    # test's, a document's, an example's or a package's folder (DOTENV_NOT_BELOW)
    CredentialFile(
        (".env",), "a .env file with a login in a URL", SHELL_LOGIN, links=False, not_below=DOTENV_NOT_BELOW
    ),
    CredentialFile(
        (".env.*",),
        "a .env file with a login in a URL",
        SHELL_LOGIN,
        frozenset({".env.example", ".env.sample", ".env.template", ".env.dist"}),
        links=False,
        not_below=DOTENV_NOT_BELOW,
    ),
    # github.com/Kaggle/kaggle-api: ~/.kaggle/kaggle.json, ~/.config/kaggle/kaggle.json (an API key)
    CredentialFile((".kaggle", "kaggle.json"), "a Kaggle API key", KAGGLE_KEY),
    CredentialFile(("kaggle", "kaggle.json"), "a Kaggle API key", KAGGLE_KEY),
    # rclone.org/docs/#config-file: rclone.conf anywhere (~/.config/rclone/, ~/.rclone.conf): a remote's password
    # (obscured, not encrypted), token or key
    CredentialFile(("rclone.conf",), "an rclone configuration with a password, token or key", RCLONE_SECRET),
    CredentialFile((".rclone.conf",), "an rclone configuration with a password, token or key", RCLONE_SECRET),
    # conda (docs.conda.io: the .condarc search path; mamba's too): channels and proxy_servers
    CredentialFile((".condarc",), "a condarc with a login or a token in a URL", CONDA_LOGIN, links=False),
    CredentialFile(("condarc",), "a condarc with a login or a token in a URL", CONDA_LOGIN, links=False),
    CredentialFile(("condarc.d", "*"), "a condarc with a login or a token in a URL", CONDA_LOGIN, links=False),
    CredentialFile((".mambarc",), "a mambarc with a login or a token in a URL", CONDA_LOGIN, links=False),
    # Maven's settings.xml <server><password>; Cargo's, RubyGems' and Terraform's tokens; Vault's token
    CredentialFile((".m2", "settings.xml"), "a Maven settings.xml with a password", re.compile(rb"<password>[^<\s]")),
    CredentialFile((".cargo", "credentials"), "Cargo registry tokens"),
    CredentialFile((".cargo", "credentials.toml"), "Cargo registry tokens"),
    CredentialFile((".gem", "credentials"), "RubyGems API keys"),
    CredentialFile((".terraform.d", "credentials.tfrc.json"), "Terraform tokens"),
    CredentialFile((".vault-token",), "a Vault token"),
    # gnupg.org/documentation/manuals/gnupg/GPG-Configuration.html: secret keys (2.1+, and 1.x's keyring)
    CredentialFile((".gnupg", "private-keys-v1.d", "*"), "a GnuPG secret key"),
    CredentialFile((".gnupg", "secring.gpg"), "a GnuPG secret keyring"),
)


@dataclass(frozen=True)
class StrayPlace:
    """A folder that a released image keeps empty but for the distribution's own `defaults` (names in it)."""

    folder: str
    defaults: frozenset[str] = frozenset()


STRAY_PLACES = (
    StrayPlace("/tmp"),
    StrayPlace("/var/tmp"),
    # Debian's and Ubuntu's base-files install /root/.bashrc and /root/.profile (from /usr/share/base-files)
    StrayPlace("/root", frozenset({".bashrc", ".profile"})),
)


@dataclass(frozen=True)
class Hit:
    """What one layer holds that no image may: the path in the image (the finding's key) and what it is."""

    path: str
    detail: str


@dataclass(frozen=True)
class Secret:
    """A file of the build's secrets: its name (for messages), size and sha256, and what is searched for
    inside files (`needles`: its whole content, stripped; each login in it), each with what it is."""

    name: str
    size: int
    sha256: str
    needles: tuple[tuple[bytes, str], ...] = field(default=(), repr=False)


def image_path(name: str) -> str:
    """A tar member's name as an absolute path in the image: `./root/.netrc` -> `/root/.netrc`."""
    return posixpath.normpath("/" + name.lstrip("/")).replace("//", "/")


def _by_last_name(rules: Sequence[CredentialFile]) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """The rules (their places in `rules`) by their last component when it is a plain name, and those whose last
    component is a pattern: a path's name picks the few rules it can match."""
    named: dict[str, tuple[int, ...]] = {}
    patterned: list[int] = []
    for at, rule in enumerate(rules):
        last = rule.suffix[-1]
        if any(c in last for c in "*?["):
            patterned.append(at)
        else:
            named[last] = (*named.get(last, ()), at)
    return named, tuple(patterned)


_NAMED, _PATTERNED = _by_last_name(CREDENTIAL_FILES)


def _fits(parts: Sequence[str], stop: int, patterns: Sequence[str]) -> bool:
    """Whether the components of `parts` that end before `stop` match `patterns`, one each."""
    start = stop - len(patterns)
    return start >= 0 and all(fnmatch.fnmatchcase(parts[start + i], p) for i, p in enumerate(patterns))


def _link_marks(rules: Sequence[CredentialFile]) -> tuple[re.Pattern[bytes], ...]:
    """The content marks of the rules that judge a link by what it points to (`links=False`), each once: every
    file's content is searched for them, so that a link to it at such a path is judged by its content."""
    marks: dict[bytes, re.Pattern[bytes]] = {}
    for rule in rules:
        if not rule.links and rule.mark is not None:
            marks.setdefault(rule.mark.pattern, rule.mark)
    return tuple(marks.values())


LINK_MARKS = _link_marks(CREDENTIAL_FILES)
LINK_READ_MAX = 1 << 20  # bytes: a larger file is not searched for LINK_MARKS (a startup file, rc or conf is small)


@dataclass(frozen=True)
class MarkPart:
    """One alternative of a link mark, searched only in a text that holds its literals: one of each group of
    `needs` (in the text as it is, `raw`; lower-cased, `lower`; lower-cased without '-' and '_', `folded`),
    which every match of `pattern` holds. A cheap test (bytes' `in`) spares the regex most files."""

    pattern: re.Pattern[bytes]
    needs: tuple[tuple[bytes, ...], ...]
    view: str = "raw"
    # where it is searched (content.py): "" the whole text; "line" each line holding a literal of the first
    # group (a pattern of one line that starts at a line's start); "url" around each `://` (URL_LOGIN's shape)
    locate: str = ""


_URL_LOGIN = ((b"://",), (b"@",))  # a URL's login: its scheme's `://` and the '@' before its host


def _url_part(pattern: re.Pattern[bytes]) -> MarkPart:
    return MarkPart(pattern, _URL_LOGIN, locate="url")


_WGET_FLAGS = re.IGNORECASE | re.MULTILINE
# Each mark of LINK_MARKS as its alternatives, by its pattern: a text matches the mark where one part matches.
LINK_PARTS: Mapping[bytes, tuple[MarkPart, ...]] = {
    WGET_LOGIN.pattern: (
        MarkPart(re.compile(_WGET_PASSWORD.encode(), _WGET_FLAGS), ((b"=",), (b"passw",)), "folded"),
        _url_part(re.compile(SECRET_USERINFO.pattern, _WGET_FLAGS)),
    ),
    CURL_LOGIN.pattern: (
        MarkPart(re.compile(_CURL_USER, re.MULTILINE), ((b"-u", b"-U", b"user"), (b":",)), locate="line"),
        MarkPart(re.compile(_CURL_PASS, re.MULTILINE), ((b"oauth2-bearer", b"pass"),), locate="line"),
        MarkPart(re.compile(_CURL_HEADER, re.MULTILINE), ((b"authorization",),), "lower", "line"),
        _url_part(re.compile(SECRET_USERINFO.pattern, re.MULTILINE)),
    ),
    CONDA_LOGIN.pattern: (MarkPart(re.compile(_CONDA_TOKEN), ((b"://",), (b"/t/",))), _url_part(SECRET_USERINFO)),
    SHELL_LOGIN.pattern: (
        _url_part(SECRET_USERINFO),
        MarkPart(re.compile(_PROXY_LOGIN.encode()), ((b"proxy",), (b"@",), (b":",)), "lower"),
    ),
}


def ends_with(parts: Sequence[str], suffix: Sequence[str]) -> bool:
    """Whether a path's components end with `suffix`: fnmatch patterns, one a component, but one `**` at most,
    one or more components (`apt/sources.list.d/**`: any file below that folder, however deep). Linear in the
    path's depth (a layer's hostile name may have thousands of components)."""
    if "**" not in suffix:
        return _fits(parts, len(parts), suffix)
    at = suffix.index("**")
    before, after = suffix[:at], suffix[at + 1 :]
    if not _fits(parts, len(parts), after):
        return False
    below = len(parts) - len(after)  # `**` takes parts[cut:below], one component at least
    if not before or any(c in before[-1] for c in "*?["):
        return any(_fits(parts, cut, before) for cut in range(below - 1, len(before) - 1, -1))
    at = len(before) - 1  # a literal last component of `before`: only where it is (list.index: C's pace)
    while at < below - 1:  # (a negative stop would count from the end)
        try:
            at = parts.index(before[-1], at, below - 1)
        except ValueError:
            return False
        if _fits(parts, at + 1, before):
            return True
        at += 1
    return False


def _named_folders(parts: Sequence[str]) -> Sequence[str]:
    """The folders of a path (its components, `/` first, its file's name last) whose names a rule's `not_below`
    reads: below an OWNED_PLACES root, only those below that root, in a home only those inside its own folders
    but a package folder's (`/home/test/.env`, `/home/u/docs/.env` and `/opt/tests/.env` are judged;
    `/home/u/app/tests/.env` and `/root/.local/.../site-packages/x/.env` are not)."""
    for place in OWNED_PLACES:
        if len(parts) >= len(place) + 2 and _fits(parts, len(place) + 1, place):
            below = parts[len(place) + 1 : -1]
            if place in HOMES and below and below[0] not in PACKAGE_FOLDERS:
                return below[1:]  # the home's own folder: its user's
            return below
    return parts[:-1]


def credential_rule(path: str) -> CredentialFile | None:
    """The credentials file a path is, by its last components (content marks aside); the first rule of
    CREDENTIAL_FILES that matches."""
    parts = path.split("/")
    for at in sorted(_NAMED.get(parts[-1], ()) + _PATTERNED):
        rule = CREDENTIAL_FILES[at]
        if parts[-1] not in rule.unless and ends_with(parts, rule.suffix):
            if not rule.not_below.isdisjoint(_named_folders(parts)):
                return None  # a test's or a package's `.env`
            return rule
    return None


def python_test_data(path: str) -> bool:
    """Whether a path is in the tests of a Python package, or of Python itself (Lib/test): under
    site-packages, dist-packages or lib/pythonX.Y, below a folder of KEY_TEST_FOLDERS."""
    parts = path.split("/")
    for at, part in enumerate(parts):
        packages = part in ("site-packages", "dist-packages")
        stdlib = at > 0 and parts[at - 1] == "lib" and re.fullmatch(r"python3(\.\d+)?", part) is not None
        if (packages or stdlib) and any(p in KEY_TEST_FOLDERS for p in parts[at + 1 : -1]):
            return True
    return False


def key_digest(data: bytes, found: re.Match[bytes]) -> str | None:
    """The sha256 of a PEM key's body (its base64 characters up to its END line), or None when its END line is
    not within KEY_BLOCK_MAX bytes of its start."""
    end = data.find(b"-----END " + found[1] + b"-----", found.end(1), found.start() + KEY_BLOCK_MAX)
    return hashlib.sha256(NOT_BASE64.sub(b"", data[found.end(1) + 5 : end])).hexdigest() if end >= 0 else None


def private_key(data: bytes, before: int | None = None) -> str | None:
    """The mark of the first private key in `data` that starts before `before` (default: anywhere) and is not
    one of PUBLISHED_KEYS (`-----BEGIN OPENSSH PRIVATE KEY-----`), or None. A key is judged with the
    KEY_BLOCK_MAX bytes that follow its start, which `data` must hold unless it is the file's end."""
    limit = len(data) if before is None else before
    for literal, pattern in KEY_PATTERNS:
        at = data.find(literal, 0, limit + len(literal) - 1)
        while 0 <= at < limit:
            found = pattern.match(data, at)
            if found and pattern is PUTTY_KEY:
                return f"{found[1].decode()}:"
            if found and key_digest(data, found) not in PUBLISHED_KEYS:
                return f"-----BEGIN {found[1].decode()}-----"
            at = data.find(literal, at + 1, limit + len(literal) - 1)
    return None


def stray_place(path: str) -> tuple[StrayPlace, str] | None:
    """The stray place a path is in and the entry directly in it that holds it (`/tmp/build` for
    /tmp/build/x.whl); None outside them, for the folder itself, and for the distribution's defaults."""
    for place in STRAY_PLACES:
        if path.startswith(place.folder + "/"):
            name = path[len(place.folder) + 1 :].split("/", 1)[0]
            if path == f"{place.folder}/{name}" and name in place.defaults:
                return None
            return place, f"{place.folder}/{name}"
    return None


def stray_hits(found: Mapping[str, tuple[int, str]]) -> list[Hit]:
    """One hit per entry directly in a stray place, from how many paths were found under it and the first."""
    hits = []
    for top, (paths, first) in sorted(found.items()):
        folder = posixpath.dirname(top)
        count = "a stray file" if paths == 1 else f"{paths} stray files"
        example = "" if (paths, first) == (1, top) else f" (e.g. {first})"
        hits.append(Hit(top, f"{count} left in {folder}{example}"))
    return hits


def needles(data: bytes) -> tuple[tuple[bytes, str], ...]:
    """What of a secret's content is searched for inside files: the whole content (stripped of surrounding
    whitespace), and each URL login in it (`user:password`, and the password alone); none shorter than
    NEEDLE_MIN, nor a content longer than NEEDLE_MAX."""
    found = {}
    whole = data.strip()
    if NEEDLE_MIN <= len(whole) <= NEEDLE_MAX:
        found[whole] = "the content of"
    for match in USERINFO.finditer(data):
        login = match[2]
        for part in (login, login.partition(b":")[2]):
            if len(part) >= NEEDLE_MIN:
                found.setdefault(part, "a login from")
    return tuple(found.items())


def secrets_of(secrets: Sequence[tuple[str, bytes]]) -> tuple[Secret, ...]:
    """The build's secrets (name, content) by size and sha256, with what is searched for (empty ones left out:
    every empty file would match)."""
    return tuple(
        Secret(name, len(data), hashlib.sha256(data).hexdigest(), needles(data)) for name, data in secrets if data
    )
