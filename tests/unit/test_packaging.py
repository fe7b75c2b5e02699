"""A non-editable install is a working tool: templates, knowledge base and suites travel in the wheel.

The wheel is built from a copy of the project (nothing is written into the checkout) with this venv's
setuptools, installed with pip into a folder (`pip install --target`: exactly the files and console
script an install lays down), and run from an unrelated folder with only that folder on PYTHONPATH;
the dependencies come from this venv. No Docker.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT
from torchimages import render
from torchimages.planning import plan
from torchimages.smoke import document

MATRIX = ROOT / "matrix.yaml"
IMAGES = ROOT / "images"
Cli = Callable[..., tuple[int, str, str]]
PACKAGE_DATA = (
    "torchimages/data/compat.yaml",
    "torchimages/data/manifest.schema.json",
    "torchimages/templates/Dockerfile.j2",
    "torchimages/templates/macros.j2",
    "torchimages/planning/workflow.yml.j2",
    "torchimages/smoke/suites/__init__.py",
    "torchimages/probes/scripts/facts.py",
    "torchimages/probes/scripts/cuda_archs.py",
)


@dataclass(frozen=True)
class Installed:
    """The project installed into `site` (scripts in `site/bin`), run from `cwd`."""

    site: Path
    cwd: Path
    wheel: Path

    def run(self, *args: str | Path, script: bool = False) -> subprocess.CompletedProcess[str]:
        """`python -m torchimages.cli ARGS` (or the `torchimages` console script) from `cwd`."""
        command: list[str | Path] = (
            [self.site / "bin" / "torchimages"] if script else [sys.executable, "-m", "torchimages.cli"]
        )
        return self.python_command([*command, *args])

    def python(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return self.python_command([sys.executable, *args])

    def python_command(self, command: Sequence[str | Path]) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
        env["PYTHONPATH"] = str(self.site)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return subprocess.run(
            [str(part) for part in command], cwd=self.cwd, env=env, capture_output=True, text=True, timeout=120
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("packaging")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "torchimages", source / "torchimages", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "--quiet"]
    dist, site, cwd = base / "dist", base / "site", base / "elsewhere"
    cwd.mkdir()
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", dist, source], check=True, cwd=cwd)
    (wheel,) = dist.glob("torchimages-*.whl")
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", site, wheel], check=True, cwd=cwd)
    yield Installed(site, cwd, wheel)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def test_the_wheel_carries_templates_knowledge_base_suites_and_probes(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    assert set(PACKAGE_DATA) <= names
    expected = {
        f"torchimages/{p.relative_to(ROOT / 'torchimages').as_posix()}"
        for pattern in (
            "templates/*.j2",
            "templates/steps/*.j2",
            "data/*.yaml",
            "data/*.json",
            "probes/scripts/*.py",
            "smoke/suites/*.py",
        )
        for p in (ROOT / "torchimages").glob(pattern)
    }
    assert expected <= names, sorted(expected - names)
    assert not any(n.startswith(("templates/", "images/", "tests/")) for n in names)


def test_the_installed_package_is_the_one_imported(installed: Installed) -> None:
    out = ok(
        installed.python(
            "-c",
            "import torchimages, torchimages.render as r; from torchimages.smoke import runner;"
            "print(torchimages.__file__); print(r.DEFAULT_TEMPLATES); print(runner.package_dir())",
        )
    )
    module, templates, smoke = (Path(line) for line in out.splitlines())
    site = installed.site.resolve()
    assert module.resolve() == site / "torchimages" / "__init__.py"
    assert templates == site / "torchimages" / "templates"
    assert Path(smoke).resolve() == site / "torchimages" / "smoke"


def test_validate_and_list_from_another_folder(installed: Installed) -> None:
    assert "valid" in ok(installed.run("validate", "--matrix", MATRIX))
    listed = json.loads(ok(installed.run("list", "--json", "--matrix", MATRIX)))
    here = plan.load(MATRIX)
    # Same tags and input digests as the checkout: the packaged templates are the checkout's bytes.
    assert {i["tag"]: i["input_digest"] for i in listed} == {i.tag: i.input_digest for _, i in here.images()}


def test_the_console_script(installed: Installed) -> None:
    out = ok(installed.run("list", "--matrix", MATRIX, script=True))
    assert out.split() == [i.tag for _, i in plan.load(MATRIX).images()]


def test_render_check_and_render_match_the_committed_dockerfiles(installed: Installed, tmp_path: Path) -> None:
    ok(installed.run("render", "--check", "--matrix", MATRIX, "--images-dir", IMAGES))
    images = tmp_path / "images"
    shutil.copytree(IMAGES, images, ignore=shutil.ignore_patterns("Dockerfile", "steps"))  # keeps the lock files
    ok(installed.run("render", "--matrix", MATRIX, "--images-dir", images))
    generated = ("*/Dockerfile", "*/steps/*")
    committed = {p.relative_to(IMAGES).as_posix(): p.read_text() for g in generated for p in IMAGES.glob(g)}
    rendered = {p.relative_to(images).as_posix(): p.read_text() for g in generated for p in images.glob(g)}
    assert committed and rendered == committed


def test_workflow_check_matches_the_committed_workflow(installed: Installed) -> None:
    """The workflow's template travels in the wheel: the installed tool renders the committed file."""
    assert "up to date" in ok(installed.run("workflow", "--check", "--matrix", MATRIX))


def test_the_smoke_suites_are_collected_from_the_package(installed: Installed, tmp_path: Path) -> None:
    combination, image = next(iter(plan.load(MATRIX).images()))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(document.image_document(combination, image, image.reference)))
    # runner.pytest_command as the tool runs it, plus --collect-only: nothing is probed.
    code = (
        "import subprocess, sys; from pathlib import Path; from torchimages.smoke import runner;"
        f"cmd = runner.pytest_command('local://', Path({str(spec)!r}), runner.SmokeOptions(), None);"
        "sys.exit(subprocess.call([*cmd, '--collect-only', '-q']))"
    )
    out = ok(installed.python("-c", code))
    modules = {line.split("::")[0] for line in out.splitlines() if "::" in line}
    suites = {f"suites/{p.name}" for p in (ROOT / "torchimages" / "smoke" / "suites").glob("test_*.py")}
    assert suites and modules == suites, out


def test_the_top_level_templates_folder_is_the_packaged_one() -> None:
    top = ROOT / "templates"
    assert top.is_symlink() and top.resolve() == render.DEFAULT_TEMPLATES
    assert Path(render.__file__).resolve().parent / "templates" == render.DEFAULT_TEMPLATES
    # The input digest hashes relative paths and bytes: the same through the symlink or the package.
    assert render.template_fingerprint(top) == render.template_fingerprint(render.DEFAULT_TEMPLATES)
    assert sorted(p.name for p in top.glob("*.j2")) == ["Dockerfile.j2", "macros.j2"]


def test_templates_option_overrides_the_packaged_folder(cli: Cli, tmp_path: Path) -> None:
    code, _, err = cli("list", "--matrix", str(MATRIX), "--templates", str(tmp_path))
    assert code == 2 and "no Dockerfile.j2 in the templates folder" in err
    for source in render.DEFAULT_TEMPLATES.glob("*.j2"):
        (tmp_path / source.name).write_text(source.read_text() + "{# changed #}\n")
    code, out, _ = cli("list", "--json", "--matrix", str(MATRIX), "--templates", str(tmp_path))
    digests = {i["tag"]: i["input_digest"] for i in json.loads(out)}
    assert code == 0 and set(digests) == {i.tag for _, i in plan.load(MATRIX).images()}
    assert not set(digests.values()) & {i.input_digest for _, i in plan.load(MATRIX).images()}
