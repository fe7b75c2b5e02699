"""The fourth outside attack on the secrets gate's forms and on hiding logins (findings 7, 9, 10, 11): a login with
a blank after a short option or a control blank, shell forms that are no variable nor placeholder, a home folder
named `test`, and an anchored mark at a chunk's overlap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.cli.test_spaced_logins_never_said import MARK, USER, passwords
from tests.unit.security.test_layers import BASE, keys, layer, scan
from torchimages import values
from torchimages.security import leaks

# 1 (finding 9): a password with a blank after a short option (`curl -x u:pa ss@proxy`, `-uuser:pa ss@proxy`), or
# after a blank that is not a space (a `\r` a terminal overwrites the line at, a tab): hidden
SPACED = [
    ("curl -x user:pa ss@proxy.corp:3128 https://x", "curl -x proxy.corp:3128 https://x"),
    ("curl -uuser:pa ss@proxy.corp https://x", "curl -uproxy.corp https://x"),
    ("curl -U bob:pa ss@proxy.corp", "curl -U proxy.corp"),
    ("-uuser:pa ss@proxy.corp", "-uproxy.corp"),
    ("progress\ruser:pa ss@ghcr.io/org", "progress\rghcr.io/org"),
    ("'\ruser:pa ss@ghcr.io/org'", "'\rghcr.io/org'"),
    ("a\tuser:pa ss@host", "a\thost"),
    ("https://u:secret\r@host", "https://host"),
    ("said: 'https://u:pa ss\r@host/x'", "said: 'https://host/x'"),
]


@pytest.mark.parametrize(("text", "kept"), SPACED)
def test_a_login_with_a_blank_after_a_short_option_or_a_control_is_hidden(text: str, kept: str) -> None:
    assert values.hide_logins(text) == kept


@pytest.mark.parametrize("value", ["\ruser:PWa1 PWb2@ghcr.io/org", "x\ruser:PWa1 PWb2@ghcr.io/org", "x\tu:PWa1 PWb2@h/x"])
def test_a_refused_value_with_a_control_never_says_its_password(value: str) -> None:
    with pytest.raises(values.BadValue) as refused:
        values.registry(value, "--base-registry:")
    assert "PW" not in str(refused.value), str(refused.value)


@settings(max_examples=200, deadline=None)
@given(
    user=USER,
    password=passwords(),
    before=st.sampled_from(["curl -x ", "curl -U ", "curl -u", "-x", "-u ", "x\r", "\r", "a\t", "x\x0b", "'\r"]),
    host=st.sampled_from(["proxy.corp:3128", "ghcr.io/org", "host"]),
)
def test_no_piece_of_a_spaced_password_after_an_option_or_a_control_is_said(
    user: str, password: tuple[str, list[str]], before: str, host: str
) -> None:
    shown = values.hide_logins(f"{before}{user}:{password[0]}@{host} done")
    assert MARK not in shown and not [piece for piece in password[1] if piece in shown], shown
    assert shown.endswith(f"{host} done"), shown


# 2 (finding 10): what a shell or a tool would send decides. A command substitution is no variable (`$(echo${IFS}pw)`
# sends pw; in a .env or environment.d file it is sent as written); `<...>` is a placeholder only holding a
# placeholder's word (`<password>`, `<token>`, `<your-...>`), never `<hunter2>`; `Password` (not all lower or upper
# case) is what someone typed as a password
REAL = ["$(echo${IFS}hunter2)", "$(printf${IFS}hunter2)", "`echo${IFS}hunter2`", "<hunter2>", "<hunter>", "Password",
        "PassWord", "<Password1>"]  # fmt: skip
NO_SECRET = ["password", "PASSWORD", "passwd", "<password>", "<pass>", "<token>", "<your-proxy-password>",
             "<YOUR_TOKEN>", "<PROXY_PASSWORD>", "<api-key>", "<...>", "${PROXY_PASS}", "$PROXY_PASS", "***", "xxx"]  # fmt: skip
FORMS = [
    ("home/u/.bashrc", "export http_proxy=http://bob:{}@proxy.corp:3128\n"),
    ("home/u/.bashrc", "export https_proxy=bob:{}@proxy.corp:3128\n"),
    ("app/.env", "DATABASE_URL=postgres://app:{}@db.corp:5432/app\n"),
    ("etc/environment.d/10-proxy.conf", "http_proxy=http://bob:{}@proxy.corp:3128\n"),
    ("home/u/.curlrc", 'proxy = "http://bob:{}@proxy.corp:3128"\n'),
    ("etc/wgetrc", "http_proxy = http://bob:{}@proxy.corp:3128/\n"),
    ("home/u/.condarc", "channels:\n  - https://bob:{}@conda.corp/main\n"),
]


@pytest.mark.parametrize("password", REAL)
@pytest.mark.parametrize(("name", "form"), FORMS, ids=[n for n, _ in FORMS])
def test_a_password_shaped_like_a_command_or_a_placeholder_is_found(name: str, form: str, password: str) -> None:
    content = form.format(password).encode()
    assert keys(scan(layer(*BASE), layer((name, content)))) == ["/" + name], content


@pytest.mark.parametrize("password", NO_SECRET)
@pytest.mark.parametrize(("name", "form"), FORMS, ids=[n for n, _ in FORMS])
def test_a_variable_or_a_placeholder_still_passes(name: str, form: str, password: str) -> None:
    content = form.format(password).encode()
    assert keys(scan(layer(*BASE), layer((name, content)))) == [], content


@pytest.mark.parametrize("password", REAL)
def test_the_marks_read_such_a_password_as_one(password: str) -> None:
    line = f"export http_proxy=http://bob:{password}@proxy.corp:3128\n".encode()
    assert leaks.SHELL_LOGIN.search(line) is not None
    assert leaks.SHELL_LOGIN.search(f"export http_proxy=bob:{password}@proxy.corp:3128\n".encode()) is not None


# 3 (finding 11): below a home, /root, /etc or a folder of /opt, a `.env` is an application's or a user's whatever its
# folders' names (a home named `test`, a project's `docs`); only a package's (site-packages, dist-packages,
# node_modules, conda's pkgs) is not judged there
ENV_LOGIN = b"DATABASE_URL=postgres://app:hunter2@db.corp:5432/app\n"


@pytest.mark.parametrize(
    "name",
    [
        "home/test/.env",
        "home/tests/project/.env.production",
        "home/u/docs/.env",
        "home/u/app/examples/.env",
        "root/test/.env",
        "root/samples/.env.local",
        "etc/test/.env",
        "etc/docs/app/.env",
        "opt/test/.env",
        "opt/app/tests/.env",
        "opt/fixtures/doc/.env",
    ],
)
def test_a_env_file_of_a_home_root_etc_or_opt_is_judged_whatever_its_folders(name: str) -> None:
    assert leaks.credential_rule("/" + name) is not None
    assert keys(scan(layer(*BASE), layer((name, ENV_LOGIN)))) == ["/" + name]


@pytest.mark.parametrize(
    "name",
    [
        "home/u/.local/lib/python3.11/site-packages/foo/tests/.env",
        "home/u/.cache/pypoetry/virtualenvs/x/lib/python3.11/site-packages/foo/docs/.env",
        "opt/venv/lib/python3.11/site-packages/foo/test/.env",
        "opt/app/node_modules/foo/.env.test",
        "opt/conda/pkgs/x/info/test/.env.ci",
        "usr/lib/python3/dist-packages/foo/tests/.env",
        "srv/api/test/.env",
    ],
)
def test_a_package_s_env_file_is_still_not_judged(name: str) -> None:
    assert leaks.credential_rule("/" + name) is None
    assert keys(scan(layer(*BASE), layer((name, ENV_LOGIN)))) == []
