"""Outside attack 6 on the login readings (findings 5, 6, 7, 11, 12, 13, 15): a UUID token, a user alone before a
registry in a message, the `repository` value's message, a shell default that is a literal, the scheme-less proxy
form in /etc/environment, `.env` files of tests and packages, rclone's other secrets, and logins with a blank that
a bracket or an option opens."""

from __future__ import annotations

import pytest

from tests.unit.cli.test_spaced_logins_never_said import said
from tests.unit.security.test_layers import BASE, keys, layer, scan
from torchimages import values
from torchimages.security import leaks

UUID = "1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d"


# 1 (finding 6): a UUID is a token (npm's legacy tokens, Heroku's API keys); any user alone before a registry
@pytest.mark.parametrize("token", [UUID, UUID.upper()])
def test_a_uuid_as_the_user_alone_is_a_token(token: str) -> None:
    assert leaks.SHELL_LOGIN.search(f"npm config set registry https://{token}@registry.npmjs.org/\n".encode())
    assert values.hide_logins(f"'{token}@registry.npmjs.org/'") == "'registry.npmjs.org/'"


def test_a_uuid_like_name_with_other_letters_is_no_token() -> None:
    assert leaks.SHELL_LOGIN.search(b"export R=https://build-agent-eu-west-pool@git.corp.example/r.git\n") is None


@pytest.mark.parametrize("user", [UUID, "AbCdEfGhIjKlMnOpQrStUvWx", "bob"])
@pytest.mark.parametrize("registry", ["ghcr.io/x", "ghcr.io"])
def test_a_user_alone_before_a_base_registry_is_never_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, user: str, registry: str
) -> None:
    monkeypatch.delenv("TORCHIMAGES_BASE_REGISTRY", raising=False)
    code, output = said(capsys, ["plan", "--base-registry", f"{user}@{registry}", "x"])
    assert code == 2 and f"'{registry}'" in output and "no credentials" in output, output
    assert user not in output, output


@pytest.mark.parametrize("user", [UUID, "AbCdEfGhIjKlMnOpQrStUvWx", "jenkins-build-automation"])
def test_hide_logins_hides_a_user_alone_before_a_registry(user: str) -> None:
    assert values.hide_logins(f"--base-registry {user}@ghcr.io/x: refused") == "--base-registry ghcr.io/x: refused"
    assert values.hide_logins("mail bob@example.com") == "mail bob@example.com"  # no registry path: an e-mail


# 2 (finding 15): the `repository` value's message says login, not digest
@pytest.mark.parametrize("value", ["bob:hunter2@reg.example.com/x", f"{UUID}@reg.example.com/x", "bob:pa ss@reg.x/y"])
def test_a_repository_with_a_login_is_refused_for_its_login(value: str) -> None:
    with pytest.raises(values.BadValue) as refused:
        values.repository(value, "repository:")
    message = str(refused.value)
    assert "no credentials" in message and "digest" not in message, message
    assert "hunter2" not in message and UUID not in message and "pa ss" not in message, message


def test_a_repository_with_a_digest_is_refused_for_its_digest() -> None:
    with pytest.raises(values.BadValue) as refused:
        values.repository("reg.example.com/x@sha256:" + "0" * 64, "repository:")
    assert "has no digest" in str(refused.value)


# 3 (finding 5): a literal default of the shell's variable is a password written in the file; a password may hold
# `proxy`
@pytest.mark.parametrize(
    "line",
    [
        b"export http_proxy=http://bob:${PROXY_PASS:-hunter2}@proxy.corp:3128\n",
        b"export http_proxy=http://bob:${PROXY_PASS-hunter2}@proxy.corp:3128\n",
        b"export http_proxy=http://bob:${PROXY_PASS:=hunter2}@proxy.corp:3128\n",
        b"export http_proxy=bob:${PROXY_PASS:-hunter2}@proxy.corp:3128\n",
        b"export http_proxy=svc:Proxy2024!@proxy.corp:3128\n",
        b"export https_proxy=svc:myproxypass@proxy.corp:3128\n",
    ],
)
def test_a_literal_default_or_a_password_with_proxy_is_found(line: bytes) -> None:
    assert leaks.SHELL_LOGIN.search(line) is not None
    assert keys(scan(layer(*BASE), layer(("home/u/.bashrc", line)))) == ["/home/u/.bashrc"]


@pytest.mark.parametrize(
    "line",
    [
        b"export http_proxy=http://bob:${PROXY_PASS:-}@proxy.corp:3128\n",
        b"export http_proxy=http://bob:${PROXY_PASS:-$FALLBACK}@proxy.corp:3128\n",
        b"export http_proxy=http://bob:${PROXY_PASS:?set PROXY_PASS}@proxy.corp:3128\n",
        b"export http_proxy=bob:${PROXY_PASS}@proxy.corp:3128\n",
    ],
)
def test_a_default_that_is_empty_or_a_variable_is_no_secret(line: bytes) -> None:
    assert leaks.SHELL_LOGIN.search(line) is None


# 4 (finding 11): /etc/environment reads the scheme-less proxy form; Debian's and Ubuntu's own pass
@pytest.mark.parametrize(
    "content",
    [b"http_proxy=bob:hunter2@proxy.corp:3128\n", b'HTTPS_PROXY="bob:hunter2@proxy.corp:3128"\n'],
)
def test_etc_environment_s_scheme_less_proxy_login_is_found(content: bytes) -> None:
    assert keys(scan(layer(*BASE), layer(("etc/environment", content)))) == ["/etc/environment"]


# Debian 12's /etc/environment is empty; Ubuntu 22.04's and 24.04's hold PATH alone
UBUNTU_ENVIRONMENT = (
    b'PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/games:/usr/local/games:/snap/bin"\n'
)


@pytest.mark.parametrize(
    "content", [b"", UBUNTU_ENVIRONMENT, b"http_proxy=proxy.corp:3128\nno_proxy=localhost,127.0.0.1\n"]
)
def test_a_stock_etc_environment_passes(content: bytes) -> None:
    assert keys(scan(layer(*BASE), layer(("etc/environment", content)))) == []


# 5 (finding 12): a test's, a document's, an example's or a package's `.env` is not judged; an application's is
FIXTURE = b"DATABASE_URL=postgres://postgres:postgres@localhost:5432/app\n"


@pytest.mark.parametrize(
    "name",
    [
        "usr/lib/python3/dist-packages/foo/tests/.env",
        "opt/venv/lib/python3.11/site-packages/foo/.env",
        "app/node_modules/foo/.env.test",
        "usr/share/doc/x/examples/.env.local",
        "opt/conda/pkgs/x/info/test/.env.ci",
        "srv/api/test/.env",
        "srv/api/docs/.env",
    ],
)
def test_a_test_s_or_a_package_s_env_file_is_not_judged(name: str) -> None:
    assert leaks.credential_rule("/" + name) is None
    assert keys(scan(layer(*BASE), layer((name, FIXTURE)))) == []


@pytest.mark.parametrize("name", ["app/.env", "srv/api/.env.production", "home/u/project/.env", "srv/contest/.env"])
def test_an_application_s_env_file_is_judged(name: str) -> None:
    assert leaks.credential_rule("/" + name) is not None
    assert keys(scan(layer(*BASE), layer((name, FIXTURE)))) == ["/" + name]


# 6 (finding 13): rclone's other secrets
@pytest.mark.parametrize(
    "content",
    [
        b"[sftp]\ntype = sftp\nkey_file = /k\nkey_file_pass = 3x4mpl3obscured\n",
        b"[sw]\ntype = swift\nauth_token = abcdef0123\n",
        b"[sw]\ntype = swift\napplication_credential_secret = abcdef0123\n",
        b"[az]\ntype = azureblob\nclient_certificate_password = 3x4mpl3obscured\n",
    ],
)
def test_rclone_s_other_secrets_are_found(content: bytes) -> None:
    name = "home/u/.config/rclone/rclone.conf"
    assert keys(scan(layer(*BASE), layer((name, content)))) == ["/" + name]


# 7 (finding 7): a login with a blank that a bracket or an option's name opens is hidden
@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("--proxy bob:pa ss@proxy.example:3128", "--proxy proxy.example:3128"),
        ("curl --proxy=bob:pa ss@proxy.example:3128 x", "curl --proxy=proxy.example:3128 x"),
        ("mirror [bob:pa ss@m.example/debian]", "mirror [m.example/debian]"),
        ("'http://m.example/debian (bob:pa ss@m.example)'", "'http://m.example/debian (m.example)'"),
        ("{bob:pa ss@m.example} <bob:pa ss@m.example>", "{m.example} <m.example>"),
        ("(bob:pa ss@m.example)", "(m.example)"),
    ],
)
def test_a_login_with_a_blank_opened_by_a_bracket_or_an_option_is_hidden(text: str, kept: str) -> None:
    assert values.hide_logins(text) == kept


def test_a_mirror_setting_with_a_bracketed_login_is_never_said(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHIMAGES_MIRROR", "http://m.example/debian (bob:pa ss@m.example)")
    _, output = said(capsys, ["settings"])
    assert "pa ss" not in output and "bob:" not in output, output
