"""The fourth outside attack on the secrets gate's forms and on hiding logins (findings 7, 9, 10, 11): a login with
a blank after a short option or a control blank, shell forms that are no variable nor placeholder, a home folder
named `test`, and an anchored mark at a chunk's overlap."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.cli.test_spaced_logins_never_said import MARK, USER, passwords
from torchimages import values

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
