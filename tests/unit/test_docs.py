"""What a new user meets first stays true: the README's length, its two set-up commands, the tags it says
the first one makes, and every relative link of the README and docs/."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from tests.unit.conftest import ROOT

Cli = Callable[..., tuple[int, str, str]]
README = ROOT / "README.md"
PAGES = sorted([README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def setup_block() -> list[str]:
    """The commands of the README's "Set-up: two commands" code block, comments dropped."""
    section = README.read_text().split("## Set-up: two commands", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 150


def test_the_readme_sets_up_with_exactly_two_make_targets_that_exist() -> None:
    commands = setup_block()
    assert [c.split()[:2] for c in commands] == [["make", "build"], ["make", "test"]], commands
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^build: ", makefile, re.M) and re.search(r"^test: ", makefile, re.M)


def test_the_tags_the_readme_promises_are_what_its_first_command_selects(cli: Cli) -> None:
    selector = re.fullmatch(r"make build TAG='([^']+)' BUILD_ARGS='--bases bootstrap'", setup_block()[0])
    assert selector, setup_block()[0]  # registry-free, said in the command (never a silent fallback)
    section = README.read_text().split("### What the first command makes", 1)[1].split("###", 1)[0]
    block = section.split("```\n", 1)[1].split("```", 1)[0]
    promised = {line.split()[0].split(":", 1)[1]: line.split("alias ", 1)[1].strip() for line in block.splitlines()}
    code, out, err = cli("list", "--json", "--matrix", str(ROOT / "matrix.yaml"), selector.group(1))
    assert code == 0, err
    listed = {item["tag"]: item["aliases"] for item in json.loads(out)}
    assert set(listed) == set(promised)
    assert all(item["pypi_only"] for item in json.loads(out))  # what a machine reaching PyPI alone builds
    for tag, alias in promised.items():
        assert alias in listed[tag], (tag, listed[tag])


def links(page: Path) -> list[str]:
    return [target for target in LINK.findall(page.read_text()) if not target.startswith(("http", "#", "mailto:"))]


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in links(page):
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken
