"""The settings table: every environment variable the code reads is a row, each is parsed and checked by its
kind with a message naming it (exit 2, no traceback), only the commands that read one are refused by it, and
`build.py settings` shows each effective value and where it came from."""

from __future__ import annotations

import ast
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


def _dotted(node: ast.expr) -> str:
    """`os.environ` for the expression os.environ, `environ` for a bare name; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}".lstrip(".")
    return ""


def _environ(node: ast.expr) -> bool:
    found = _dotted(node)
    return found in ("environ", "os.environ", "os.environb")


def environment_reads(tree: ast.Module) -> list[ast.expr]:
    """The key of every read of the environment by name in a module: os.environ[K], os.environ.get(K),
    os.environ.pop(K), os.environ.setdefault(K), K in os.environ, os.getenv(K), os.environb too."""
    keys: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _environ(node.value):
            keys.append(node.slice)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            reads = (
                isinstance(func, ast.Attribute) and func.attr in ("get", "pop", "setdefault") and _environ(func.value)
            )
            if reads or _dotted(func) in ("os.getenv", "getenv", "os.getenvb"):
                keys.append(node.args[0])
        elif isinstance(node, ast.Compare) and any(_environ(c) for c in node.comparators):
            keys.append(node.left)  # `K in os.environ` (an environ compared otherwise reads no name either)
    return keys


def constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level `NAME = "text"` assignments (a key may be named by one: PASSWORD)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found |= {t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)}
    return found


def read_variables() -> tuple[dict[str, list[str]], list[str]]:
    """Every variable the package's code reads from the environment (name -> where), and the reads whose name
    cannot be told from the code (outside settings.py, which reads by its table's names)."""
    named: dict[str, list[str]] = {}
    unknown: list[str] = []
    for path, text in sources().items():
        tree = ast.parse(text)
        known = constants(tree)
        for key in environment_reads(tree):
            where = f"{path.relative_to(ROOT)}:{key.lineno}"
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                named.setdefault(key.value, []).append(where)
            elif isinstance(key, ast.Name) and key.id in known:
                named.setdefault(known[key.id], []).append(where)
            elif path.name != "settings.py":
                unknown.append(where)
    return named, unknown


def test_every_environment_read_in_the_code_names_a_row_of_the_settings_table() -> None:
    """A variable the code reads by name (os.environ[...], .get, `in`, getenv: the AST, not a regex) is a row of
    the table, so `build.py settings` and docs/reference/settings.md list it; a read whose name is computed is
    refused (settings.py alone reads by its rows' names)."""
    named, unknown = read_variables()
    assert not unknown, f"environment reads whose variable cannot be told from the code: {unknown}"
    missing = {name: where for name, where in named.items() if name not in settings.BY_NAME}
    assert not missing, f"read but not in torchimages/settings.py's SETTINGS: {missing}"
    assert {"PATH", "TERM"} <= set(named), named  # the scan finds what is there


def test_the_scan_finds_each_form_of_environment_read() -> None:
    forms = [
        "import os\nos.environ['A']",
        "import os\nos.environ.get('A')",
        "import os\nos.environ.get('A', 'x')",
        "import os\nos.getenv('A')",
        "import os\n'A' in os.environ",
        "import os\n'A' not in os.environ",
        "from os import environ\nenviron['A']",
        "from os import getenv\ngetenv('A')",
        "import os\nos.environ.pop('A', None)",
    ]
    for text in forms:
        (key,) = environment_reads(ast.parse(text))
        assert isinstance(key, ast.Constant) and key.value == "A", text
    tree = ast.parse("import os\nNAME = 'B'\nos.environ.get(NAME)\nenv = {**os.environ}\ndict(os.environ)\n")
    (key,) = environment_reads(tree)
    assert isinstance(key, ast.Name) and constants(tree)[key.id] == "B"


def test_a_mirrors_login_is_never_shown(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCHIMAGES_MIRROR with a login (issue 42): shown without it; the builds still get it whole."""
    monkeypatch.setenv("TORCHIMAGES_MIRROR", "debian=http://builder:s3cret-words@mirror.example/debian")
    for args in (("settings",), ("settings", "--json")):
        code, out, _ = cli(*args)
        assert code == 0 and "s3cret" not in out and "debian=http://mirror.example/debian" in out
    assert settings.value("TORCHIMAGES_MIRROR") == "debian=http://builder:s3cret-words@mirror.example/debian"


def test_a_secret_is_never_shown(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """COSIGN_PASSWORD: `***` when set (an empty one too: a key without a password), unset otherwise; its value
    is in no output of `settings`."""
    monkeypatch.setenv("COSIGN_PASSWORD", "s3cret-words")
    code, out, _ = cli("settings")
    assert code == 0 and "s3cret" not in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert rows["COSIGN_PASSWORD"] == ["environment", settings.HIDDEN]
    code, out, _ = cli("settings", "--json")
    row = {r["name"]: r for r in json.loads(out)}["COSIGN_PASSWORD"]
    assert "s3cret" not in out and (row["value"], row["source"]) == (settings.HIDDEN, "environment")
    monkeypatch.setenv("COSIGN_PASSWORD", "")
    assert settings.value("COSIGN_PASSWORD") == settings.HIDDEN and settings.source("COSIGN_PASSWORD") == "environment"
    monkeypatch.delenv("COSIGN_PASSWORD")
    assert settings.value("COSIGN_PASSWORD") is None and settings.source("COSIGN_PASSWORD") == "default"
    code, out, _ = cli("settings")
    assert {line.split()[0]: line.split()[1:] for line in out.splitlines()}["COSIGN_PASSWORD"] == ["default", "-"]


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
