"""The input digest moves with every input that shapes an image's bytes, tested on the rule itself (not through
golden files): a combination's committed lock file (each byte of it, its coming and going) and the uv that
installs the venv (its version, the hashes pip checks it by). Both are build-time only, so no tag shows them:
only the digest tells `build` an image is out of date, and `outdated` that it is stale."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from torchimages import compat
from torchimages.combination import LOCK_FILE
from torchimages.planning import plan

MATRIX = "matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}\n"


def digests(path: Path, kb: compat.KnowledgeBase | None = None) -> dict[str, str]:
    """Each image's input digest, by tag, as the plan computes it."""
    (selected,) = plan.select(plan.load(path, kb=kb), [])
    return {image.tag: image.input_digest for image in selected.images}


def lock_file(path: Path) -> Path:
    (selected,) = plan.select(plan.load(path), [])
    folder = path.parent / "images" / selected.combination.folder
    folder.mkdir(parents=True, exist_ok=True)
    return folder / LOCK_FILE


def test_a_changed_lock_file_moves_every_images_input_digest(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(MATRIX)
    lock = lock_file(path)
    without = digests(path)
    assert len(without) == 2
    lock.write_text("numpy==2.3.5\nfilelock==3.20.0\n")
    first = digests(path)
    lock.write_text("numpy==2.3.5\nfilelock==3.20.1\n")  # one byte
    second = digests(path)
    lock.write_text("numpy==2.3.5\nfilelock==3.20.0\n\n")  # a blank line: pip reads the same, the bytes differ
    blank = digests(path)
    for tag in without:
        assert len({without[tag], first[tag], second[tag], blank[tag]}) == 4, tag
    lock.write_text("numpy==2.3.5\nfilelock==3.20.0\n")  # the same bytes again: the same digest
    assert digests(path) == first
    lock.unlink()  # removed: as before it was written
    assert digests(path) == without


def test_a_changed_uv_pin_moves_every_images_input_digest(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(MATRIX)
    kb = compat.load()
    now = digests(path, kb)
    assert digests(path, dataclasses.replace(kb)) == now  # the same knowledge base: the same digest
    version = dataclasses.replace(kb, installer=dataclasses.replace(kb.installer, version="0.99.0"))
    hashes = (*kb.installer.sha256[:-1], "0" * 64)
    wheel = dataclasses.replace(kb, installer=dataclasses.replace(kb.installer, sha256=hashes))
    for moved in (digests(path, version), digests(path, wheel)):
        assert moved.keys() == now.keys() and all(moved[tag] != now[tag] for tag in now), (moved, now)
