"""A login in a `--mirror` URL (issue 42): apt gets it through an auth.conf (mmdebstrap's, removed before the base
is written; an image build's aptauth secret), and it is never in a base's sources.list, a label, a digest or a
message. The login and the mirror are literals here."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from torchimages import compat, render, values
from torchimages.building import bootstrap, requests
from torchimages.building.progress import Progress
from torchimages.building.renderers import PlainRenderer
from torchimages.building.wheels import Served
from torchimages.planning import plan

DEBIAN = compat.load().os["debian12"]
PASSWORD = "s3cret-pass-word"
LOGIN = f"http://builder:{PASSWORD}@mirror.example:8080/debian"
BARE = "http://mirror.example:8080/debian"
AUTH_LINE = f"machine http://mirror.example:8080/debian login builder password {PASSWORD}\n"
SERVED = Served("https://pypi.example/simple", (), (), needs_host_network=False)


@pytest.mark.parametrize(
    ("text", "bare"),
    [
        (LOGIN, BARE),
        (f"debian={LOGIN}", f"debian={BARE}"),
        (f"deb [trusted=yes] {LOGIN} bookworm main", f"deb [trusted=yes] {BARE} bookworm main"),
        ("https://u%40corp:p%3Aw@m.example/ubuntu", "https://m.example/ubuntu"),
        ("http://u:p@ss@m.example/x@y", "http://m.example/x@y"),  # the last @ before the path ends the login
        (BARE, BARE),
        ("file:///srv/mirror", "file:///srv/mirror"),
    ],
)
def test_a_mirror_without_its_login_keeps_everything_else(text: str, bare: str) -> None:
    assert values.mirror(text) == text  # taken as it is: mmdebstrap's apt gets the login apart
    assert values.mirror_without_login(text) == bare


@pytest.mark.parametrize(
    ("text", "bare", "user", "password"),
    [
        ("https://user:se/cret@host/x", "https://host/x", "user", "se/cret"),
        ("https://u:p#ss@host/", "https://host/", "u", "p#ss"),
        ("https://u:p?ss@host", "https://host", "u", "p?ss"),
        ("http://u:p@ss@m.example:8080/debian", "http://m.example:8080/debian", "u", "p@ss"),
        ("http://u:pw7@m.example/debian@2026/", "http://m.example/debian@2026/", "u", "pw7"),  # an '@' in the path
        ("ubuntu=https://u:a/b@m.example/ubuntu", "ubuntu=https://m.example/ubuntu", "u", "a/b"),
        (
            "deb [ arch=amd64 ] http://u:a/b#c@h:80/debian bookworm main",
            "deb [ arch=amd64 ] http://h:80/debian bookworm main",
            "u",
            "a/b#c",
        ),
        ("http://u:pw9@m.example/x?q=a@b", "http://m.example/x?q=a@b", "u", "pw9"),  # an '@' after the host's '/'
    ],
)
def test_a_password_with_a_slash_or_hash_is_all_removed_and_given_to_apt(
    text: str, bare: str, user: str, password: str
) -> None:
    """Issue 45: a password as users type it ('/', '?', '#' not percent-encoded): the login runs to the URL's last
    '@' before its path; what is removed is what apt is given, and neither the sources nor a message hold it."""
    assert values.mirror(text, "--mirror") == text
    assert values.mirror_without_login(text) == bare
    login = values.mirror_login(text)
    assert login is not None and (login.user, login.password) == (user, password)
    assert login.machine == values.mirror_login(bare.replace("://", "://x:y@")).machine  # type: ignore[union-attr]
    with pytest.raises(values.BadValue) as refused:
        values.mirror(f"{text} extra" if " " not in text else text.replace("deb ", "deb-x "), "--mirror")
    assert password not in str(refused.value)


def test_the_login_is_decoded_for_apts_auth_conf_with_its_scheme() -> None:
    assert values.mirror_login(f"debian={LOGIN}") == values.MirrorLogin(
        "http://mirror.example:8080/debian", "builder", PASSWORD
    )
    assert values.mirror_login(LOGIN).auth_conf() == AUTH_LINE  # type: ignore[union-attr]
    odd = values.mirror_login("deb https://u%40corp:p%3Aw@m.example/ubuntu noble main")
    assert odd == values.MirrorLogin("https://m.example/ubuntu", "u@corp", "p:w")
    assert values.mirror_login(BARE) is None and values.mirror_login("file:///srv/m") is None
    assert PASSWORD not in repr(values.mirror_login(LOGIN))


@pytest.mark.parametrize(
    "text", ["http://builder@m.example/debian", "http://:pw@m.example/", "http://u:p%20w@m.example/", "http://u:@m/"]
)
def test_a_login_apt_cannot_be_given_is_refused_without_showing_it(text: str) -> None:
    with pytest.raises(values.BadValue, match=r"a mirror's login is USER:PASSWORD") as refused:
        values.mirror(text, "--mirror")
    assert "@" not in str(refused.value)


def test_a_refused_mirror_never_shows_its_password() -> None:
    with pytest.raises(values.BadValue) as refused:
        values.mirror(f"{LOGIN} extra", "--mirror")
    assert PASSWORD not in str(refused.value) and BARE in str(refused.value)


LOGIN_WORD = st.text(
    st.characters(min_codepoint=33, max_codepoint=0x2FF, categories=("L", "M", "N", "P", "S")), min_size=1, max_size=20
)


@settings(max_examples=200, deadline=None)
@given(user=LOGIN_WORD, password=LOGIN_WORD, family=st.sampled_from(["", "debian=", "ubuntu="]))
def test_any_login_is_removed_and_given_back_whole(user: str, password: str, family: str) -> None:
    text = f"{family}https://{quote(user, safe='')}:{quote(password, safe='')}@m.example/ubuntu"
    assert values.mirror(text) == text
    assert values.mirror_without_login(text) == f"{family}https://m.example/ubuntu"
    assert values.mirror_login(text) == values.MirrorLogin("https://m.example/ubuntu", user, password)


def test_the_bootstrap_gives_apt_the_login_in_an_auth_file_it_removes(tmp_path: Path) -> None:
    """The hooks run as mmdebstrap runs them (`sh -c HOOK exec ROOT`) on a root: the auth file is there while apt
    fetches, gone before the tar is written; the sources never hold the login."""
    auth = tmp_path / "auth.conf"
    auth.write_text(AUTH_LINE)
    cmd = bootstrap.command(DEBIAN, LOGIN, "/x/rootfs.tar", tmp_path / "record", auth=auth)
    assert cmd[-1] == BARE and not any(PASSWORD in c for c in cmd)
    setup = [c.removeprefix("--setup-hook=") for c in cmd if c.startswith("--setup-hook=")]
    customize = [c.removeprefix("--customize-hook=") for c in cmd if c.startswith("--customize-hook=")]
    root = tmp_path / "root"
    (root / "etc/apt").mkdir(parents=True)
    (root / "var/lib/apt/lists").mkdir(parents=True)
    (root / "etc/apt/sources.list").write_text(f"deb {BARE} bookworm main\n")
    (tmp_path / "record").mkdir()
    for hook in setup:
        subprocess.run(["sh", "-c", hook, "exec", str(root)], check=True)
    assert (root / bootstrap.AUTH_FILE).read_text() == AUTH_LINE  # apt reads it while it fetches
    for hook in customize:
        subprocess.run(["sh", "-c", hook, "exec", str(root)], check=True)
    assert not (root / bootstrap.AUTH_FILE).exists()
    assert bootstrap.digest(DEBIAN, LOGIN) == bootstrap.digest(DEBIAN, BARE)  # a login shapes no base


def test_the_auth_file_is_dropped_from_the_bases_tar(tmp_path: Path) -> None:
    source, target = tmp_path / "rootfs.tar", tmp_path / "ready.tar"
    with tarfile.open(source, "w") as tar:
        for name in ("./etc/hosts", f"./{bootstrap.AUTH_FILE}"):
            member = tarfile.TarInfo(name)
            member.size = 3
            tar.addfile(member, io.BytesIO(b"abc"))
    bootstrap.without(source, target, bootstrap.DROPPED)
    with tarfile.open(target) as tar:
        assert tar.getnames() == ["./etc/hosts"]


def test_a_bootstrap_with_a_login_fetches_with_it_and_records_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stand-in mmdebstrap runs the setup hooks on a root of its own and keeps what apt would have read."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "mmdebstrap").write_text(
        textwrap.dedent(
            """\
            #!/bin/sh
            for a; do case "$a" in */rootfs.tar) out="$a";; esac; done
            record=$(dirname "$out"); root="$record/root"; mkdir -p "$root/etc/apt"
            for a; do case "$a" in --setup-hook=*) sh -c "${a#--setup-hook=}" exec "$root";; esac; done
            cat "$root"/etc/apt/auth.conf.d/* > "$SEEN"
            echo "$*" > "$ARGS"; for last; do :; done
            echo "deb $last bookworm main" > "$record/sources.list"
            tar -cf "$out" -C "$record" sources.list
            """
        )
    )
    (folder / "mmdebstrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SEEN", str(tmp_path / "seen"))
    monkeypatch.setenv("ARGS", str(tmp_path / "args"))
    engine = FakeEngine()
    bootstrap.ensure(engine, DEBIAN, LOGIN, tmp_path / "b.log")
    assert (tmp_path / "seen").read_text() == AUTH_LINE
    ((_, changes, _),) = engine.imported
    assert not any(PASSWORD in c for c in changes) and PASSWORD not in (tmp_path / "args").read_text()
    assert f'LABEL {bootstrap.DIGEST_LABEL}="{bootstrap.digest(DEBIAN, BARE)}"' in changes
    assert f'LABEL {bootstrap.SOURCES_LABEL}="{BARE} bookworm main"' in changes


def test_a_sources_label_never_holds_a_login() -> None:
    provenance = bootstrap.Provenance("bookworm", (f"{LOGIN} bookworm main",), "unknown")
    assert provenance.labels()[bootstrap.SOURCES_LABEL] == f"{BARE} bookworm main"


MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"


def test_an_image_on_a_bootstrapped_base_mounts_the_login_as_a_secret_for_apt(
    write_matrix: Callable[[str], Path],
) -> None:
    loaded = plan.load(write_matrix(MATRIX))
    (combination,) = loaded.combinations
    assert bootstrap.apt_auth(combination, (f"debian={LOGIN}",)) == AUTH_LINE
    assert bootstrap.apt_auth(combination, (f"ubuntu={LOGIN}", BARE)) == ""  # its family's mirror: no login
    assert bootstrap.apt_auth(combination, ()) == ""
    image = combination.image("runtime")
    options = requests.BuildOptions(Path("images"), Path("logs"))
    request = requests.build_request(
        options, combination, image, "tmp/x:1", SERVED, Path("pip.conf"), Path("uv.toml"), None, Path("auth")
    )
    assert ("aptauth", Path("auth")) in request.secrets
    assert all(PASSWORD not in value for _, value in request.labels)
    # the apt steps mount it inside apt's cache mount and point apt at it; no file of the image names it
    files = render.render_all(loaded.combinations, loaded.templates)
    dockerfile = next(text for path, text in files.items() if str(path).endswith("Dockerfile"))
    assert "--mount=type=secret,id=aptauth,target=/var/cache/apt/torchimages-auth.conf" in dockerfile
    script = next(text for path, text in files.items() if str(path).endswith("apt-install.sh"))
    assert "auth=(-o Dir::Etc::netrc=/var/cache/apt/torchimages-auth.conf)" in script
    assert 'apt-get update "${auth[@]}"' in script and 'apt-get install "${auth[@]}" --download-only' in script


def test_the_build_mounts_the_auth_file_only_with_a_login(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    (combination,) = plan.load(write_matrix(MATRIX)).combinations
    image = combination.image("runtime")
    seen: list[str] = []
    engine = FakeEngine()
    engine.on_build = lambda request: seen.extend(
        f"{name}={path.read_text()}" for name, path in request.secrets if name == "aptauth"
    )
    progress = Progress(PlainRenderer(lambda _: None))
    for mirrors in ((LOGIN,), (BARE,)):
        options = requests.BuildOptions(Path("images"), tmp_path, mirrors=mirrors)
        requests.run_build(
            engine, options, combination, image, "tmp/x:1", SERVED, tmp_path / "b.log", progress, threading.Event()
        )
    assert seen == [f"aptauth={AUTH_LINE}"]


@settings(max_examples=200, deadline=None)
@given(
    user=st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="%:/?#@"), min_size=1),
    password=st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="%@"), min_size=1),
)
def test_any_password_as_typed_is_removed_whole_and_given_back_whole(user: str, password: str) -> None:
    """Issue 45: a password not percent-encoded ('/', '?', '#', ':' in it) is never shown in part. (One holding
    `@HOST/` cannot be told from a login followed by a path: percent-encode its '@'.)"""
    text = f"deb https://{user}:{password}@m.example/ubuntu noble main"
    assert values.mirror(text) == text
    assert values.mirror_without_login(text) == "deb https://m.example/ubuntu noble main"
    assert values.mirror_login(text) == values.MirrorLogin("https://m.example/ubuntu", user, password)


@pytest.mark.parametrize(
    "text",
    [
        "https://pypi.example/simple/@scope",
        "https://a.example/simple@b.example",
        "file:///srv/wheels@2/",
        "http://m.example/debian@2026/",
    ],
)
def test_an_at_sign_in_a_path_is_no_login(text: str) -> None:
    """Second outside attack: an '@' after the host is part of the path: nothing is removed (two mirrors never
    share a digest, a label or apt's machine by their path's end)."""
    assert values.mirror_without_login(text) == text
    assert values.mirror_login(text) is None


def test_a_registry_refused_for_its_login_never_says_it() -> None:
    with pytest.raises(values.BadValue) as refused:
        values.registry("u:secret2@reg.example", "--base-registry")
    assert "secret2" not in str(refused.value) and "reg.example" in str(refused.value)
