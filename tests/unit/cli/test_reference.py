"""The generated reference pages are fresh, name every command, option and setting, and `--help` says the
settings a command reads and the command as invoked."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

from tests.unit.conftest import ROOT
from torchimages import __version__, compat, settings
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


def test_a_percent_sign_is_written_as_help_prints_it() -> None:
    cli = reference.cli_page()
    assert "%%" not in cli
    assert "level 1 (fastest: 12% larger" in cli  # --gzip-level's help, which argparse needs written `%%`


def test_help_names_the_command_as_invoked_and_its_settings() -> None:
    def run(*args: str) -> str:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, check=True).stdout

    assert run("build.py", "build", "--help").startswith("usage: build.py build")
    assert "TORCHIMAGES_CACHE_FROM" in run("build.py", "build", "--help")
    assert run("-m", "torchimages", "list", "--help").startswith("usage: python -m torchimages list")
    assert run("build.py", "--version").strip() == f"build.py {__version__}"


def test_the_archs_page_has_a_table_per_build_and_says_what_is_labelled() -> None:
    kb = dataclasses.replace(
        compat.load(),
        cuda_archs={
            "linux/arm64": {"cu130": (compat.CudaArchsFact(("2.12",), "sm_80 sm_90 compute_90", "V", ("REL",)),)},
            "linux/amd64": {
                "cu130": (compat.CudaArchsFact(("2.11",), "sm_75 sm_120", "U", ("ISS",)),),
                "cu118": (compat.CudaArchsFact(("2.6", "2.7"), "sm_37 sm_90", "S", ("MOI",)),),
            },
        },
    )
    page = reference.archs_page(kb)
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == ["## cu118 on linux/amd64", "## cu130 on linux/amd64", "## cu130 on linux/arm64"]
    assert "| 2.6, 2.7 | sm_37 sm_90 | - | S | yes | MOI |" in page
    assert "| 2.11 | sm_75 sm_120 | - | U | no | ISS |" in page
    assert "| 2.12 | sm_80 sm_90 | compute_90 | V | yes | REL |" in page
