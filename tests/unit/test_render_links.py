"""Symbolic links in images/ (issue 42): `render` and `render --check` refuse each one wherever it is (the folder
itself, its folders and files, dangling ones), name it on a line of its own, exit 2 and write nothing: a followed
link had a write land outside the tree, a steps/ folder's target emptied, and --check call a file outside the build
context up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_hostile_files import _common, _plan, listing, no_engine, run

__all__ = ["no_engine"]  # autouse: no machine setting, no engine


LINKED = "a symbolic link (to "


def _folder(tmp_path: Path) -> Path:
    """The first combination's folder in images/ (made)."""
    folder = tmp_path / "images" / _plan().combinations[0].folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _outside(tmp_path: Path) -> Path:
    """A folder beside images/ with one file: what a followed link would write over or empty."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "venv.sh").write_text("the user's own file\n")
    (outside / "keep.txt").write_text("keep me\n")
    return outside


def _refused_links(tmp_path: Path, check: list[str], links: list[Path]) -> str:
    """render (or --check) exits 2 naming each link, one line each, no traceback, nothing written anywhere."""
    argv = ["render", *_common(tmp_path), *check]
    before = listing(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == len(links), err
    for line, link in zip(lines, sorted(links), strict=True):
        assert line.startswith(f"{link}: error: {LINKED}"), err
    assert listing(tmp_path) == before, "a refusal wrote something"
    return err


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_a_linked_steps_folder_is_refused_and_its_target_left_alone(tmp_path: Path, check: list[str]) -> None:
    outside = _outside(tmp_path)
    steps = _folder(tmp_path) / "steps"
    steps.symlink_to(outside, target_is_directory=True)
    _refused_links(tmp_path, check, [steps])
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt", "venv.sh"]
    assert (outside / "venv.sh").read_text() == "the user's own file\n"


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_a_linked_step_script_is_refused_and_its_target_not_overwritten(tmp_path: Path, check: list[str]) -> None:
    outside = _outside(tmp_path)
    script = _folder(tmp_path) / "steps" / "venv.sh"
    script.parent.mkdir()
    script.symlink_to(outside / "venv.sh")
    _refused_links(tmp_path, check, [script])
    assert (outside / "venv.sh").read_text() == "the user's own file\n"


def test_a_linked_dockerfile_whose_target_is_up_to_date_is_not_called_up_to_date(tmp_path: Path) -> None:
    """The rendering, written whole, then its Dockerfile moved out of the tree and linked back: --check said
    'up to date' of a file that is no part of the build context."""
    assert run(["render", *_common(tmp_path)])[0] == 0
    assert run(["render", *_common(tmp_path), "--check"])[0] == 0
    dockerfile = _folder(tmp_path) / "Dockerfile"
    moved = tmp_path / "Dockerfile.outside"
    dockerfile.rename(moved)
    dockerfile.symlink_to(moved)
    err = _refused_links(tmp_path, ["--check"], [dockerfile])
    assert "up to date" not in err


@pytest.mark.parametrize("check", [[], ["--check"]])
@pytest.mark.parametrize("name", ["Dockerfile", "steps/venv.sh", "steps", "requirements.txt", "notes"])
def test_a_dangling_link_anywhere_is_refused_without_a_traceback(tmp_path: Path, check: list[str], name: str) -> None:
    link = _folder(tmp_path) / name
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(tmp_path / "gone")
    _refused_links(tmp_path, check, [link])


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_every_link_is_named_and_none_written_even_where_others_would_be(tmp_path: Path, check: list[str]) -> None:
    """A fresh rendering (every file to write) with links elsewhere in images/: all named, not one file written."""
    outside = _outside(tmp_path)
    links = [tmp_path / "images" / "zz-other", tmp_path / "images" / "aa" / "b" / "readme"]
    links[0].parent.mkdir()
    links[0].symlink_to(outside, target_is_directory=True)
    links[1].parent.mkdir(parents=True)
    links[1].symlink_to(outside / "keep.txt")
    _refused_links(tmp_path, check, links)
    assert not (tmp_path / "images" / _plan().combinations[0].folder).exists()


@pytest.mark.parametrize("check", [[], ["--check"]])
def test_an_images_folder_that_is_a_link_is_refused(tmp_path: Path, check: list[str]) -> None:
    outside = _outside(tmp_path)
    (tmp_path / "images").symlink_to(outside, target_is_directory=True)
    _refused_links(tmp_path, check, [tmp_path / "images"])
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt", "venv.sh"]


def test_lock_refuses_a_link_before_it_writes_a_lock_file(tmp_path: Path) -> None:
    """`lock SELECTOR` writes requirements.lock into images/ and re-renders: a link is named before either (and
    before the engine is asked, which none answers here)."""
    link = _folder(tmp_path) / "steps"
    link.symlink_to(tmp_path / "gone")
    argv = ["lock", *_common(tmp_path), _plan().combinations[0].images[0].tag]
    before = listing(tmp_path)
    code, out, err = run(argv)
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert err.startswith(f"{link}: error: {LINKED}") and "no Docker engine" not in err, err
    assert listing(tmp_path) == before
