"""The settings table: every environment variable the code reads is a row, each is parsed and checked by its
kind with a message naming it (exit 2, no traceback), only the commands that read one are refused by it, and
`build.py settings` shows each effective value and where it came from."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT
from torchimages import settings

Cli = Callable[..., tuple[int, str, str]]
CPU = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12}\n"


def sources() -> dict[Path, str]:
    folder = ROOT / "torchimages"
    return {p: p.read_text() for p in folder.rglob("*.py") if "probes/scripts" not in str(p)}


def test_every_variable_the_code_names_is_a_row_and_only_settings_reads_the_environment() -> None:
    named = set()
    for path, text in sources().items():
        named |= set(re.findall(r"\b(TORCHIMAGES_[A-Z_]+)\b", text))
        if path.name != "settings.py":
            assert not re.search(r"environ(\.get)?\(\s*[\"'](TORCHIMAGES_|DOCKER)", text), path
            assert not re.search(r"environ\[\s*[\"'](TORCHIMAGES_|DOCKER)", text), path
    assert named <= set(settings.BY_NAME), named - set(settings.BY_NAME)
    script = (ROOT / "scripts" / "validate-host.sh").read_text()
    assert "TORCHIMAGES_PYTHON" in script and "TORCHIMAGES_PYTHON" in settings.BY_NAME
    assert {"DOCKER", "DOCKER_HOST"} <= set(settings.BY_NAME)
    assert len({s.name for s in settings.SETTINGS}) == len(settings.SETTINGS)


def test_each_kind_is_parsed_and_a_bad_value_names_the_variable() -> None:
    env = {
        "TORCHIMAGES_JOBS": " 3 ",
        "TORCHIMAGES_HEARTBEAT_S": "2.5",
        "TORCHIMAGES_FIND_LINKS": "a  b",
        "TORCHIMAGES_CA_CERT": "/ca.pem",
        "TORCHIMAGES_PROGRESS": "plain",
        "TORCHIMAGES_NETWORK": "",
    }
    assert settings.count("TORCHIMAGES_JOBS", env) == 3
    assert settings.seconds("TORCHIMAGES_HEARTBEAT_S", env) == 2.5
    assert settings.words("TORCHIMAGES_FIND_LINKS", env) == ("a", "b")
    assert settings.path("TORCHIMAGES_CA_CERT", env) == Path("/ca.pem")
    assert settings.choice("TORCHIMAGES_PROGRESS", env) == "plain"
    assert (
        settings.text("TORCHIMAGES_NETWORK", env) is None and settings.source("TORCHIMAGES_NETWORK", env) == "default"
    )
    assert (
        settings.count("TORCHIMAGES_MAX_ENTRIES", {}) == 1000
        and settings.source("TORCHIMAGES_JOBS", env) == "environment"
    )
    for name, bad, said in [
        ("TORCHIMAGES_JOBS", "0", "TORCHIMAGES_JOBS='0' must be a positive whole number (default 1)"),
        ("TORCHIMAGES_MAX_COMBINATIONS", "-1", "TORCHIMAGES_MAX_COMBINATIONS='-1' must be a positive whole number"),
        ("TORCHIMAGES_MAX_ENTRIES", "9" * 5000, "must be a positive whole number"),  # past int()'s digit limit
        ("TORCHIMAGES_HEARTBEAT_S", "inf", "TORCHIMAGES_HEARTBEAT_S='inf' must be a number of seconds above 0"),
        ("TORCHIMAGES_HEARTBEAT_S", "nan", "TORCHIMAGES_HEARTBEAT_S='nan' must be a number of seconds above 0"),
        ("TORCHIMAGES_PROGRESS", "fancy", "TORCHIMAGES_PROGRESS='fancy' must be one of auto, plain, tty"),
    ]:
        with pytest.raises(settings.SettingError) as caught:
            settings.value(name, {name: bad})
        assert said in str(caught.value)


def test_a_bad_setting_refuses_only_the_commands_that_read_it(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(write_matrix(CPU))
    monkeypatch.setenv("TORCHIMAGES_JOBS", "many")
    code, out, err = cli("build", "--matrix", path, "2.13.0")
    assert code == 2 and out == "" and "TORCHIMAGES_JOBS='many' must be a positive whole number" in err
    assert "Traceback" not in err
    assert cli("list", "--matrix", path)[0] == 0  # list reads no TORCHIMAGES_JOBS


def test_help_lists_the_settings_a_command_reads() -> None:
    epilog = settings.epilog("build") or ""
    assert "TORCHIMAGES_JOBS" in epilog and "TORCHIMAGES_CACHE_FROM" in epilog and "DOCKER_HOST" in epilog
    assert "TORCHIMAGES_JOBS" not in (settings.epilog("list") or "")
    assert all(s.commands or s.name == "TORCHIMAGES_PYTHON" for s in settings.SETTINGS)


def test_the_settings_command_shows_each_value_and_where_it_came_from(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHIMAGES_JOBS", "4")
    code, out, _ = cli("settings")
    assert code == 0
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert rows["TORCHIMAGES_JOBS"] == ["environment", "4"] and rows["TORCHIMAGES_HEARTBEAT_S"] == ["default", "60"]
    assert set(rows) == set(settings.BY_NAME)
    code, out, _ = cli("settings", "--json")
    found = {row["name"]: row for row in json.loads(out)}
    assert found["TORCHIMAGES_JOBS"]["value"] == "4" and found["TORCHIMAGES_JOBS"]["source"] == "environment"
    assert found["TORCHIMAGES_NETWORK"] == {**found["TORCHIMAGES_NETWORK"], "value": "", "source": "default"}
    monkeypatch.setenv("TORCHIMAGES_JOBS", "x")
    code, _, err = cli("settings")
    assert code == 2 and "TORCHIMAGES_JOBS='x'" in err


def test_bake_reads_the_cache_settings_as_build_does(
    cli: Cli, write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """One declaration of --cache-from/--cache-to, one behaviour: TORCHIMAGES_CACHE_FROM reaches bake too."""
    monkeypatch.setenv("TORCHIMAGES_CACHE_FROM", "type=registry,ref=cache.example/t:{tag}")
    path = str(write_matrix(CPU))
    code, out, err = cli("bake", "--matrix", path, "--secrets-dir", str(tmp_path / "s"), "--cache-from", "x:{target}")
    assert code == 0, err
    target = json.loads(out)["target"]["2_13_0-cpu-runtime"]
    assert target["cache-from"][0].startswith("type=registry,ref=cache.example/t:2.13.0-cpu-runtime")
    assert len(target["cache-from"]) == 2


@pytest.mark.parametrize(("text", "expected"), [("", None), ("0", 0), ("1795910400", 1795910400), (" 86400 ", 86400)])
def test_source_date_epoch_is_whole_seconds_or_unset(text: str, expected: int | None) -> None:
    assert settings.epoch("SOURCE_DATE_EPOCH", {"SOURCE_DATE_EPOCH": text}) == expected


@pytest.mark.parametrize("text", ["-1", "1.5", "yesterday", "9" * 13, "١٢"])
def test_a_source_date_epoch_that_is_no_time_is_refused_naming_it(text: str) -> None:
    with pytest.raises(settings.SettingError, match=r"SOURCE_DATE_EPOCH.*whole number of seconds since 1970"):
        settings.epoch("SOURCE_DATE_EPOCH", {"SOURCE_DATE_EPOCH": text})
