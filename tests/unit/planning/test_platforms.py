"""The platform axis: `platforms` on a matrix entry or at its top level (default linux/amd64 alone, so nothing of
today's plan changes), refused when no torch wheels exist for it (with the nearest combination that has them),
one image per flavor and platform sharing the flavor's public tag, a local tag per platform where that tag names
an OCI index, and an input digest that names the platform only where it is not linux/amd64."""

from __future__ import annotations

import dataclasses
import difflib
import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import golden
from tests.unit.conftest import ROOT
from torchimages import compat, platforms, render
from torchimages.combination import Combination, input_digest
from torchimages.planning import matrix, plan, platform_wheels, tags, views
from torchimages.planning.resolve import resolve
from torchimages.problems import InputError, Problem, Severity

Cli = Callable[..., tuple[int, str, str]]
KB = compat.load()
BOTH = "[linux/amd64, linux/arm64]"
DEBIAN = "{torch: 2.14.1, cuda: '13.0', os: debian12, torchaudio: none"


def rows(text: str) -> list[dict[str, object]]:
    parsed = matrix.parse(textwrap.dedent(text), "m.yaml")
    assert not parsed.problems, parsed.problems
    return [{k: v.value for k, v in r.values.items()} for r in parsed.rows]


def problems(text: str) -> list[Problem]:
    return list(matrix.parse(textwrap.dedent(text), "m.yaml").problems)


def load(tmp_path: Path, text: str) -> plan.Plan:
    path = tmp_path / "matrix.yaml"
    path.write_text(textwrap.dedent(text))
    return plan.load(path, images_dir=tmp_path / "images")


def refusals(tmp_path: Path, text: str) -> list[Problem]:
    with pytest.raises(InputError) as caught:
        load(tmp_path, text)
    return [p for p in caught.value.problems if p.severity is Severity.ERROR]


# The platforms module: what matrix.yaml may write


def test_platforms_are_read_in_one_order() -> None:
    assert platforms.parse(["linux/arm64", "linux/amd64"]) == ("linux/amd64", "linux/arm64")
    assert platforms.parse(["linux/arm64"]) == ("linux/arm64",)
    assert platforms.DEFAULTS == ("linux/amd64",)


@pytest.mark.parametrize(
    ("texts", "says", "hint"),
    [
        ([], "an empty list builds nothing", "list one or more of linux/amd64, linux/arm64"),
        (["arm64"], "unknown platform 'arm64'", "did you mean linux/arm64?"),
        (["aarch64"], "unknown platform 'aarch64'", "did you mean linux/arm64?"),
        (["linux/arm64/v8"], "unknown platform 'linux/arm64/v8'", "did you mean linux/arm64?"),
        (["Linux/ARM64"], "unknown platform 'Linux/ARM64'", "did you mean linux/arm64?"),
        (["x86_64"], "unknown platform 'x86_64'", "did you mean linux/amd64?"),
        (["windows/amd64"], "unknown platform 'windows/amd64'", ""),
        (["linux/riscv64"], "unknown platform 'linux/riscv64'", ""),
        (["linux/arm64", "linux/amd64", "linux/arm64"], "linux/arm64 is listed twice", "list each platform once"),
    ],
)
def test_a_bad_platform_list_says_what_and_the_likely_fix(texts: list[str], says: str, hint: str) -> None:
    with pytest.raises(platforms.PlatformError) as caught:
        platforms.parse(texts)
    assert str(caught.value) == says and caught.value.suggestion == hint


def test_a_platform_names_its_arch_and_wheel_machine() -> None:
    assert [platforms.arch(p) for p in platforms.PLATFORMS] == ["amd64", "arm64"]
    assert [platforms.wheel_machine(p) for p in platforms.PLATFORMS] == ["x86_64", "aarch64"]


def test_a_machine_runs_one_platform_natively() -> None:
    assert [platforms.of_machine(m) for m in ("x86_64", "amd64", "aarch64", "arm64")] == [
        platforms.AMD64,
        platforms.AMD64,
        platforms.ARM64,
        platforms.ARM64,
    ]
    assert platforms.of_machine("riscv64") is None and platforms.of_machine("") is None


# matrix.yaml: on an entry, at the top level


def test_platforms_on_an_entry() -> None:
    got = rows("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', platforms: [linux/arm64, linux/amd64]}\n")
    assert got == [{"torch": "2.14.1", "cuda": "13.0", "platforms": ("linux/amd64", "linux/arm64")}]


def test_without_platforms_a_row_names_none() -> None:
    assert rows("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0'}\n") == [{"torch": "2.14.1", "cuda": "13.0"}]


def test_the_top_level_platforms_is_every_rows_default_and_a_rows_own_replaces_it() -> None:
    text = f"""
    platforms: {BOTH}
    matrix:
      include:
        - {{torch: 2.14.1, cuda: '13.0'}}
        - {{torch: 2.9.1, cuda: cpu, platforms: [linux/arm64]}}
    """
    got = rows(text)
    assert got[0]["platforms"] == ("linux/amd64", "linux/arm64") and got[1]["platforms"] == ("linux/arm64",)
    parsed = matrix.parse(textwrap.dedent(text), "m.yaml")
    assert parsed.rows[0].line_of("platforms") == parsed.rows[0].line  # said where the row is


def test_an_include_merges_platforms_into_the_rows_it_matches() -> None:
    text = "matrix:\n  torch: [2.14.1]\n  cuda: ['13.0', '12.6']\n  include:\n"
    text += "    - {cuda: '13.0', platforms: [linux/arm64]}\n"
    assert [r.get("platforms") for r in rows(text)] == [("linux/arm64",), None]


@pytest.mark.parametrize(
    ("value", "says", "hint"),
    [
        ("[]", "an empty list builds nothing", "leave it out"),
        ("[arm64]", "unknown platform 'arm64'", "did you mean linux/arm64?"),
        ("[linux/amd64, linux/amd64]", "linux/amd64 is listed twice", "list each platform once"),
        ("[linux/arm64, [linux/amd64]]", "must be a single value such as 'linux/arm64'", ""),  # a platform
        ("{linux: arm64}", "must be a non-empty list of values such as [linux/arm64]", ""),
        ("64", "unknown platform '64'", ""),
        ("[' linux/arm64']", "has spaces around it", ""),
        ("~", "unknown platform '~'", ""),
    ],
)
@pytest.mark.parametrize("where", ["entry", "top"])
def test_hostile_platforms_are_refused_with_their_line(value: str, says: str, hint: str, where: str) -> None:
    if where == "entry":
        text = f"matrix:\n  include:\n    - {{torch: 2.14.1, cuda: '13.0', platforms: {value}}}\n"
    else:
        text = f"platforms: {value}\nmatrix:\n  include:\n    - {{torch: 2.14.1, cuda: '13.0'}}\n"
    (problem,) = problems(text)
    assert problem.key == "platforms" and says in problem.message, problem
    assert problem.line == (3 if where == "entry" else 1)
    assert hint in problem.suggestion


def test_platforms_is_no_axis() -> None:
    (problem,) = problems(f"matrix:\n  platforms: {BOTH}\n  torch: [2.14.1]\n  cuda: ['13.0']\n")
    assert problem.key == "platforms" and "unknown key 'platforms' in matrix" in problem.message
    text = f"matrix:\n  torch: [2.14.1]\n  cuda: ['13.0']\n  exclude:\n    - {{platforms: {BOTH}}}\n"
    assert any("'platforms' is not an axis" in p.message for p in problems(text))


def test_hostile_platforms_end_in_exit_2_and_a_located_line(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', platforms: [aarch64]}\n")
    for command in ("validate", "list", "render"):
        code, out, err = cli(command, "--matrix", str(path))
        assert code == 2 and out == "" and "Traceback" not in err
        said = "unknown platform 'aarch64' (allowed: linux/amd64, linux/arm64); did you mean linux/arm64?"
        assert f"{path}:3: error: platforms: {said}" in err
    assert not (path.parent / "images").exists()


# Wheels for the platform: refused where the knowledge base knows none, with the nearest that has them


def resolved(text_row: str) -> tuple[Combination | None, list[Problem]]:
    (row,) = matrix.parse(f"matrix:\n  include:\n    - {text_row}\n", "m.yaml").rows
    result = resolve(KB, row, "m.yaml", "torchimages/pytorch")
    return result.combination, list(result.problems)


@pytest.mark.parametrize(
    ("torch", "cuda", "allowed", "nearest"),
    [
        ("2.13.0", "12.6", "13.0", "nearest with them: cuda: 13.0 or torch: 2.12.1 (with CUDA 12.6)"),
        ("2.13.0", "cpu", "13.0", "nearest with them: cuda: 13.0 or torch: 2.10.0 (with the cpu build)"),
        ("2.8.0", "12.8", "cpu", "nearest with them: cuda: cpu or torch: 2.9.1 (with CUDA 12.8)"),
        ("2.9.1", "12.9", "12.6, 12.8, 13.0, cpu", "nearest with them: cuda: 12.8"),
        ("2.7.1", "11.8", "12.8, cpu", "nearest with them: cuda: 12.8"),
    ],
)
def test_a_platform_without_wheels_is_refused_with_the_nearest_combination_that_has_them(
    torch: str, cuda: str, allowed: str, nearest: str
) -> None:
    combination, found = resolved(f"{{torch: {torch}, cuda: '{cuda}', platforms: {BOTH}}}")
    assert combination is None
    (problem,) = [p for p in found if p.severity is Severity.ERROR]
    variant = compat.cuda_variant(cuda)
    assert problem.message == f"torch {torch}+{variant} has no linux/arm64 wheels that the knowledge base knows of"
    assert (problem.key, problem.allowed, problem.suggestion) == ("platforms", allowed, nearest)


def test_linux_amd64_alone_needs_no_platform_facts() -> None:
    for torch, cuda in (("2.13.0", "12.6"), ("2.8.0", "12.8"), ("2.5.1", "12.4")):
        combination, found = resolved(f"{{torch: {torch}, cuda: '{cuda}', platforms: [linux/amd64]}}")
        assert combination is not None and combination.platforms == ("linux/amd64",), found
        assert combination.platform_index_urls == ()


@pytest.mark.parametrize(
    ("torch", "cuda", "index"),
    [
        ("2.14.1", "13.0", "https://pypi.org/simple"),
        ("2.11.0", "13.0", "https://pypi.org/simple"),
        ("2.9.1", "cpu", "https://pypi.org/simple"),
        ("2.9.1", "12.8", "https://download.pytorch.org/whl/cu128"),
        ("2.7.1", "12.8", "https://download.pytorch.org/whl/cu128"),
    ],
)
def test_a_platform_with_wheels_carries_the_index_they_come_from(torch: str, cuda: str, index: str) -> None:
    combination, found = resolved(f"{{torch: {torch}, cuda: '{cuda}', platforms: {BOTH}}}")
    assert combination is not None, found
    assert combination.platforms == ("linux/amd64", "linux/arm64")
    assert combination.index_url_for("linux/arm64") == index
    assert combination.index_url_for("linux/amd64") == combination.index_url  # linux/amd64's is unchanged


def test_an_uncertain_platform_fact_warns_instead_of_refusing() -> None:
    combination, found = resolved(f"{{torch: 2.10.0, cuda: '13.0', platforms: {BOTH}}}")
    assert combination is not None
    assert [p.message for p in found if p.key == "platforms"] == [
        "linux/arm64 wheels of torch 2.10.0+cu130 are an uncertain fact in the knowledge base "
        "(https://download.pytorch.org/whl/cu130 would settle it, "
        "`kb sync --index https://download.pytorch.org/whl/cu130 --release 2.10.0`)"
    ]
    assert all(p.severity is Severity.WARNING for p in found)


def test_a_release_without_facts_for_a_platform_has_no_wheels_for_it() -> None:
    bare = dataclasses.replace(KB.torch["2.14"], platforms={})
    kb = dataclasses.replace(KB, torch={**KB.torch, "2.14": bare})
    gap = platform_wheels.missing(kb, bare, "2.14.1", "cu130", "linux/arm64")
    assert gap is not None and gap.allowed == "no build of torch 2.14"
    assert gap.suggestion == "nearest with them: torch: 2.13.0 (with CUDA 13.0)"
    assert platform_wheels.missing(kb, bare, "2.14.1", "cu130", "linux/amd64") is None


# The plan: images per platform, their tags, digests, labels; selection


def test_every_image_of_the_default_matrix_is_linux_amd64_under_its_public_tag() -> None:
    loaded = plan.load(ROOT / "matrix.yaml")
    for combination, image in loaded.images():
        assert combination.platforms == ("linux/amd64",) and not combination.multi_platform
        assert (image.platform, image.platform_tag, image.platform_reference) == ("linux/amd64", "", image.reference)
        assert "io.torchimages.platform" not in image.label_map()


def test_the_default_matrix_keeps_the_input_digests_its_committed_dockerfiles_carry() -> None:
    """No digest moved when platforms came: each image's is the one its committed Dockerfile labels it with."""
    loaded = plan.load(ROOT / "matrix.yaml")
    for combination in loaded.combinations:
        text = (ROOT / "images" / combination.dockerfile).read_text()
        committed = re.findall(r'io\.torchimages\.input-digest="(sha256:[0-9a-f]{64})"', text)
        assert sorted(committed) == sorted(i.input_digest for i in combination.images), combination.folder


def test_one_image_per_flavor_and_platform_sharing_the_flavors_names(tmp_path: Path) -> None:
    loaded = load(tmp_path, f"matrix:\n  include:\n    - {DEBIAN}, platforms: {BOTH}}}\n")
    (combination,) = loaded.combinations
    assert [(i.flavor, i.platform) for i in combination.images] == [
        ("devel", "linux/amd64"),
        ("devel", "linux/arm64"),
        ("runtime", "linux/amd64"),
        ("runtime", "linux/arm64"),
    ]
    assert combination.flavors == ("devel", "runtime")
    runtime = [i for i in combination.images if i.flavor == "runtime"]
    assert {i.tag for i in runtime} == {"2.14.1-cuda13.0-cudnn9-runtime"} and len({i.aliases for i in runtime}) == 1
    assert [i.platform_reference for i in runtime] == [
        "torchimages/pytorch:2.14.1-cuda13.0-cudnn9-runtime-amd64",
        "torchimages/pytorch:2.14.1-cuda13.0-cudnn9-runtime-arm64",
    ]
    assert combination.image("runtime").platform == "linux/amd64"
    assert combination.image("runtime", "linux/arm64") is runtime[1]


def test_a_platform_other_than_linux_amd64_alone_gets_its_own_local_tag(tmp_path: Path) -> None:
    loaded = load(tmp_path, "matrix:\n  include:\n    - {torch: 2.9.1, cuda: cpu, platforms: [linux/arm64]}\n")
    image = loaded.combinations[0].image("runtime")
    assert (image.platform, image.platform_tag) == ("linux/arm64", "2.9.1-cpu-runtime-arm64")


def test_the_input_digest_names_the_platform_only_where_it_is_not_linux_amd64(tmp_path: Path) -> None:
    alone = load(tmp_path, f"matrix:\n  include:\n    - {DEBIAN}}}\n").combinations[0]
    both = load(tmp_path, f"matrix:\n  include:\n    - {DEBIAN}, platforms: {BOTH}}}\n").combinations[0]
    for flavor in ("devel", "runtime"):
        amd64, arm64 = both.image(flavor, "linux/amd64"), both.image(flavor, "linux/arm64")
        assert amd64.input_digest == alone.image(flavor).input_digest  # as before platforms existed
        assert amd64.labels == alone.image(flavor).labels
        assert arm64.input_digest != amd64.input_digest
        assert arm64.label_map()["io.torchimages.platform"] == "linux/arm64"
        assert arm64.label_map()["io.torchimages.input-digest"] == arm64.input_digest
    fingerprint = render.template_fingerprint(render.DEFAULT_TEMPLATES)
    assert input_digest(both, "runtime", fingerprint) == input_digest(both, "runtime", fingerprint, "linux/amd64")
    elsewhere = dataclasses.replace(both, platform_index_urls=(("linux/arm64", "https://mirror.example/simple"),))
    assert (
        input_digest(elsewhere, "runtime", fingerprint, "linux/arm64")
        != both.image("runtime", "linux/arm64").input_digest
    )


ARM_CPU = "{torch: 2.9.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none"
# What a Dockerfile for both platforms adds to the linux/amd64 one: TARGETARCH declared, the base of each platform,
# and a choice by TARGETARCH wherever the platforms differ (PyPI's plain pins and index for linux/arm64).
PER_PLATFORM = (
    "ARG TARGETARCH",
    "FROM torchimages/bootstrap-debian:12-${TARGETARCH} AS runtime",
    "# The venv, from https://download.pytorch.org/whl/cpu (amd64), https://pypi.org/simple (arm64)",
    "case \"${TARGETARCH}\" in amd64) set -- 'torch==2.9.1+cpu' ;; arm64) set -- 'torch==2.9.1' ;;",
)
# And its venv step chooses the index by TARGETARCH.
PER_PLATFORM_INDEX = (
    '    case "${TARGETARCH}" in amd64) index=https://download.pytorch.org/whl/cpu ;; arm64) index=https://pypi.org/'
    'simple ;; *) echo "torchimages: this Dockerfile builds for amd64, arm64, not ${TARGETARCH}" >&2; exit 1 ;; esac\n'
    "    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; "
    'else export UV_NO_CONFIG=1 UV_INDEX_URL="$index"; fi\n'
)


def test_a_multi_platform_dockerfile_chooses_base_index_and_pins_by_targetarch(tmp_path: Path) -> None:
    alone = load(tmp_path, f"matrix:\n  include:\n    - {ARM_CPU}}}\n")
    both = load(tmp_path, f"matrix:\n  include:\n    - {ARM_CPU}, platforms: [linux/arm64, linux/amd64]}}\n")
    files = render.render_all(both.combinations, both.templates)
    (text,) = render.dockerfiles(files).values()
    (before,) = render.dockerfiles(render.render_all(alone.combinations, alone.templates)).values()
    (venv,) = (v for k, v in files.items() if k.endswith("/steps/venv.sh"))
    assert PER_PLATFORM_INDEX in venv
    golden.check(golden.GOLDEN / "platforms" / "2.9.1-cpu-py3.11-debian12.Dockerfile", text)
    added = [line.strip() for line in difflib.ndiff(before.splitlines(), text.splitlines()) if line.startswith("+ ")]
    unexplained = [line for line in added if not line[2:].strip().startswith(PER_PLATFORM)]
    assert [line for line in unexplained if "input-digest" not in line] == []
    assert text.count("ARG TARGETARCH") == 2  # runtime's stage and devel's


def test_a_linux_arm64_image_from_pypi_is_pinned_and_verified_by_plain_versions(tmp_path: Path) -> None:
    both = load(
        tmp_path,
        f"matrix:\n  include:\n    - {{torch: 2.9.1, cuda: cpu, os: debian12, torchaudio: none, platforms: {BOTH}}}\n",
    )
    combination = both.combinations[0]
    assert combination.pins_for("linux/amd64") == ("torch==2.9.1+cpu", "torchvision==0.24.1+cpu", "numpy==2.4.6")
    assert combination.pins_for("linux/arm64") == ("torch==2.9.1", "torchvision==0.24.1", "numpy==2.4.6")
    assert combination.expected_facts("linux/arm64")["torchvision"] == "0.24.1"
    assert combination.expected_facts("linux/amd64")["torchvision"] == "0.24.1+cpu"
    assert (
        combination.expected_facts("linux/amd64")["machine"],
        combination.expected_facts("linux/arm64")["machine"],
    ) == (
        "x86_64",
        "aarch64",
    )


def test_a_platforms_tag_that_another_image_has_is_refused() -> None:
    loaded = plan.load(ROOT / "matrix.yaml")
    first, second = loaded.combinations[:2]
    named = [
        (first, tags.Naming("a-runtime", (), ("a-runtime-amd64", "a-runtime-arm64"))),
        (second, tags.Naming("a-runtime-arm64", ())),
    ]
    (problem,) = tags.clashes(named)
    assert "would both be tagged 'a-runtime-arm64'" in problem.message


def test_a_tag_selects_every_platforms_image_and_a_platforms_tag_that_one(tmp_path: Path) -> None:
    loaded = load(tmp_path, f"matrix:\n  include:\n    - {DEBIAN}, platforms: {BOTH}}}\n")
    (chosen,) = plan.select(loaded, ["2.14.1-cuda13.0-cudnn9-runtime"])
    assert [i.platform for i in chosen.images] == ["linux/amd64", "linux/arm64"]
    (chosen,) = plan.select(loaded, ["2.14.1-cuda13.0-cudnn9-runtime-arm64"])
    assert [(i.flavor, i.platform) for i in chosen.images] == [("runtime", "linux/arm64")]


def test_views_name_the_platforms(tmp_path: Path) -> None:
    loaded = load(tmp_path, f"matrix:\n  include:\n    - {DEBIAN}, platforms: {BOTH}}}\n")
    chosen = plan.select(loaded, [])
    assert views.tags(chosen) == ["2.14.1-cuda13.0-cudnn9-devel", "2.14.1-cuda13.0-cudnn9-runtime"]
    (job,) = views.ci_matrix(chosen)["include"]
    assert job["platforms"] == "linux/amd64,linux/arm64"
    assert job["tags"] == "2.14.1-cuda13.0-cudnn9-devel 2.14.1-cuda13.0-cudnn9-runtime"
    combination = chosen[0].combination
    arm64 = combination.image("runtime", "linux/arm64")
    described = views.image_json(combination, arm64)
    assert (described["platform"], described["platform_reference"]) == (
        "linux/arm64",
        "torchimages/pytorch:2.14.1-cuda13.0-cudnn9-runtime-arm64",
    )
    step = views.describe(combination, arm64)
    assert "platform linux/arm64, tagged torchimages/pytorch:2.14.1-cuda13.0-cudnn9-runtime-arm64" in step
    assert "wheels from https://pypi.org/simple" in step


def test_views_of_a_linux_amd64_plan_say_nothing_of_platforms() -> None:
    chosen = plan.select(plan.load(ROOT / "matrix.yaml"), ["2.14.1-cuda13.0-*-debian12"])
    assert all("platforms" not in job for job in views.ci_matrix(chosen)["include"])
    assert all("platform" not in views.describe(s.combination, i) for s in chosen for i in s.images)


def test_what_a_row_cannot_have_of_the_top_level_platforms_is_said_at_the_row(tmp_path: Path) -> None:
    found = refusals(tmp_path, "platforms: [linux/arm64]\nmatrix:\n  include:\n    - {torch: 2.13.0, cuda: '12.6'}\n")
    assert [(p.line, p.key) for p in found] == [(4, "platforms")]


def test_a_dockerfile_for_linux_arm64_alone_names_its_pins_and_index(tmp_path: Path) -> None:
    arm = load(tmp_path, f"matrix:\n  include:\n    - {ARM_CPU}, platforms: [linux/arm64]}}\n")
    files = render.render_all(arm.combinations, arm.templates)
    (text,) = render.dockerfiles(files).values()
    (venv,) = (v for k, v in files.items() if k.endswith("/steps/venv.sh"))
    assert 'bash /mnt/venv.sh install --no-deps "torch==2.9.1"\n' in text and "+cpu" not in text
    assert "UV_INDEX_URL=https://pypi.org/simple;" in venv and "download.pytorch.org" not in text + venv
    assert "FROM torchimages/bootstrap-debian:12-${TARGETARCH} AS runtime" in text


def test_a_platforms_labels_name_its_own_companion_builds(tmp_path: Path) -> None:
    both = load(
        tmp_path,
        f"matrix:\n  include:\n    - {{torch: 2.9.1, cuda: cpu, os: debian12, torchaudio: none, platforms: {BOTH}}}\n",
    )
    combination = both.combinations[0]
    assert combination.image("runtime", "linux/amd64").label_map()["io.torchimages.torchvision"] == "0.24.1+cpu"
    assert combination.image("runtime", "linux/arm64").label_map()["io.torchimages.torchvision"] == "0.24.1"
