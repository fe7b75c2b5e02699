"""Tags: pytorch/pytorch-compatible, suffixed only where needed, aliases, never shared."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.conftest import ROOT
from torchimages import compat
from torchimages.planning import plan, tags
from torchimages.problems import InputError


def tags_of(write_matrix: Callable[[str], Path], entries: str) -> dict[str, tuple[str, ...]]:
    loaded = plan.load(write_matrix("matrix:\n  include:\n" + entries))
    return {i.tag: i.aliases for _, i in loaded.images()}


def test_plain_tags_without_suffixes(write_matrix: Callable[[str], Path]) -> None:
    tags = tags_of(write_matrix, "    - {torch: 2.7.0, cuda: '11.8'}\n    - {torch: 2.7.0, cuda: cpu}\n")
    assert set(tags) == {
        "2.7.0-cuda11.8-cudnn9-devel",
        "2.7.0-cuda11.8-cudnn9-runtime",
        "2.7.0-cpu-devel",
        "2.7.0-cpu-runtime",
    }


def test_os_suffix_only_where_a_pair_has_several_variants(write_matrix: Callable[[str], Path]) -> None:
    tags = tags_of(
        write_matrix, "    - {torch: 2.14.1, cuda: '13.0'}\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n"
    )
    assert "2.14.1-cuda13.0-cudnn9-runtime" in tags
    assert "2.14.1-cuda13.0-cudnn9-runtime-debian12" in tags
    alone = tags_of(write_matrix, "    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n")
    assert "2.14.1-cuda13.0-cudnn9-runtime" in alone


def test_minor_alias_points_at_the_newest_patch(write_matrix: Callable[[str], Path]) -> None:
    tags = tags_of(write_matrix, "    - {torch: 2.7.0, cuda: '11.8'}\n    - {torch: 2.7.1, cuda: '11.8'}\n")
    assert "2.7-cuda11.8-cudnn9-runtime" in tags["2.7.1-cuda11.8-cudnn9-runtime"]
    assert tags["2.7.0-cuda11.8-cudnn9-runtime"] == ()


def test_latest_goes_to_the_newest_default_build(write_matrix: Callable[[str], Path]) -> None:
    tags = tags_of(write_matrix, "    - {torch: 2.14.1, cuda: '13.0'}\n    - {torch: 2.14.1, cuda: '12.6'}\n")
    assert {"latest", "latest-runtime"} <= set(tags["2.14.1-cuda13.0-cudnn9-runtime"])
    assert "latest-devel" in tags["2.14.1-cuda13.0-cudnn9-devel"]
    assert "latest" not in tags["2.14.1-cuda12.6-cudnn9-runtime"]


def test_two_combinations_with_one_tag_are_refused(write_matrix: Callable[[str], Path]) -> None:
    with pytest.raises(InputError) as caught:
        plan.load(
            write_matrix(
                "matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n    - {torch: 2.7.0, cuda: '11.8'}\n"
            )
        )
    messages = [p.message for p in caught.value.problems]
    assert any("both be tagged '2.7.0-cuda11.8-cudnn9-runtime'" in m for m in messages)


def test_default_matrix_tags_are_unique_and_complete() -> None:
    loaded = plan.load(ROOT / "matrix.yaml")
    names = [n for _, i in loaded.images() for n in i.names]
    assert len(names) == len(set(names))
    minors = {c.torch.rsplit(".", 1)[0] for c in loaded.combinations}
    assert {f"2.{m}" for m in range(5, 16)} <= minors
    assert "2.7.0-cuda11.8-cudnn9-devel" in names


def test_latest_goes_to_the_newest_torch_by_version_not_by_text(write_matrix: Callable[[str], Path]) -> None:
    """2.14.1 is newer than 2.9.1, though '2.9.1' > '2.14.1' as text."""
    tags = tags_of(write_matrix, "    - {torch: 2.9.1, cuda: '12.8'}\n    - {torch: 2.14.1, cuda: '13.0'}\n")
    assert {"latest", "latest-runtime"} <= set(tags["2.14.1-cuda13.0-cudnn9-runtime"])
    assert "latest-devel" in tags["2.14.1-cuda13.0-cudnn9-devel"]
    older = [alias for tag, aliases in tags.items() if tag.startswith("2.9.1") for alias in aliases]
    assert older and not [alias for alias in older if alias.startswith("latest")], older


def test_the_minor_alias_goes_to_the_newest_patch_by_version_not_by_text(
    write_matrix: Callable[[str], Path],
) -> None:
    """Patches 2.9.9 and 2.9.10 of one minor (made up: no such releases): the aliases are 2.9.10's."""
    (combination,) = plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.9.1, cuda: '12.8'}\n")).combinations
    ninth, tenth = (dataclasses.replace(combination, torch=t, folder=f"{t}-x") for t in ("2.9.9", "2.9.10"))
    namings, problems = tags.assign(compat.load(), [(ninth, "runtime"), (tenth, "runtime")])
    assert problems == []
    assert namings[0].tag == "2.9.9-cuda12.8-cudnn9-runtime" and namings[0].aliases == ()
    assert namings[1].aliases == ("2.9-cuda12.8-cudnn9-runtime", "latest-runtime", "latest")
