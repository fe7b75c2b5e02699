"""A login in a URL option (`https://USER:PASSWORD@host/...`) is used, never said (issue 45): not in the refusal
of a bad URL value (--index-url, --extra-index-url, --find-links, --mirror, their TORCHIMAGES_* settings), not in
argparse's own errors (`unrecognized arguments: ...`), the kb sub-command's included. What is said is the value as
values.mirror_without_login gives it. The logins are literals."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from torchimages.cli.entry import main, parser

SECRET = "s3cretpw"
Said = Callable[..., tuple[int, str, str]]


@pytest.fixture
def said(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Said:
    """Run build.py's main, an argparse refusal (SystemExit) included: (exit status, stdout, stderr)."""
    for name in [n for n in os.environ if n.startswith("TORCHIMAGES_")]:
        monkeypatch.delenv(name)

    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.mark.parametrize("option", ["--index-url", "--extra-index-url", "--find-links"])
@pytest.mark.parametrize("value", [f"https://user:{SECRET}@host:99999/simple", f"https://user:top/{SECRET}@host/x"])
def test_a_refused_url_option_never_says_its_login(said: Said, option: str, value: str) -> None:
    code, out, err = said("plan", option, value)
    assert code == 2 and f"argument {option}: 'https://host" in err, err
    assert SECRET not in out + err and "user" not in err


def test_a_refused_url_setting_never_says_its_login(said: Said, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHIMAGES_INDEX_URL", f"https://user:{SECRET}@host:99999/simple")
    code, out, err = said("settings")
    assert code == 2 and "TORCHIMAGES_INDEX_URL 'https://host:99999/simple'" in err, err
    assert SECRET not in out + err


@pytest.mark.parametrize(
    "args",
    [
        ("settings", "--mirror", f"http://u:{SECRET}@host/debian"),
        ("settings", f"--mirror=http://u:se/{SECRET}@host/debian"),
        ("kb", "sync", "--mirror", f"http://u:{SECRET}@host/debian"),
        ("kb", "check", "--index", f"http://u:{SECRET}@[::1/simple"),
    ],
)
def test_argparse_errors_never_say_a_login(said: Said, args: tuple[str, ...]) -> None:
    code, out, err = said(*args)
    assert code == 2 and "error:" in err and SECRET not in out + err, err
    assert "http://host/debian" in err or "http://[::1/simple" in err, err


def test_every_parser_of_the_command_line_strips_logins(capsys: pytest.CaptureFixture[str]) -> None:
    """The sub-commands' parsers are made by the top one (argparse's parser_class): each is the one that strips."""
    for args in (["--bogus", f"https://u:{SECRET}@h/"], ["kb", "sync", "--index", f"https://u:{SECRET}@"]):
        with pytest.raises(SystemExit):
            parser("build.py").parse_args(args)
        assert SECRET not in capsys.readouterr().err
