"""The secrets check (torchimages/security/layers.py): credentials, private keys, the build's own secrets and
stray files in any layer, a file deleted by a later layer still found in its own. The images are literal
`docker save` archives made here (both layouts), handed to the fake engine."""

from __future__ import annotations

import base64
import datetime
import fnmatch
import gzip
import hashlib
import io
import json
import random
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from torchimages.engine import EngineError
from torchimages.security import allowlist, gate, layers, leaks
from torchimages.security.model import FAILED, SECRETS, Finding, Scan

REFERENCE = "torchimages-tmp/x:1"
PY_TEST_KEY = "opt/venv/lib/python3.11/site-packages/tornado/test/test.key"
BASE = (("etc/os-release", b'ID=debian\nVERSION_ID="12"\n'), ("root/", None), ("root/.bashrc", b"# bash\n"))
NETRC = b"machine pypi.example.org login user password s3cret\n"
PEM_KEY = b"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
RSA_KEY = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n"
SSH_KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\n"
CERTIFICATE = b"-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIE\n-----END CERTIFICATE-----\n"
PUBLIC_KEY = b"-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYI\n-----END PUBLIC KEY-----\n"

File = tuple[str, bytes | None]  # (name in the layer, content); None: a folder


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def layer(*files: File, prefix: str = "") -> bytes:
    """A layer tarball of these files and folders, in this order (names as given, `prefix` before each)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(prefix + name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def tar_of(members: list[tuple[str, bytes | str]]) -> bytes:
    """The outer archive: files (bytes) and symlinks (str: the target), in this order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def config_of(tarballs: list[bytes]) -> bytes:
    return json.dumps({"os": "linux", "rootfs": {"type": "layers", "diff_ids": [sha(t) for t in tarballs]}}).encode()


def docker_26_save(tarballs: list[bytes], manifest_first: bool = False) -> bytes:
    """Docker 25+: an OCI layout (blobs/sha256/<digest>, index.json) with manifest.json, last by default."""
    config = config_of(tarballs)
    blobs: list[tuple[str, bytes | str]] = [(f"blobs/sha256/{sha(t)[7:]}", t) for t in dict.fromkeys(tarballs)]
    blobs.append((f"blobs/sha256/{sha(config)[7:]}", config))
    entry = {"Config": f"blobs/sha256/{sha(config)[7:]}", "Layers": [f"blobs/sha256/{sha(t)[7:]}" for t in tarballs]}
    manifest: tuple[str, bytes | str] = ("manifest.json", json.dumps([entry]).encode())
    index: tuple[str, bytes | str] = ("index.json", b'{"schemaVersion":2,"manifests":[]}')
    return tar_of([manifest, *blobs, index] if manifest_first else [*blobs, index, manifest])


def docker_20_save(tarballs: list[bytes]) -> bytes:
    """Docker 20.10: manifest.json first here, `<v1 id>/layer.tar`, a layer met twice a symlink to the first."""
    config = config_of(tarballs)
    names = [f"{n:064x}/layer.tar" for n in range(len(tarballs))]
    members: list[tuple[str, bytes | str]] = [
        ("manifest.json", json.dumps([{"Config": f"{sha(config)[7:]}.json", "Layers": names}]).encode()),
        (f"{sha(config)[7:]}.json", config),
    ]
    first: dict[bytes, str] = {}
    for name, tarball in zip(names, tarballs, strict=True):
        members.append((name.replace("layer.tar", "json"), b'{"id":"v1"}'))
        members.append((name, f"../{first[tarball]}" if tarball in first else tarball))
        first.setdefault(tarball, name)
    return tar_of(members)


def scan(*tarballs: bytes, secret_files: tuple[Path, ...] = (), archive: bytes | None = None) -> Scan:
    engine = FakeEngine()
    engine.archives[REFERENCE] = archive if archive is not None else docker_26_save(list(tarballs))
    return layers.scan(engine, REFERENCE, [(p.name, p.read_bytes()) for p in secret_files])


def keys(result: Scan) -> list[str]:
    assert result.scanned, result.note
    return [f.key for f in result.findings]


# --- the case: a file a later layer deletes --------------------------------------------------------


def test_a_netrc_a_later_layer_deletes_is_found_in_the_layer_that_holds_it() -> None:
    base, written = layer(*BASE), layer(("root/.netrc", NETRC))
    deleted = layer(("root/", None), ("root/.wh..netrc", b""))
    result = scan(base, written, deleted)
    assert result.findings == (
        Finding(
            SECRETS,
            "/root/.netrc",
            f"layer 2 of 3 ({sha(written)[:19]}), deleted in layer 3",
            "/root/.netrc: a netrc file (logins and passwords)",
        ),
    )
    assert result.note == "3 layers, 6 entries"


def test_a_file_still_in_the_final_filesystem_says_no_deletion() -> None:
    result = scan(layer(*BASE), layer(("root/.netrc", NETRC)), layer(("etc/motd", b"hi\n")))
    (finding,) = result.findings
    assert finding.subject.startswith("layer 2 of 3 (sha256:") and "deleted" not in finding.subject


def test_an_opaque_folder_above_deletes_what_was_below_it() -> None:
    written = layer(("home/u/.aws/credentials", b"[default]\naws_secret_access_key = x\n"))
    result = scan(written, layer(("home/u/.wh..wh..opq", b"")))
    (finding,) = result.findings
    assert finding.key == "/home/u/.aws/credentials" and finding.subject.endswith(", deleted in layer 2")


def test_a_deleted_folder_deletes_what_it_held_and_a_sibling_s_deletion_does_not() -> None:
    written = layer(("tmp/build/a.whl", b"x"), ("home/u/.netrc", NETRC))
    result = scan(written, layer(("tmp/.wh.build", b""), ("home/.wh.u2", b"")))
    subjects = {f.key: f.subject for f in result.findings}
    assert subjects["/tmp/build"].endswith("deleted in layer 2")
    assert "deleted" not in subjects["/home/u/.netrc"]


def test_whiteouts_are_deletions_not_findings() -> None:
    result = scan(layer(*BASE), layer(("tmp/.wh.x", b""), ("root/.wh..cache", b""), ("tmp/.wh..wh..opq", b"")))
    assert keys(result) == []


# --- credentials by path ------------------------------------------------------------------------------------

DOCKER_AUTH = b'{"auths":{"registry.example.org":{"auth":"dXNlcjpwYXNz"}}}'

CREDENTIALS = [
    ("root/.netrc", NETRC),
    ("home/torch/.netrc", NETRC),
    ("home/torch/.docker/config.json", DOCKER_AUTH),
    ("root/.pypirc", b"[pypi]\nusername = __token__\npassword = pypi-x\n"),
    ("home/torch/.git-credentials", b"https://user:token@github.com\n"),
    ("root/.aws/credentials", b"[default]\naws_access_key_id = AKIA\n"),
    ("root/.config/gcloud/application_default_credentials.json", b"{}"),
    ("root/.config/gcloud/credentials.db", b"SQLite"),
    ("root/.config/gcloud/access_tokens.db", b"SQLite"),
    ("root/.config/gcloud/legacy_credentials/me@example.org/adc.json", b"{}"),
    ("root/.azure/accessTokens.json", b"[]"),
    ("root/.azure/msal_token_cache.json", b"{}"),
    ("root/.azure/service_principal_entries.json", b"[]"),
    ("root/.kube/config", b"apiVersion: v1\nusers: []\n"),
    ("home/torch/.cache/huggingface/token", b"hf_x"),
    ("home/torch/.cache/huggingface/stored_tokens", b"[x]\nhf_token = hf_x\n"),
    ("home/torch/.huggingface/token", b"hf_x"),
    ("home/torch/.config/gh/hosts.yml", b"github.com:\n    oauth_token: gho_x\n"),
    ("home/torch/.npmrc", b"//registry.npmjs.org/:_authToken=npm_x\n"),
    ("etc/pip.conf", b"[global]\nindex-url = https://user:pass@pypi.example.org/simple\n"),
    ("home/torch/.config/pip/pip.conf", b"[global]\nextra-index-url = https://token@pypi.example.org/simple\n"),
    ("opt/venv/pip.conf", b"[global]\nindex-url = https://u:p@pypi.example.org/simple\n"),
    ("etc/uv/uv.toml", b'[[index]]\nurl = "https://user:pass@pypi.example.org/simple"\n'),
    ("home/torch/_netrc", NETRC),
    ("root/.pgpass", b"db.example.org:5432:*:app:s3cret\n"),
    ("root/.my.cnf", b"[client]\nuser = app\npassword = s3cret\n"),
    ("srv/app/.git/config", b'[remote "origin"]\n\turl = https://oauth2:glpat-x@gitlab.example.org/a.git\n'),
    ("root/.config/git/credentials", b"https://user:token@github.com\n"),
    ("root/.s3cfg", b"[default]\naccess_key = AKIA\nsecret_key = x\n"),
    ("root/.boto", b"[Credentials]\ngs_secret_access_key = x\n"),
    ("home/torch/.yarnrc.yml", b"npmAuthToken: npm_x\n"),
    ("root/.m2/settings.xml", b"<servers><server><password>x</password></server></servers>"),
    ("root/.cargo/credentials.toml", b'[registry]\ntoken = "cio_x"\n'),
    ("root/.gem/credentials", b"---\n:rubygems_api_key: rubygems_x\n"),
    ("root/.terraform.d/credentials.tfrc.json", b'{"credentials": {}}'),
    ("root/.vault-token", b"hvs.x"),
    ("root/.gnupg/private-keys-v1.d/0123ABCD.key", b"Key: (protected-private-key (rsa"),
    ("root/.gnupg/secring.gpg", b"\x95\x03"),
    ("root/.config/hub", b"github.com:\n- user: me\n  oauth_token: ghp_x\n"),
    ("home/torch/.npmrc", b"# " + b"x" * 200_000 + b"\n//registry.npmjs.org/:_authToken=npm_x\n"),  # past 64 KiB
    # a mirror's login (issue 42): apt's sources and auth files, and the other URL-bearing configurations
    ("etc/apt/sources.list", b"deb http://builder:s3cret@mirror.example/debian bookworm main\n"),
    ("etc/apt/sources.list.d/mirror.list", b"deb [arch=amd64] https://u:p@mirror.example/ubuntu noble main\n"),
    ("etc/apt/sources.list.d/ubuntu.sources", b"Types: deb\nURIs: http://u:p@mirror.example/ubuntu\nSuites: noble\n"),
    ("etc/apt/auth.conf", b"machine mirror.example login builder password s3cret\n"),
    ("etc/apt/auth.conf.d/90torchimages-mirror.conf", b"machine http://mirror.example/debian\nlogin b\npassword s\n"),
    ("home/torch/.npmrc", b"registry=https://builder:s3cret@npm.example.org/\n"),
    ("home/torch/.pip/pip.conf", b"[global]\nindex-url = http://builder:s3cret@mirror.example/simple\n"),
    ("root/.docker/config.json", b'{"proxies":{"default":{"httpProxy":"http://u:p@proxy.example:3128"}}}'),
    # the other URL-bearing configurations (issue 42): apt.conf's proxy, apt's copies of its sources, a sub-folder
    # of sources.list.d, gitconfig's insteadOf, pip.ini, /etc/environment's proxy
    ("etc/apt/apt.conf.d/01proxy", b'Acquire::http::Proxy "http://u:p@proxy.example:3128";\n'),
    ("etc/apt/apt.conf", b'Acquire::https::Proxy "https://builder:s3cret@proxy.example/";\n'),
    ("etc/apt/sources.list.save", b"deb http://builder:s3cret@mirror.example/debian bookworm main\n"),
    ("etc/apt/sources.list.d/m.list.save", b"deb https://u:p@mirror.example/ubuntu noble main\n"),
    ("etc/apt/sources.list.distUpgrade", b"deb https://u:p@mirror.example/ubuntu noble main\n"),
    ("etc/apt/sources.list.d/m.list.distUpgrade", b"deb https://u:p@mirror.example/ubuntu noble main\n"),
    ("etc/apt/sources.list.d/sub/m.list", b"deb https://u:p@mirror.example/ubuntu noble main\n"),
    ("root/.gitconfig", b'[url "https://u:p@git.example.org/"]\n\tinsteadOf = https://git.example.org/\n'),
    ("home/torch/.gitconfig", b'[url "https://oauth2:glpat-x@gitlab.example.org/"]\n\tinsteadOf = https://g/\n'),
    ("home/torch/.config/git/config", b"[http]\n\tproxy = http://u:p@proxy.example:3128\n"),
    ("etc/gitconfig", b'[url "https://u:p@git.example.org/"]\n\tinsteadOf = https://git.example.org/\n'),
    ("etc/pip.ini", b"[global]\nindex-url = https://user:pass@pypi.example.org/simple\n"),
    ("home/torch/pip/pip.ini", b"[global]\nextra-index-url = https://token@pypi.example.org/simple\n"),
    ("etc/environment", b'PATH="/usr/local/bin:/usr/bin"\nhttp_proxy=http://u:p@proxy.example:3128\n'),
    # where else a proxy's or a mirror's login sits (issue 42's outside attack): wget's, curl's, the shells', conda's
    ("etc/wgetrc", b"#http_proxy = http://proxy.yoyodyne.com:18023/\nhttp_proxy = http://u:p@proxy.example:3128/\n"),
    ("root/.wgetrc", b"user = builder\npassword = s3cret\n"),
    ("home/torch/.wgetrc", b"HTTP-Password=s3cret\n"),
    ("home/torch/.wgetrc", b"  proxy_passwd = s3cret\n"),
    ("home/torch/.wgetrc", b"https_proxy = http://u:pa/ss@proxy.example:3128/\n"),
    ("root/.curlrc", b'proxy = "http://u:p@proxy.example:3128"\n'),
    ("root/.curlrc", b"-u builder:s3cret\n"),
    ("home/torch/.curlrc", b'user = "builder:s3cret"\n'),
    ("home/torch/.curlrc", b"--proxy-user builder:s3cret\n"),
    ("home/torch/.config/curlrc", b"oauth2-bearer = tok3n\n"),
    ("root/.bashrc", b"# ~/.bashrc\nexport http_proxy=http://u:p@proxy.example:3128\n"),
    ("root/.profile", b"export HTTPS_PROXY='http://u:it's@proxy.example:3128'\n"),
    ("etc/skel/.bashrc", b'export PIP_INDEX_URL="https://u:p@pypi.example.org/simple"\n'),
    ("home/torch/.bash_profile", b"export https_proxy=http://u:p@proxy.example\n"),
    ("home/torch/.zshrc", b"export http_proxy=http://u:p@proxy.example:3128\n"),
    ("etc/profile", b"export http_proxy=http://u:p@proxy.example:3128\n"),
    ("etc/bash.bashrc", b"export http_proxy=http://u:p@proxy.example:3128\n"),
    ("etc/profile.d/proxy.sh", b"export http_proxy=http://u:p@proxy.example:3128\n"),
    ("etc/profile.d/proxy.csh", b"setenv http_proxy http://u:p@proxy.example:3128\n"),
    ("root/.condarc", b"channels:\n  - https://u:p@conda.example.org/main\n"),
    ("opt/conda/.condarc", b"proxy_servers:\n  http: http://u:p@proxy.example:3128\n"),
    ("etc/conda/condarc", b"channels:\n  - https://conda.anaconda.org/t/ab-0123456789/private\n"),
    ("etc/conda/condarc.d/proxy.yml", b"proxy_servers:\n  https: http://u:p@proxy.example:3128\n"),
    ("root/.mambarc", b"channels:\n  - https://u:p@conda.example.org/main\n"),
]


@pytest.mark.parametrize(("name", "content"), CREDENTIALS, ids=[name for name, _ in CREDENTIALS])
def test_each_credentials_file_is_found_anywhere(name: str, content: bytes) -> None:
    result = scan(layer(*BASE), layer((name, content)))
    assert keys(result) == ["/" + name]
    assert "stray" not in result.findings[0].detail  # in /root: the credentials finding, not a stray one too


# Lines of wget's /etc/wgetrc (Debian 12's wget 1.21.3) and of /etc/skel/.bashrc (Debian's and Ubuntu's bash),
# those that name a URL, a user or an '@'
WGETRC_DEBIAN = b"""##   https://www.gnu.org/software/wget/manual/wget.html#Startup-File
## (global, for all users) or $HOME/.wgetrc (for a single user).
#header = From: Your Name <username@site.domain>
#https_proxy = http://proxy.yoyodyne.com:18023/
#http_proxy = http://proxy.yoyodyne.com:18023/
#ftp_proxy = http://proxy.yoyodyne.com:18023/
#use_proxy = on
"""
BASHRC_DEBIAN = (
    rb"    PS1='${debian_chroot:+($debian_chroot)}\[\033[01;32m\]\u@\h\[\033[00m\]:\[\033[01;34m\]\w\[\033[00m\]\$ '"
    b"\n"
    rb"    PS1='${debian_chroot:+($debian_chroot)}\u@\h:\w\$ '"
    b"\n# If this is an xterm set the title to user@host:dir\n"
    rb'    PS1="\[\e]0;${debian_chroot:+($debian_chroot)}\u@\h: \w\a\]$PS1"'
    b"\n"
)

NEAR_CREDENTIALS = [
    ("home/torch/.netrc.example", NETRC),
    ("usr/lib/python3.11/netrc.py", b"class netrc: ...\n"),
    ("usr/share/perl/5.36.0/CPAN/FTP/netrc.pm", b"package netrc;\n"),
    ("home/torch/.docker/config.json", b'{"credsStore":"desktop","auths":{"registry.example.org":{}}}'),
    ("home/torch/docker/config.json", DOCKER_AUTH),
    ("home/torch/.aws/config", b"[default]\nregion = eu-west-1\n"),
    ("home/torch/.kube/config.d", None),
    ("home/torch/.kube/cache/x", b"{}"),
    ("home/torch/.cache/huggingface/hub/x", b"model"),
    ("opt/venv/lib/python3.11/site-packages/torch/include/ATen/ops/_make_dep_token.h", b"#pragma once\n"),
    ("home/torch/.config/gh/hosts.yml", b"github.com:\n    user: me\n"),
    ("home/torch/.npmrc", b"registry=https://registry.npmjs.org/\n"),
    ("etc/pip.conf", b"[global]\nindex-url = https://pypi.example.org/simple\ncert = /etc/ssl/x.pem\n"),
    ("etc/uv/uv.toml", b'[[index]]\nurl = "https://pypi.example.org/simple"\n# user@example.org\n'),
    ("home/torch/.my.cnf", b"[client]\nuser = app\n"),
    ("srv/app/.git/config", b'[remote "origin"]\n\turl = https://github.com/pytorch/pytorch.git\n'),
    ("home/torch/.yarnrc.yml", b"nodeLinker: node-modules\n"),
    ("home/torch/.m2/settings.xml", b"<settings><mirrors/></settings>"),
    ("home/torch/.s3cfg", b"[default]\nhost_base = s3.example.org\n"),
    ("home/torch/.gnupg/pubring.kbx", b"KBXf"),
    # apt's own files as a distribution ships them: no login
    ("etc/apt/sources.list", b"deb http://archive.example.org/debian bookworm main\n# deb http://mirror/ x main\n"),
    ("etc/apt/sources.list.d/ubuntu.sources", b"Types: deb\nURIs: http://archive.example.org/ubuntu/\n"),
    ("etc/apt/sources.list.d/cuda.list", b"deb [signed-by=/k.gpg] https://dev.example/repos/x86_64/ /\n"),
    ("etc/apt/auth.conf.d/empty.conf", b"# machine example.org login me\n"),
    ("usr/share/doc/apt/examples/sources.list", b"deb http://u:p@mirror.example/debian bookworm main\n"),
    # the other URL-bearing configurations without a login (issue 42)
    ("etc/apt/apt.conf.d/01proxy", b'Acquire::http::Proxy "http://proxy.example:3128";\n'),
    ("etc/apt/apt.conf.d/docker-clean", b'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb || true"; };\n'),
    ("etc/apt/apt.conf", b'APT::Install-Recommends "false";\n'),
    ("etc/apt/sources.list.save", b"deb http://archive.example.org/debian bookworm main\n"),
    ("etc/apt/sources.list.d/sub/m.list", b"deb https://mirror.example/ubuntu noble main\n"),
    ("etc/apt/sources.list.d/m.list.distUpgrade", b"deb https://mirror.example/ubuntu noble main\n"),
    ("home/torch/.gitconfig", b"[user]\n\tname = Builder\n\temail = builder@example.org\n"),
    ("home/torch/.gitconfig", b'[url "https://git.example.org/"]\n\tinsteadOf = git@git.example.org:\n'),
    ("etc/pip.ini", b"[global]\nindex-url = https://pypi.example.org/simple\n"),
    ("etc/environment", b'PATH="/usr/local/bin:/usr/bin"\nhttp_proxy=http://proxy.example:3128\n'),
    ("usr/share/doc/x/environment", b"http_proxy=http://u:p@proxy.example:3128\n"),
    # what stock Debian 12 and Ubuntu 22.04/24.04 files hold there (lines of wget's /etc/wgetrc, of base-files'
    # and bash's .bashrc and .profile, of Ubuntu's /etc/profile.d/01-locale-fix.sh), and logins not set
    ("etc/wgetrc", WGETRC_DEBIAN),
    ("home/torch/.wgetrc", b"ask_password = on\nuse_askpass = /usr/bin/ssh-askpass\n#password = x\nuser = me\n"),
    ("root/.bashrc", BASHRC_DEBIAN),
    ("etc/skel/.bashrc", BASHRC_DEBIAN),
    (
        "root/.profile",
        b'if [ "$BASH" ]; then\n  if [ -f ~/.bashrc ]; then\n    . ~/.bashrc\n  fi\nfi\nmesg n 2> /dev/null || true\n',
    ),
    (
        "etc/profile.d/01-locale-fix.sh",
        b"# Make sure the locale variables are set to valid values.\neval $(/usr/bin/locale-check C.UTF-8)\n",
    ),
    ("etc/bash.bashrc", b"#    PROMPT_COMMAND='echo -ne \"\\033]0;${USER}@${HOSTNAME}: ${PWD}\\007\"'\n"),
    ("etc/profile.d/proxy.sh", b"export http_proxy=http://proxy.example:3128\nexport no_proxy=localhost\n"),
    (
        "home/torch/.curlrc",
        b'user-agent = "curl/8 (x: y)"\nuser-agent=a:b\nuser = alice\n--proxy http://proxy.example:3128\n',
    ),
    (
        "opt/conda/.condarc",
        b"channels:\n  - conda-forge\n  - https://conda.example.org/t/x\nproxy_servers:\n  http: http://proxy:3128\n",
    ),
    ("usr/share/doc/wget/examples/sample.wgetrc", b"http_proxy = http://u:p@proxy.example:3128/\n"),
]


@pytest.mark.parametrize(("name", "content"), NEAR_CREDENTIALS, ids=[name for name, _ in NEAR_CREDENTIALS])
def test_a_near_miss_is_no_credentials_file(name: str, content: bytes | None) -> None:
    assert keys(scan(layer(*BASE), layer((name, content)))) == []


def test_apts_own_folders_are_no_credentials_files() -> None:
    """`sources.list*` and `apt.conf*` are apt's files, never the folders beside them (a link is judged by its
    path alone)."""
    assert leaks.credential_rule("/etc/apt/sources.list.d") is None
    assert leaks.credential_rule("/etc/apt/apt.conf.d") is None
    assert leaks.credential_rule("/etc/apt/sources.list.old") is not None
    assert leaks.credential_rule("/etc/apt/apt.conf~") is not None


@pytest.mark.parametrize(
    ("parts", "suffix", "expected"),
    [
        (("", "etc", "apt", "sources.list.d", "a", "b", "m.list"), ("apt", "sources.list.d", "**"), True),
        (("", "etc", "apt", "sources.list.d"), ("apt", "sources.list.d", "**"), False),
        (("", "etc", "sources.list.d", "m.list"), ("apt", "sources.list.d", "**"), False),
        (("", "root", ".netrc"), (".netrc",), True),
        ((".netrc",), ("home", ".netrc"), False),
    ],
)
def test_ends_with_takes_one_or_more_components_for_two_stars(
    parts: tuple[str, ...], suffix: tuple[str, ...], expected: bool
) -> None:
    assert leaks.ends_with(parts, suffix) is expected


def ends_with_by_slicing(parts: tuple[str, ...], suffix: tuple[str, ...]) -> bool:
    """ends_with's meaning, written the plain way (quadratic): the last pattern takes the last component, `**`
    one or more of them."""
    if not suffix:
        return True
    if not parts:
        return False
    if suffix[-1] == "**":
        return any(ends_with_by_slicing(parts[:cut], suffix[:-1]) for cut in range(len(parts) - 1, -1, -1))
    return fnmatch.fnmatchcase(parts[-1], suffix[-1]) and ends_with_by_slicing(parts[:-1], suffix[:-1])


COMPONENTS = st.sampled_from(["", "etc", "apt", "sources.list.d", "m.list", "x.sources", "a", ".netrc"])
PATTERNS = st.sampled_from(["apt", "sources.list.d", "*.list", "*", "a", ".netrc", "etc"])


@settings(max_examples=1000)
@given(
    parts=st.lists(COMPONENTS, max_size=8).map(tuple),
    before=st.lists(PATTERNS, max_size=3).map(tuple),
    after=st.lists(PATTERNS, max_size=2).map(tuple),
    stars=st.booleans(),
)
@example(parts=("sources.list.d",) * 2, before=("sources.list.d",), after=("sources.list.d",) * 2, stars=True)
def test_ends_with_means_what_the_plain_way_says(
    parts: tuple[str, ...], before: tuple[str, ...], after: tuple[str, ...], stars: bool
) -> None:
    suffix = (*before, "**", *after) if stars else before + after
    assert leaks.ends_with(parts, suffix) is ends_with_by_slicing(parts, suffix)


def test_a_path_of_many_components_is_judged_in_time() -> None:
    deep = "/" + "a/" * 200_000 + "m.list"
    started = time.monotonic()
    assert leaks.credential_rule(deep) is None
    assert leaks.credential_rule("/etc/apt/sources.list.d/" + "a/" * 200_000 + "m.list") is not None
    assert time.monotonic() - started < 5


def test_a_folder_named_like_a_credentials_file_is_not_one() -> None:
    assert keys(scan(layer(("home/torch/.netrc/", None), ("home/torch/.kube/config/", None)))) == []


def test_member_names_of_every_form_give_one_absolute_key() -> None:
    for prefix in ("", "./", "/"):
        assert keys(scan(layer(("home/u/.netrc", NETRC), prefix=prefix))) == ["/home/u/.netrc"]


# --- private keys by content --------------------------------------------------------------------------------


@pytest.mark.parametrize("content", [PEM_KEY, RSA_KEY, SSH_KEY, b"# a comment\n" * 20 + PEM_KEY])
def test_a_private_key_is_found_by_its_content_under_any_name(content: bytes) -> None:
    result = scan(layer(("opt/app/conf/server.dat", content)))
    (finding,) = result.findings
    assert finding.key == "/opt/app/conf/server.dat" and finding.detail.startswith(
        f"{finding.key}: a private key (-----BEGIN "
    )


@pytest.mark.parametrize(
    "content", [CERTIFICATE, PUBLIC_KEY, b"ssh-ed25519 AAAAC3Nz me@host\n", b"see -----BEGIN PRIVATE KEY"]
)
def test_certificates_and_public_keys_are_no_private_keys(content: bytes) -> None:
    assert keys(scan(layer(("etc/ssl/certs/x.pem", content)))) == []


def pem(label: str, body_bytes: int, seed: int = 0) -> bytes:
    """A PEM block of real size: `body_bytes` of (deterministic) DER in base64, 64 characters a line."""
    body = base64.b64encode(random.Random(seed).randbytes(body_bytes)).decode()
    lines = "\n".join(body[at : at + 64] for at in range(0, len(body), 64))
    return f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n".encode()


RSA_4096 = pem("RSA PRIVATE KEY", 2348)  # what `openssl genrsa 4096` writes: about 3.2 KB
CHAIN = b"".join(pem("CERTIFICATE", 1400, seed) for seed in (1, 2, 3))


@pytest.mark.parametrize(
    "content",
    [
        RSA_4096,
        CHAIN + RSA_4096,  # a bundle: the chain, then the key
        CHAIN + pem("PRIVATE KEY", 1218),
        b"x" * 5_000_000 + pem("ENCRYPTED PRIVATE KEY", 1300),  # at the end of a large file
        bytes(range(256)) * 20_000 + pem("EC PRIVATE KEY", 121) + bytes(1000),
        pem("PGP PRIVATE KEY BLOCK", 900).replace(b"-----\n", b"-----\nVersion: GnuPG v2\n\n", 1),
        b"-----BEGIN DSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D\n\nMIIBuwIBAAKBgQCk",
        b'{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\n"}',
    ],
    ids=["rsa-4096", "after-chain", "pkcs8-after-chain", "end-of-5MB", "binary", "pgp", "encrypted-dsa", "json"],
)
def test_a_private_key_is_found_in_a_file_of_any_size_wherever_it_is(content: bytes) -> None:
    result = scan(layer(("opt/app/bundle.pem", content)))
    assert keys(result) == ["/opt/app/bundle.pem"]
    assert "a private key (-----BEGIN " in result.findings[0].detail


def test_a_key_split_between_two_chunks_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layers, "CHUNK", 4096)
    for cut in (4096 - 30, 4096 - 5, 4096 + 3):  # inside the BEGIN line, at its end, in the body
        content = b"x" * (cut - 10) + RSA_4096
        assert keys(scan(layer(("opt/a.bin", content)))) == ["/opt/a.bin"], cut


def test_a_published_key_a_library_embeds_is_none_and_any_other_key_beside_it_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GnuTLS embeds its FIPS self-test keys in libgnutls.so.30 (leaks.PUBLISHED_KEYS): known by their body."""
    published = pem("RSA PRIVATE KEY", 600, seed=7)
    found = leaks.PEM_KEY.match(published)
    assert found is not None
    monkeypatch.setattr(leaks, "PUBLISHED_KEYS", frozenset({leaks.key_digest(published, found)}))
    library = b"\x7fELF" + bytes(5000) + published + bytes(100) + published
    assert keys(scan(layer(("usr/lib/libgnutls.so.30", library)))) == []
    for other in (RSA_4096, published.replace(b"\n-----END", b"X\n-----END"), published[:-30]):  # changed, cut
        assert keys(scan(layer(("usr/lib/libgnutls.so.30", library + other)))) == ["/usr/lib/libgnutls.so.30"]


def test_a_library_that_only_names_the_key_lines_holds_no_key() -> None:
    libssh2 = b"\x7fELF" + b"\0" * 64 + b"-----BEGIN RSA PRIVATE KEY-----\0-----END RSA PRIVATE KEY-----\0"
    source = b'_PKCS1_MARKER = ("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----")\n'
    docs = b"-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----\n"
    assert keys(scan(layer(("usr/lib/libssh2.so.1", libssh2), ("opt/rsa.py", source), ("opt/README", docs)))) == []


@pytest.mark.parametrize(
    "name",
    [
        "opt/venv/lib/python3.11/site-packages/tornado/test/test.key",
        "opt/venv/lib/python3.12/site-packages/urllib3/tests/certs/server.key",
        "usr/lib/python3/dist-packages/twisted/test/server.pem",
        "usr/lib/python3.12/test/certdata/keycert.pem",
        "opt/python/lib/python3.11/test/keycert.pem",
    ],
)
def test_the_test_keys_python_packages_ship_are_not_findings(name: str) -> None:
    assert keys(scan(layer((name, PEM_KEY)))) == []


@pytest.mark.parametrize(
    "name",
    [
        "opt/venv/lib/python3.11/site-packages/myapp/server.key",
        "opt/venv/lib/python3.11/site-packages/tests.key",  # a file named like the folder: no test folder
        "srv/tests/server.key",  # tests outside a Python tree
        "etc/ssl/private/ssl-cert-snakeoil.key",  # generated at install: one key shared by every container
    ],
)
def test_a_private_key_outside_python_test_data_is_found(name: str) -> None:
    assert keys(scan(layer((name, PEM_KEY)))) == ["/" + name]


# --- the build's own secrets by content ---------------------------------------------------------------------


def test_a_build_secret_s_content_is_found_under_another_name(tmp_path: Path) -> None:
    pipconf = tmp_path / "pip.conf"
    pipconf.write_bytes(b"[global]\nindex-url = https://mirror.example.org/simple\n")
    leaked = layer(("etc/leaked.ini", pipconf.read_bytes()), ("etc/other.ini", b"x" * pipconf.stat().st_size))
    (finding,) = scan(layer(*BASE), leaked, secret_files=(pipconf,)).findings
    assert (finding.key, finding.detail) == (
        "/etc/leaked.ini",
        "/etc/leaked.ini: the content of the build's secret pip.conf",
    )
    assert finding.subject.startswith("layer 2 of 2 ")


def test_a_build_secret_inside_another_file_is_found(tmp_path: Path) -> None:
    pipconf = tmp_path / "pip.conf"
    pipconf.write_bytes(b"[global]\nindex-url = https://build:tok3n-0123456789@pypi.example.org/simple\n")
    appended = b"# the image's own settings\n[install]\nno-cache-dir = true\n" + pipconf.read_bytes() + b"\n# end\n"
    login_only = b"TOKEN=tok3n-0123456789\n"
    leaked = layer(("etc/xdg/pip/pip.conf.d/all", appended), ("opt/app/.env", login_only))
    found = {f.key: f.detail for f in scan(leaked, secret_files=(pipconf,)).findings}
    assert found == {
        "/etc/xdg/pip/pip.conf.d/all": "/etc/xdg/pip/pip.conf.d/all: the content of the build's secret pip.conf",
        "/opt/app/.env": "/opt/app/.env: a login from the build's secret pip.conf",
    }


def test_a_short_secret_is_matched_only_as_a_whole_file(tmp_path: Path) -> None:
    short = tmp_path / "uv.toml"
    short.write_bytes(b"x = 1\n")  # too short to search for: it would be in many files by chance
    found = scan(layer(("etc/a", b"x = 1\n"), ("etc/b", b"y = 2\nx = 1\n")), secret_files=(short,))
    assert keys(found) == ["/etc/a"]


def test_an_empty_secret_file_matches_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "uv.toml"
    empty.write_bytes(b"")
    assert keys(scan(layer(("etc/empty", b"")), secret_files=(empty,))) == []


# --- stray files ----------------------------------------------------------------------------------------------


def test_stray_files_are_grouped_by_the_entry_in_tmp_var_tmp_and_root() -> None:
    leftovers = layer(
        ("tmp/", None),
        ("tmp/build/", None),
        ("tmp/build/a.whl", b"a"),
        ("tmp/build/b.whl", b"b"),
        ("var/tmp/notes", b"n"),
        ("root/.cache/pip/http/x", b"c"),
        ("root/.python_history", b"import torch\n"),
    )
    result = scan(layer(*BASE), leftovers)
    details = {f.key: f.detail.removeprefix(f.key + ": ") for f in result.findings}
    assert details == {
        "/tmp/build": "2 stray files left in /tmp (e.g. /tmp/build/a.whl)",
        "/var/tmp/notes": "a stray file left in /var/tmp",
        "/root/.cache": "a stray file left in /root (e.g. /root/.cache/pip/http/x)",
        "/root/.python_history": "a stray file left in /root",
    }


def test_the_distribution_s_own_files_folders_and_empty_mount_targets_are_not_stray() -> None:
    clean = layer(
        ("tmp/", None),
        ("var/tmp/", None),
        ("root/", None),
        ("root/.bashrc", b"# bash\n"),
        ("root/.profile", b"# profile\n"),
        ("root/.cache/", None),
        ("tmp/requirements.lock", b""),  # BuildKit's stub where a file was bind-mounted
        ("tmp/empty/", None),
        ("home/torch/.bashrc", b"# bash\n"),
        ("var/tmpfiles", b"not /var/tmp"),
        ("rootfs/x", b"not /root"),
    )
    assert keys(scan(clean)) == []


def link(name: str, target: str, kind: bytes = tarfile.LNKTYPE) -> bytes:
    """A layer of one hard link (or symlink) entry, to be joined after a layer's files (no end blocks)."""
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info.tobuf(tarfile.PAX_FORMAT)


def _joined(files: list[File], links: tuple[bytes, ...]) -> bytes:
    body = layer(*files)
    body = body[: len(body) - 10240] if len(body) >= 10240 and not any(body[-10240:]) else body
    while body.endswith(bytes(512)):
        body = body[:-512]
    return body + b"".join(links) + bytes(1024)


def test_a_hard_link_holds_its_target_s_content_at_its_own_path() -> None:
    data = b"machine x login u password p\n"
    found = scan(
        _joined(
            [("root/.netrc", NETRC), ("srv/blob", data), (PY_TEST_KEY, PEM_KEY)],
            (link("opt/innocent", "root/.netrc"), link("home/u/.netrc", "srv/blob"), link("srv/tls.key", PY_TEST_KEY)),
        )
    ).findings
    assert [(f.key, f.detail.removeprefix(f.key + ": ")) for f in found] == [
        ("/root/.netrc", "a netrc file (logins and passwords)"),
        ("/opt/innocent", "a hard link to /root/.netrc, a netrc file (logins and passwords)"),
        ("/home/u/.netrc", "a netrc file (logins and passwords): a hard link to /srv/blob"),
        ("/srv/tls.key", f"a hard link to /{PY_TEST_KEY}, a private key (-----BEGIN PRIVATE KEY-----)"),
    ]


def test_a_link_at_a_credentials_file_s_path_is_that_file_wherever_it_points() -> None:
    links = (
        link("home/u/.npmrc", "/etc/npm/defaults", tarfile.SYMTYPE),  # its target in another layer
        link("root/.docker/config.json", "../../srv/auth.json", tarfile.LNKTYPE),
        link("opt/key.pem", "secrets/key", tarfile.SYMTYPE),  # to a key of this layer: its content
        link("opt/readme", "/usr/share/doc/x", tarfile.SYMTYPE),  # nothing
    )
    found = scan(_joined([("srv/auth.json", b"{}"), ("opt/secrets/key", PEM_KEY)], links)).findings
    assert [f.key for f in found] == ["/opt/secrets/key", "/home/u/.npmrc", "/root/.docker/config.json", "/opt/key.pem"]
    assert found[1].detail == (  # its content is not known: the finding says what is (issue 42)
        "/home/u/.npmrc: a symbolic link to /etc/npm/defaults, at a path where an .npmrc with an auth token or "
        "credentials in a URL is refused (its content is not read through a link)"
    )


def test_a_link_at_a_path_judged_by_content_alone_is_judged_by_what_it_links_to() -> None:
    """A shell startup file, wgetrc, curlrc, condarc: a link there is no finding by its path (a .bashrc linked to
    the shared one is ordinary); what it links to in its own layer is judged at its path too."""
    links = (
        link("root/.bashrc", "/etc/skel/.bashrc", tarfile.SYMTYPE),
        link("etc/profile.d/vte-2.91.sh", "vte.sh", tarfile.SYMTYPE),
        link("home/u/.wgetrc", "/etc/wgetrc", tarfile.LNKTYPE),
        link("home/u/.condarc", "/opt/conda/.condarc", tarfile.SYMTYPE),
        link("home/u/.profile", "/root/.netrc", tarfile.SYMTYPE),
    )
    files: list[File] = [
        ("etc/skel/.bashrc", BASHRC_DEBIAN),
        ("etc/profile.d/vte.sh", b"# vte\n"),
        ("root/.netrc", NETRC),
    ]
    found = scan(_joined(files, links)).findings
    assert [(f.key, f.detail.removeprefix(f.key + ": ")) for f in found] == [
        ("/root/.netrc", "a netrc file (logins and passwords)"),
        ("/home/u/.profile", "a symbolic link to /root/.netrc, a netrc file (logins and passwords)"),
    ]


def test_a_stray_symlink_is_a_leftover_too() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("tmp/current")
        info.type, info.linkname = tarfile.SYMTYPE, "/opt/build"
        tar.addfile(info)
    assert keys(scan(out.getvalue())) == ["/tmp/current"]


# --- the archive ----------------------------------------------------------------------------------------------


def test_findings_are_in_layer_order_whatever_order_the_blobs_come_in() -> None:
    tarballs = [layer(("home/a/.netrc", NETRC)), layer(*BASE), layer(("home/b/.netrc", NETRC))]
    for archive in (docker_26_save(tarballs), docker_26_save(tarballs, manifest_first=True)):
        result = scan(archive=archive)
        assert [(f.key, f.subject[:11]) for f in result.findings] == [
            ("/home/a/.netrc", "layer 1 of "),
            ("/home/b/.netrc", "layer 3 of "),
        ]


def test_the_docker_20_10_layout_is_read_through_its_links() -> None:
    written = layer(("home/u/.netrc", NETRC))
    tarballs = [layer(*BASE), written, layer(("etc/motd", b"1")), written]
    result = scan(archive=docker_20_save(tarballs))
    assert [f.subject for f in result.findings] == [
        f"layer 2 of 4 ({sha(written)[:19]})",
        f"layer 4 of 4 ({sha(written)[:19]})",
    ]


def test_an_empty_layer_is_read_as_one() -> None:
    result = scan(layer(*BASE), bytes(1024), layer(("home/u/.netrc", NETRC)))
    assert result.scanned and result.findings[0].subject.startswith("layer 3 of 3 ")


def test_a_gzip_layer_is_read() -> None:
    tar = layer(("home/u/.netrc", NETRC))
    zipped = gzip.compress(tar)
    config = config_of([tar])  # the configuration names the uncompressed tar's digest, as an engine writes it
    blob, config_name = f"blobs/sha256/{sha(zipped)[7:]}", f"blobs/sha256/{sha(config)[7:]}"
    manifest = json.dumps([{"Config": config_name, "Layers": [blob]}]).encode()
    saved = tar_of([(blob, zipped), (config_name, config), ("manifest.json", manifest)])
    assert keys(scan(archive=saved)) == ["/home/u/.netrc"]


def test_a_zstd_layer_is_not_scanned_and_said_never_clean() -> None:
    zstd = b"\x28\xb5\x2f\xfd" + b"\0" * 600
    result = scan(layer(("home/u/.netrc", NETRC)), zstd)
    assert not result.scanned and "layer 2 of 2" in result.note and "zstd" in result.note
    assert [f.key for f in result.findings] == ["/home/u/.netrc"]  # what was read is still said


def test_an_archive_without_manifest_or_cut_short_is_not_scanned() -> None:
    no_manifest = tar_of([(f"blobs/sha256/{'1' * 64}", layer(*BASE))])
    assert "no manifest.json" in scan(archive=no_manifest).note
    cut = docker_26_save([layer(*BASE, ("opt/big", b"x" * 100_000))])[:60_000]
    result = scan(archive=cut)
    assert not result.scanned and "could not be read" in result.note


def test_an_engine_failure_is_an_engine_error() -> None:
    engine = FakeEngine()
    with pytest.raises(EngineError, match="no image"):
        layers.scan(engine, REFERENCE, ())
    engine.archives[REFERENCE] = docker_26_save([layer(*BASE)])
    engine.export_error = EngineError("`docker save` failed: context canceled")
    with pytest.raises(EngineError, match="context canceled"):
        layers.scan(engine, REFERENCE, ())


def test_the_gate_fails_an_image_with_a_leftover_and_the_allowlist_lets_it_through() -> None:
    engine = FakeEngine()
    engine.archives[REFERENCE] = docker_26_save([layer(*BASE), layer(("root/.netrc", NETRC))])
    today = datetime.date(2026, 12, 1)
    others = frozenset({"os-updates", "python"})
    options = gate.GateOptions(skip=others, today=today)
    (result, _, _) = gate.run(engine, "2.13.0-cpu-runtime", REFERENCE, options)
    assert result.status == FAILED
    assert (
        result.failing[0].startswith("secrets: layer 2 of 2 (sha256:")
        and "): /root/.netrc: a netrc" in result.failing[0]
    )
    entry = allowlist.Entry(SECRETS, "/root/.netrc", "a test fixture", datetime.date(2027, 1, 1))
    options = gate.GateOptions(entries=(entry,), skip=others, today=today)
    (allowed, _, _) = gate.run(engine, "2.13.0-cpu-runtime", REFERENCE, options)
    assert allowed.status == "passed" and allowed.allowed[0].finding.key == "/root/.netrc"
