"""The generated reference pages are fresh, name every command, option and setting, and `--help` says the
settings a command reads and the command as invoked."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.conftest import ROOT
from torchimages import __version__, settings
from torchimages.cli import reference
from torchimages.cli.commands import COMMANDS


def test_the_committed_reference_pages_are_fresh() -> None:
    for name, text in reference.pages().items():
        assert (ROOT / reference.FOLDER / name).read_text() == text, f"stale: run `make reference` ({name})"


def test_the_pages_name_every_command_option_and_setting() -> None:
    cli, table = reference.cli_page(), reference.settings_page()
    for command in COMMANDS:
        assert f"\n## {command.name}\n" in cli
    for option in ("--cache-from", "--jobs", "--report", "--docker", "--json", "--bases", "--host-only"):
        assert f"`{option}`" in cli
    for setting in settings.SETTINGS:
        assert f"`{setting.name}`" in table


def test_help_names_the_command_as_invoked_and_its_settings() -> None:
    def run(*args: str) -> str:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, check=True).stdout

    assert run("build.py", "build", "--help").startswith("usage: build.py build")
    assert "TORCHIMAGES_CACHE_FROM" in run("build.py", "build", "--help")
    assert run("-m", "torchimages", "list", "--help").startswith("usage: python -m torchimages list")
    assert run("build.py", "--version").strip() == f"build.py {__version__}"
