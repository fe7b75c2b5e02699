"""What the report says where the engine cannot tell (outside attack 21): another platform's image on the containerd
store has no known size (the engine gives 0: the report says null and the summary "-", never 0 B); after a zstd
push from that store the engine records no digest of the zstd manifest under the image (its id's own digest, listed
for each local name, was never sent), so `repo_digests` is empty, as docs/reports.md says. The engine's facts are
literals here (the fake engine)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fakes import FakeEngine
from tests.unit.reporting.test_report import IMAGE_ID, MATRIX
from torchimages.building.outcome import Outcome
from torchimages.engine import ImageInfo
from torchimages.planning import plan
from torchimages.reporting import manifest as manifest_json
from torchimages.reporting import summary
from torchimages.reporting import writer as reporting
from torchimages.reporting.model import ImageReport, Report


def built(
    write_matrix: Callable[[str], Path], tmp_path: Path, size: int, digests: tuple[str, ...], **kw: Any
) -> ImageReport:
    (combination, *_) = plan.load(write_matrix(MATRIX)).combinations
    _, runtime = combination.images
    fake = FakeEngine(images=[ImageInfo(runtime.reference, IMAGE_ID, {}, {}, "", (), size=size, repo_digests=digests)])
    fake.compressed = 17
    (tmp_path / "j").mkdir(exist_ok=True)
    ((image, _),) = reporting.built_images(
        [Outcome(combination, runtime, "built", 30.0, "verified")], fake, tmp_path / "j", **kw
    )
    return image


def test_an_unknown_size_is_null_in_the_report_and_a_dash_in_the_summary(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    image = built(write_matrix, tmp_path, 0, ())
    assert image.stored is not None and image.stored.size is None
    assert manifest_json.image_json(image)["size"]["uncompressed"] is None
    table = summary.summary_markdown(Report("build", "2026-12-07T00:00:00Z", (image,)))
    assert f"| `{image.reference}` | ✅ built | - (budget 2 GB) |" in table, table


def test_after_a_zstd_push_from_the_containerd_store_no_digest_is_said(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    own = f"torchimages/pytorch@{IMAGE_ID}"  # the repository of MATRIX's images
    image = built(write_matrix, tmp_path, 42, (own, own), pushed=True, zstd=True)
    assert image.stored is not None and image.stored.repo_digests == ()
