"""The report's documents from outcomes: manifest.json (valid against its shipped schema), summary.md and the
merged JUnit XML, compared with reviewed goldens (UPDATE_GOLDEN=1 rewrites them); gathering from a fake engine."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest

from tests import golden
from tests.fakes import FakeEngine
from torchimages.building.outcome import Outcome
from torchimages.engine import ImageInfo, stored_size
from torchimages.planning import plan
from torchimages.reporting import manifest as manifest_json
from torchimages.reporting import model as report
from torchimages.reporting import writer as reporting
from torchimages.reporting.junit import merge_junit, smoke_result
from torchimages.reporting.summary import duration, summary_markdown
from torchimages.security.model import Allowed, CheckResult, Finding
from torchimages.smoke import targets
from torchimages.smoke.runner import junit_in

GOLDEN = golden.GOLDEN / "report"
MATRIX = """
matrix:
  include:
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, size_budget: {runtime: 2GB}}
    - {torch: 2.14.1, cuda: "13.0", os: debian12, size_budget: {devel: 6GB}}
"""
CREATED = "2026-11-30T08:00:00Z"
IMAGE_ID = "sha256:" + "ab" * 32


def junit(*cases: str, gpu: str = "none visible") -> bytes:
    """A JUnit file as the smoke suites' pytest writes it (suite properties: GPU, driver, image)."""
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" '
        'errors="0" failures="0" skipped="0" tests="0" time="4.250" timestamp="2026-11-30T07:59:00+00:00" '
        'hostname="ci"><properties><property name="smoke_host" value="docker://torchimages-smoke-0123456789" />'
        f'<property name="gpu" value="{gpu}" /><property name="driver" value="none" />'
        '<property name="image" value="torchimages-tmp/x:runtime-0123456789" /></properties>'
        + "".join(cases)
        + "</testsuite></testsuites>"
    ).encode()


PASSED = '<testcase classname="suites.test_cpu_versions" name="test_versions_equal_the_spec" time="1.204" />'
SKIPPED = (
    '<testcase classname="suites.test_gpu" name="test_round_trip" time="0.001"><skipped type="pytest.skip" '
    'message="no usable GPU: no device visible (run with --gpus all)">skip</skipped></testcase>'
)
FAILED = (
    '<testcase classname="suites.test_cpu_image" name="test_no_package_caches" time="0.310"><failure '
    'message="AssertionError: apt lists left | /var/lib/apt/lists">trace</failure></testcase>'
)


@pytest.fixture
def images(write_matrix: Callable[[str], Path]) -> list[tuple[report.ImageReport, bytes | None]]:
    """One image of each kind: built and tested, up to date, over its budget, failing a smoke test."""
    (cpu_devel, cpu), (cuda_devel, cuda) = [
        [(c, i) for i in c.images] for c in plan.load(write_matrix(MATRIX)).combinations
    ]
    built_junit, failed_junit = (
        junit(PASSED, PASSED.replace("versions_equal", "labels_equal"), SKIPPED),
        junit(PASSED, FAILED),
    )
    cpu, cpu_devel, cuda, cuda_devel = (  # digests that do not change with the templates
        (c, dataclasses.replace(i, input_digest=f"sha256:{n:064x}"))
        for n, (c, i) in enumerate((cpu, cpu_devel, cuda, cuda_devel))
    )
    stored = report.StoredImage(IMAGE_ID, 1_234_567_890, ("registry.example/torchimages/pytorch@" + IMAGE_ID,))
    # The security gate's results as the builder records them: one finding allowed, one check that could not look.
    allowed = Allowed(
        Finding("os-updates", "libssl3", "libssl3 3.0.15-1~deb12u1", "newer in bookworm-security: 3.0.17-1~deb12u2"),
        "os-updates libssl3",
        "fixed in the next rebuild",
        "2027-01-31",
    )
    security = (
        CheckResult("secrets", "passed", note="12 layers"),
        CheckResult("os-updates", "passed", allowed=(allowed,)),
        CheckResult("python", "not scanned", note="pip-audit could not audit any packages (first: torch: 404)"),
    )
    over = "not tagged:\n    size 7.01 GB (7012345678 bytes) is over the devel budget of 6 GB (6000000000 bytes)"
    return [
        (
            report.image_report(
                *cpu,
                "built",
                stored=stored,
                build_seconds=61.95,
                test_seconds=22.04,
                verify_seconds=9.96,
                gate_seconds=4.0,
                smoke_seconds=8.04,
                total_seconds=85.2,
                smoke=smoke_result(built_junit),
                bases=(
                    report.BaseImage(
                        "torchimages/bootstrap-debian:12",
                        False,
                        {
                            "suite": "bookworm",
                            "sources": "http://deb.example.org/debian bookworm main",
                            "release_date": "Sat, 11 Jul 2026 10:16:37 UTC",
                        },
                    ),
                ),
                security=security,
            ),
            built_junit,
        ),
        (
            report.image_report(
                *cpu_devel, "skipped", "up to date", stored=report.StoredImage(IMAGE_ID, 1_500_000_000), total_seconds=0
            ),
            None,
        ),
        (
            report.image_report(
                *cuda_devel,
                "failed",
                over,
                build_seconds=107.0,
                test_seconds=0.4,
                bases=(report.BaseImage("ubuntu:24.04@sha256:" + "2" * 64, True),),
            ),
            None,
        ),
        (
            report.image_report(
                *cuda,
                "failed",
                "not tagged:\n    smoke suites (cpu) failed:\n    FAILED suites/test_cpu_image.py::"
                "test_no_package_caches - apt lists left | /var/lib/apt/lists",
                build_seconds=3700,
                test_seconds=30,
                smoke=smoke_result(failed_junit),
                security=(CheckResult("secrets", "failed", ("secrets: layer 2 of 9: root/.netrc: credentials",)),),
                cuda_archs="sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120",  # verification read it before the gates
            ),
            failed_junit,
        ),
    ]


def check_golden(name: str, text: str) -> None:
    golden.check(GOLDEN / name, text)


def document(images: list[tuple[report.ImageReport, bytes | None]]) -> report.Report:
    return report.Report("build", CREATED, tuple(image for image, _ in images))


def test_manifest_matches_its_golden_and_its_schema(images: list[tuple[report.ImageReport, bytes | None]]) -> None:
    manifest = manifest_json.manifest(document(images))
    check_golden("manifest.json", json.dumps(manifest, indent=2) + "\n")
    jsonschema.Draft202012Validator(reporting.schema(), format_checker=jsonschema.FormatChecker()).validate(manifest)
    assert manifest["result"] == "failed" and manifest["counts"] == {"built": 1, "skipped": 1, "failed": 2}
    built = manifest["images"][0]
    assert built["versions"]["torch"] == "2.13.0" and built["versions"]["cuda"] is None
    assert built["size"] == {"uncompressed": 1_234_567_890, "compressed": None, "budget": 2_000_000_000}
    assert built["smoke"]["passed"] == 2 and built["smoke"]["skipped"] == 1 and built["smoke"]["gpu"] == "none visible"
    assert manifest["images"][2]["versions"]["toolkit"].startswith("cuda-toolkit[")


def test_the_schema_refuses_what_it_does_not_describe(images: list[tuple[report.ImageReport, bytes | None]]) -> None:
    validator = jsonschema.Draft202012Validator(reporting.schema())
    manifest = manifest_json.manifest(document(images))
    for broken in (
        {**manifest, "schema_version": 2},
        {**manifest, "images": [{**manifest["images"][0], "result": "ok"}]},
        {**manifest, "images": [{**manifest["images"][0], "image_id": "ab" * 32}]},
        {**manifest, "extra": 1},
        {**manifest, "images": [{**manifest["images"][0], "sbom_source": "guess"}]},
        {**manifest, "images": [{**manifest["images"][0], "sbom_statement": "sha256:short"}]},
        # the three SBOM fields agree: a converted one names its statement, a scanned one none, no SBOM neither
        {**manifest, "images": [{**manifest["images"][0], "sbom": "s.json", "sbom_source": "attestation"}]},
        {
            **manifest,
            "images": [
                {
                    **manifest["images"][0],
                    "sbom": "s.json",
                    "sbom_source": "scan",
                    "sbom_statement": "sha256:" + "c" * 64,
                }
            ],
        },
        {**manifest, "images": [{**manifest["images"][0], "sbom": "s.json"}]},
        {**manifest, "images": [{**manifest["images"][0], "sbom_note": "why"}]},
        {**manifest, "images": [{**manifest["images"][0], "sbom_source": "scan"}]},
    ):
        assert not validator.is_valid(broken)
    attested = {"sbom": "sbom/a.cdx.json", "sbom_source": "attestation", "sbom_statement": "sha256:" + "c" * 64}
    assert validator.is_valid({**manifest, "images": [{**manifest["images"][0], **attested}]})
    scanned = {"sbom": "sbom/a.cdx.json", "sbom_source": "scan", "sbom_note": "it carries no SPDX SBOM attestation"}
    assert validator.is_valid({**manifest, "images": [{**manifest["images"][0], **scanned}]})


def test_summary_matches_its_golden(images: list[tuple[report.ImageReport, bytes | None]]) -> None:
    text = summary_markdown(document(images))
    check_golden("summary.md", text)
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == 4 and all(row.count(" | ") == 5 for row in rows)  # a pipe in a reason is escaped
    assert "\\| /var/lib/apt/lists" in rows[3]


def test_junit_merges_into_one_testsuite_per_image(images: list[tuple[report.ImageReport, bytes | None]]) -> None:
    merged = merge_junit(images)
    check_golden("junit.xml", merged.decode())
    root = ElementTree.fromstring(merged)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [image.tag for image, _ in images]
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "11",  # 7 smoke and build cases, 4 of the security gate
        "failures": "3",
        "errors": "0",
        "skipped": "3",
    }
    gate = {c.get("name"): c for c in suites[0].iter("testcase") if c.get("classname") == "torchimages.security"}
    assert list(gate) == ["secrets", "os-updates", "python"]
    assert gate["python"].find("skipped") is not None  # not scanned is never a pass
    assert "allowed by os-updates libssl3 until 2027-01-31" in (gate["os-updates"].findtext("system-out") or "")
    netrc = suites[3].find("testcase[@name='secrets']/failure")
    assert netrc is not None and "root/.netrc" in (netrc.text or "")
    properties = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert properties["gpu"] == "none visible"
    over_budget = suites[2].find("testcase/failure")
    assert over_budget is not None and "over the devel budget" in (over_budget.text or "")
    assert suites[1].find("testcase/skipped") is not None  # up to date: not retested


def test_smoke_results_read_from_junit() -> None:
    smoke = smoke_result(junit(PASSED, SKIPPED, FAILED, gpu="NVIDIA H200"))
    assert [(c.result, c.reason) for c in smoke.cases] == [
        ("passed", ""),
        ("skipped", "no usable GPU: no device visible (run with --gpus all)"),
        ("failed", "AssertionError: apt lists left | /var/lib/apt/lists"),
    ]
    assert (smoke.gpu, smoke.driver) == ("NVIDIA H200", "none")
    with pytest.raises(ValueError, match="not JUnit XML"):
        smoke_result(b"<testsuite")


@pytest.mark.parametrize(
    ("seconds", "shown"), [(None, "-"), (0.4, "0 s"), (59.6, "59 s"), (107, "1m47s"), (3725, "1h02m")]
)
def test_durations(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def inspecting_engine(reference: str) -> FakeEngine:
    """An engine that knows one tagged image (42 bytes here, 17 in the registry); saves nothing."""
    fake = FakeEngine(images=[ImageInfo(reference, IMAGE_ID, {}, {}, "", (), size=42, repo_digests=(f"r@{IMAGE_ID}",))])
    fake.compressed = 17
    return fake


def test_outcomes_are_gathered_with_their_junit_and_the_engines_facts(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    (combination, *_) = plan.load(write_matrix(MATRIX)).combinations
    devel, runtime = combination.images
    junit_dir = tmp_path / "junit"
    junit_dir.mkdir()
    junit_in(junit_dir, runtime.tag).write_bytes(junit(PASSED))
    outcomes = [
        Outcome(combination, devel, "failed", 9.0, "build failed (exit 1)", build_seconds=8.0),
        Outcome(
            combination,
            runtime,
            "built",
            30.0,
            "verified",
            build_seconds=20.0,
            test_seconds=9.5,
            verify_seconds=5.0,
            gate_seconds=1.5,
            smoke_seconds=3.0,
        ),
    ]
    (failed, none), (built, found) = reporting.built_images(outcomes, inspecting_engine(runtime.reference), junit_dir)
    assert none is None and failed.stored is None and failed.smoke is None and failed.reason == "build failed (exit 1)"
    assert found == junit(PASSED) and built.smoke is not None and built.smoke.count("passed") == 1
    # not pushed: no repository digests said (the containerd store lists one for every local name)
    assert built.stored == report.StoredImage(IMAGE_ID, 42, ()) and built.reason == ""
    assert (built.build_seconds, built.test_seconds, built.total_seconds) == (20.0, 9.5, 30.0)
    assert (built.verify_seconds, built.gate_seconds, built.smoke_seconds) == (5.0, 1.5, 3.0)
    (_, _), (pushed, _) = reporting.built_images(outcomes, inspecting_engine(runtime.reference), junit_dir, True)
    assert pushed.stored is not None and pushed.stored.compressed_size == 17  # the registry's answer
    assert pushed.stored.repo_digests == (f"r@{IMAGE_ID}",)
    twice = inspecting_engine(runtime.reference)
    own = f"{runtime.repository}@{IMAGE_ID}"  # the containerd store's listing, once for each name
    zstd_pushed = f"{runtime.repository}@sha256:{'7' * 64}"  # the zstd manifest read back
    earlier = f"elsewhere/r@{IMAGE_ID}"  # a gzip push to another repository before: truly there
    twice.details[runtime.reference] = dataclasses.replace(
        twice.details[runtime.reference], repo_digests=(own, own, zstd_pushed, earlier)
    )
    (_, _), (gzip, _) = reporting.built_images(outcomes, twice, junit_dir, True)
    assert gzip.stored is not None and gzip.stored.repo_digests == (own, zstd_pushed, earlier)
    (_, _), (zstd, _) = reporting.built_images(outcomes, twice, junit_dir, True, zstd=True)
    assert zstd.stored is not None and zstd.stored.repo_digests == (zstd_pushed, earlier)  # never the one not sent


def test_the_stored_size_is_config_and_layers_of_one_image_manifest() -> None:
    manifest = {"schemaVersion": 2, "config": {"size": 1500}, "layers": [{"size": 40_000_000}, {"size": 1}]}
    assert stored_size(manifest) == 40_001_501
    assert stored_size({"manifests": [{"size": 500}]}) is None  # a list of several images
    assert stored_size({"layers": [{"digest": "sha256:..."}]}) is None


def test_a_report_folder_that_cannot_be_written_or_no_syft_is_refused_before_any_build(
    write_matrix: Callable[[str], Path],
    cli: Callable[..., tuple[int, str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    matrix = str(write_matrix(MATRIX))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = cli("build", "--matrix", matrix, "--report", str(blocker / "report"), "2.13.0-cpu-runtime")
    assert code == 2 and f"error: --report {blocker / 'report'}: {blocker} is a regular file, not a folder" in err, err
    monkeypatch.setenv("TORCHIMAGES_SYFT", str(tmp_path / "no-syft"))
    code, _, err = cli("build", "--matrix", matrix, "--report", str(tmp_path / "r"), "2.13.0-cpu-runtime")
    assert code == 2 and f"TORCHIMAGES_SYFT={tmp_path / 'no-syft'}: no such program" in err, err
    assert not (tmp_path / "r").exists()


def test_report_takes_no_junit_or_local_host(cli: Callable[..., tuple[int, str, str]], tmp_path: Path) -> None:
    code, _, err = cli("test", "--host", "local", "--report", str(tmp_path))
    assert code == 2 and "--report takes the images' results itself" in err


def test_tested_images_any_image_by_its_reference_a_matrix_image_by_its_plan(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    (combination, *_) = plan.load(write_matrix(MATRIX)).combinations
    devel, runtime = combination.images
    spec: dict[str, Any] = {
        "tag": "from-spec",
        "image": "team/train:1",
        "flavor": None,
        "torch": "2.13.0",
        "python": "3.11",
    }
    spec |= {"os": "debian12", "labels": {"io.torchimages.input-digest": "sha256:" + "1" * 64}}
    junit_in(tmp_path, "team_train_1").write_bytes(junit(PASSED, FAILED))
    junit_in(tmp_path, runtime.tag).write_bytes(junit(PASSED))
    tested = [
        targets.Tested("team_train_1", spec, 1, 12.0),
        targets.Tested(
            runtime.tag, {"tag": runtime.tag, "image": runtime.reference}, 0, 8.0, "", (combination, runtime)
        ),
        targets.Tested(
            devel.tag, {"tag": devel.tag, "image": devel.reference}, 1, 0.5, "no container", (combination, devel)
        ),
    ]
    (any_image, _), (planned, _), (unstarted, none) = reporting.tested_images(
        tested, inspecting_engine(runtime.reference), tmp_path
    )
    assert (any_image.tag, any_image.result, any_image.combination) == ("team/train:1", "failed", None)
    assert any_image.reason == "smoke suites failed: test_no_package_caches"
    assert any_image.input_digest == "sha256:" + "1" * 64 and any_image.versions.torchvision is None
    assert (planned.result, planned.combination, planned.stored is not None) == ("passed", combination.folder, True)
    assert planned.test_seconds == planned.total_seconds == 8.0 and planned.build_seconds is None
    assert (unstarted.result, unstarted.reason, unstarted.smoke, none) == ("failed", "no container", None, None)


def test_the_stored_size_of_an_attested_push_is_its_one_images() -> None:
    """`docker manifest inspect --verbose` (Docker 26): an object for an image manifest, a list for an index; the
    containerd store pushes an image with its attestations as an index: the attestation's entry is left out."""
    from torchimages.engine.docker_engine import verbose_stored_size

    image = {"config": {"size": 1_000}, "layers": [{"size": 40_000_000}, {"size": 500}]}
    attestation = {"config": {"size": 241}, "layers": [{"size": 5_834_479}]}
    entry = {"Descriptor": {"platform": {"os": "linux", "architecture": "amd64"}}, "OCIManifest": image}
    unknown = {"Descriptor": {"platform": {"os": "unknown", "architecture": "unknown"}}, "OCIManifest": attestation}
    assert verbose_stored_size({"Descriptor": {}, "SchemaV2Manifest": image}) == 40_001_500
    assert verbose_stored_size([entry, unknown]) == 40_001_500
    assert verbose_stored_size([entry, entry]) is None  # two images: not one image's size
    assert (
        verbose_stored_size([unknown]) is None and verbose_stored_size("x") is None and verbose_stored_size([1]) is None
    )
