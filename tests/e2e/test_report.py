"""`--report DIR` for real: a CPU runtime image built with a report (manifest valid against the shipped schema,
summary, merged JUnit, an SBOM listing what the image holds), the same image tested with a report, and an image
over its size budget: failed, untagged, the message naming its size, the budget and its largest layers."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import jsonschema
import pytest

from torchimages import engine
from torchimages.building import bootstrap
from torchimages.reporting import writer as reporting

from .conftest import (
    Built,
    build_matrix,
    imagetools,
    own_temporary,
    report_dir,
    run_cli,
    temporary_images,
    uncompressed_size,
)

pytestmark = pytest.mark.e2e
ENTRY = "{torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none, flavors: [runtime]"


@pytest.fixture(scope="module")
def built(cpu_built: Built) -> Built:
    """The run's one build of the CPU combination (conftest.cpu_built: `--report`, both flavors, pushed)."""
    return cpu_built


def manifest_of(folder: Path) -> dict[str, Any]:
    """manifest.json, validated against the schema the package ships."""
    manifest: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    jsonschema.Draft202012Validator(reporting.schema(), format_checker=jsonschema.FormatChecker()).validate(manifest)
    return manifest


def runtime_entry(manifest: dict[str, Any], built: Built) -> dict[str, Any]:
    """The runtime image's entry of a manifest of both flavors."""
    (entry,) = [i for i in manifest["images"] if i["reference"] == built.image("runtime").reference]
    return dict(entry)


def installed(built: Built) -> dict[str, str]:
    """What the build recorded the image holds: `name` -> version, OS (`gcc=...`) and venv (`torch==...`)."""
    text = (built.logs / f"{built.image('runtime').tag}.installed.txt").read_text()
    return dict(re.split("==?", line, maxsplit=1) for line in text.splitlines() if "=" in line and "#" not in line)


def test_the_manifest_says_what_was_built_from_what(built: Built, docker_client: Any) -> None:
    assert built.status == 0, built.output
    manifest = manifest_of(report_dir(built))
    assert (manifest["command"], manifest["result"], manifest["counts"]) == ("build", "passed", {"built": 2})
    assert len(manifest["images"]) == 2
    image = runtime_entry(manifest, built)
    planned = built.image("runtime")
    stored = docker_client.images.get(built.ids["runtime"])  # as built (a later --no-cache rebuild moves the tag)
    assert (image["reference"], image["input_digest"]) == (planned.reference, planned.input_digest)
    assert image["image_id"] == stored.id and image["size"]["uncompressed"] == uncompressed_size(
        docker_client, stored.id
    )
    assert image["versions"] == {
        "torch": "2.13.0",
        "torchvision": None,
        "torchaudio": None,
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "python": "3.11",
        "os": "debian12",
        "toolkit": None,
    }
    durations = image["durations"]
    assert durations["build_seconds"] > 0 and durations["test_seconds"] > 0
    assert durations["build_seconds"] + durations["test_seconds"] <= durations["total_seconds"] + 0.2
    smoke = image["smoke"]
    assert smoke["failed"] == smoke["error"] == 0 and smoke["passed"] >= 10 and smoke["gpu"] == "none visible"
    skipped = [case for case in smoke["cases"] if case["result"] == "skipped"]
    assert skipped and all(case["reason"] for case in skipped), skipped
    (base,) = image["bases"]
    assert (base["reference"], base["locked"]) == (built.combination.os.image, False)
    assert base["built_from"] == bootstrap.provenance_in(docker_client.images.get(base["reference"]).labels)
    assert base["built_from"]["suite"] == "bookworm" and base["built_from"]["release_date"] != "unknown"


def test_devel_s_layer_scan_reads_only_its_own_layers(built: Built, docker_client: Any) -> None:
    """Issue 30: the layer scan keeps each layer's result by digest; devel (runtime's layers, then its own)
    takes runtime's from the cache, runtime (built first) may take only what an earlier run left there."""
    manifest = manifest_of(report_dir(built))
    (devel,) = [i for i in manifest["images"] if i["reference"] == built.image("devel").reference]
    (secrets,) = [c for c in devel["security"] if c["check"] == "secrets"]
    runtime_layers = len(docker_client.images.get(built.ids["runtime"]).attrs["RootFS"]["Layers"])
    found = re.search(r"^(\d+) layers, \d+ entries \((\d+) from the cache\)", secrets["note"])
    assert secrets["status"] == "passed" and found, secrets
    assert int(found.group(2)) >= runtime_layers and int(found.group(1)) > runtime_layers, secrets


def test_the_summary_and_the_merged_junit(built: Built) -> None:
    folder, tag = report_dir(built), built.image("runtime").tag
    summary = (folder / "summary.md").read_text()
    assert summary.startswith("### torchimages build: 2 built\n"), summary
    assert f"| `{built.image('runtime').reference}` | ✅ built (" in summary and " GB |" in summary, summary
    root = ElementTree.parse(folder / "junit.xml").getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {tag, built.image("devel").tag}, set(suites)
    suite = suites[tag]
    manifest = manifest_of(folder)
    image = runtime_entry(manifest, built)
    smoke, gate = image["smoke"], image["security"]
    # the smoke suites' cases, then one torchimages.security case per check of the gate
    assert [c["check"] for c in gate] == ["secrets", "os-updates", "python"]
    total = smoke["tests"] + len(gate)
    every = sum(i["smoke"]["tests"] + len(i["security"]) for i in manifest["images"])
    assert int(suite.get("tests", "0")) == total and int(root.get("tests", "0")) == every
    unscanned = sum(c["status"] in ("not scanned", "skipped") for c in gate)  # the python check here
    assert suite.get("failures") == "0" and int(suite.get("skipped", "0")) == smoke["skipped"] + unscanned
    cases = {c.get("name"): c for c in suite.iter("testcase") if c.get("classname") == "torchimages.security"}
    assert set(cases) == {"secrets", "os-updates", "python"} and cases["secrets"].find("failure") is None
    assert not list(folder.glob(".junit-*")), "the run's JUnit folder is removed once merged"


def test_the_sbom_lists_os_packages_the_venv_and_the_interpreter(built: Built) -> None:
    folder = report_dir(built)
    image = runtime_entry(manifest_of(folder), built)
    sbom = json.loads((folder / image["sbom"]).read_text())
    assert sbom["bomFormat"] == "CycloneDX"
    assert sbom["metadata"]["component"]["version"] == built.image("runtime").tag
    found: dict[str, dict[str, Any]] = {}
    for component in sbom["components"]:
        found.setdefault(component["name"], component)
    holds = installed(built)  # what pip and dpkg inside the image said
    attested = engine.DockerEngine().containerd_store  # the image carries its SPDX SBOM: the report converts it
    assert (image["sbom_source"], bool(image["sbom_statement"])) == (
        ("attestation", True) if attested else ("scan", False)
    )
    for name in ("torch", "numpy", "pip"):  # a CPU image has no nvidia-* packages
        assert found[name]["version"] == holds[name] == found[name]["version"], name
        assert found[name]["purl"].startswith(f"pkg:pypi/{name}@"), found[name]
        paths = [p["value"] for p in found[name].get("properties", []) if p["name"].startswith("syft:location")]
        assert attested or any(path.startswith("/opt/venv/") for path in paths), paths  # a scan says where
    if attested:  # every package of the image's own SBOM attestation, as the registry serves it, and no other
        image_ref = built.image("runtime")
        spdx = imagetools(f"{image_ref.repository}:{image_ref.tag}", "SBOM")["SPDX"]
        listed = {
            (p["name"], p.get("versionInfo")) for p in spdx["packages"] if p.get("primaryPackagePurpose") != "FILE"
        }
        converted = {(c["name"], c.get("version")) for c in sbom["components"] if c["type"] == "library"}
        assert converted == listed, converted ^ listed
        # syft's content: BuildKit did not read every layer again at export to add a `layerID:` comment
        # to each file, nor name itself a creator (sbom_generator.OUTPUT is not BuildKit's core SBOM)
        files = spdx.get("files") or []
        assert len(files) > 1000, len(files)  # syft lists the files packages own
        assert not [f["fileName"] for f in files if "layerID" in f.get("comment", "")][:3]
        creators = spdx["creationInfo"]["creators"]
        assert any(c.startswith("Tool: syft-") for c in creators), creators
        assert not [c for c in creators if c.startswith("Tool: buildkit")], creators
        (said,) = [p["value"] for p in sbom["metadata"]["properties"] if p["name"] == "torchimages:sbom:source"]
        statement, about = image["sbom_statement"], r"about its linux/amd64 manifest sha256:[0-9a-f]{64}"
        made_from = rf"converted from the image's SPDX SBOM attestation \(in-toto statement {statement}\) {about}"
        assert re.fullmatch(made_from, said), said
        assert [t["name"] for t in sbom["metadata"]["tools"]["components"]][:1] == ["syft"], "the attestation's tools"
    assert holds["torch"] == "2.13.0+cpu"
    interpreter = found["python3.11"]  # the interpreter, as its Debian package
    assert interpreter["version"] == holds["python3.11"] and interpreter["version"].startswith("3.11.")
    assert found["gcc"]["version"] == holds["gcc"] and found["gcc"]["purl"].startswith("pkg:deb/debian/gcc@")
    assert not list(folder.glob("sbom/.sbom-*")), "the saved image archive is removed"


def test_build_py_test_writes_a_report_too(built: Built, tmp_path: Path) -> None:
    folder, tag = tmp_path, built.image("runtime").tag
    # The gpu suite (its tests skip here, in seconds): the report is the subject; the shared build's report
    # holds the cpu suite's results, and test_clusters and test_any_image run `build.py test` with it.
    result = run_cli("test", "--matrix", built.plan.matrix_path, "--suites", "gpu", "--report", folder, tag)
    assert result.returncode == 0, result.stdout + result.stderr
    manifest = manifest_of(folder)
    image = runtime_entry(manifest, built)
    assert (manifest["command"], image["result"], image["durations"]["build_seconds"]) == ("test", "passed", None)
    smoke = image["smoke"]
    assert smoke["tests"] >= 10 and smoke["passed"] + smoke["skipped"] == smoke["tests"], smoke
    assert image["sbom"] and (folder / image["sbom"]).is_file()
    assert "✅ passed" in (folder / "summary.md").read_text()


@pytest.fixture(scope="module")
def over_budget(
    docker_client: Any, tmp_path_factory: pytest.TempPathFactory, ca_bundle: tuple[Path, bytes]
) -> Iterator[Built]:
    tmp = tmp_path_factory.mktemp("budget")
    entry = ENTRY + ", size_budget: {runtime: 10MB}}"
    yield from build_matrix(docker_client, tmp, entry, ca_bundle, extra=("--report", tmp / "report"))


def test_an_image_over_its_budget_fails_untagged_naming_size_budget_and_layers(
    over_budget: Built, docker_client: Any
) -> None:
    assert over_budget.status == 1, over_budget.output
    image = over_budget.image("runtime")
    stated = re.search(
        r"size ([\d.]+ [kMG]B) \((\d+) bytes\) is over the runtime budget of 10 MB \(10000000 bytes\); "
        r"its 5 largest layers:\n((?:\s+[\d.]+ [kMG]?B  .*\n){5})",
        over_budget.output,
    )
    assert stated, over_budget.output
    assert int(stated.group(2)) > 10_000_000
    layers = [
        float(line.split()[0]) * {"kB": 1e3, "MB": 1e6, "GB": 1e9}.get(line.split()[1], 1)
        for line in stated.group(3).splitlines()
    ]
    assert layers == sorted(layers, reverse=True) and layers[0] > 100e6, stated.group(3)  # the venv's torch layer
    assert docker_client.images.list(name=image.repository) == []
    # this run's temporary reference (another run of the same combination on a shared engine is not ours)
    assert own_temporary(over_budget.logs) and not own_temporary(over_budget.logs) & temporary_images(docker_client)
    (entry,) = manifest_of(over_budget.logs.parent / "report")["images"]
    assert (entry["result"], entry["image_id"], entry["sbom"], entry["size"]["budget"]) == ("failed", None, None, 10**7)
    assert "over the runtime budget" in entry["reason"]
