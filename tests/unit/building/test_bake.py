"""The bake file (golden), its rules (no public tag, groups, secrets as `build` passes them, cache), and
buildx's metadata file read back: hostile or incomplete metadata is refused with the reason."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import golden
from torchimages.building import bake, references, requests
from torchimages.building.provenance import Provenance
from torchimages.building.wheels import Served, WheelSources
from torchimages.combination import INPUT_DIGEST_LABEL, Combination
from torchimages.planning import plan
from torchimages.problems import InputError

GOLDEN = golden.GOLDEN / "bake.json"
# devel FROM runtime (CPU, debian12) and devel FROM an nvidia/cuda image (Ubuntu, CUDA 11.8), one runtime-only.
MATRIX = """\
repository: example/pytorch
matrix:
  include:
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}
    - {torch: 2.7.0, cuda: '11.8'}
    - {torch: 2.14.1, cuda: '13.0', os: debian12, flavors: [runtime]}
"""
SERVED = Served("https://pypi.example/simple", (), ("http://127.0.0.1:8000/",), needs_host_network=False)


def fixed_digests(combination: Combination) -> Combination:
    """Input digests that do not move with the templates (the golden checks the bake file's shape)."""
    images = []
    for n, image in enumerate(combination.images):
        digest = f"sha256:{combination.folder.replace('.', '').replace('-', '')[:12]}{n:052d}"
        labels = tuple((k, digest if k == INPUT_DIGEST_LABEL else v) for k, v in image.labels)
        images.append(dataclasses.replace(image, input_digest=digest, labels=labels))
    return dataclasses.replace(combination, images=tuple(images))


@pytest.fixture
def selected(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    chosen = plan.select(plan.load(write_matrix(MATRIX)), [])
    return [plan.Selected(fixed_digests(s.combination), fixed_digests(s.combination).images) for s in chosen]


PROVENANCE = Provenance("https://git.example.org/team/torchimages", "0123456789abcdef0123456789abcdef01234567")


def entries(selected: list[plan.Selected], **options: object) -> list[bake.Entry]:
    opts = requests.BuildOptions(images_dir=Path("images"), log_dir=Path("logs"), **options)  # type: ignore[arg-type]
    return [
        bake.Entry(
            s.combination,
            image,
            requests.build_request(
                opts,
                s.combination,
                image,
                bake.bake_reference(s.combination, image),
                SERVED,
                Path(".bake/pip.conf"),
                Path(".bake/uv.toml"),
            ),
        )
        for s in selected
        for image in s.images
    ]


def test_golden_bake_file(selected: list[plan.Selected]) -> None:
    """The reviewed bake file; UPDATE_GOLDEN=1 rewrites it."""
    made = entries(selected, ca_cert=Path("ca.pem"), provenance=PROVENANCE)
    text = json.dumps(bake.bake_file(made), indent=2) + "\n"
    golden.check(GOLDEN, text)


def test_targets_carry_no_public_tag_and_build_what_build_builds(selected: list[plan.Selected]) -> None:
    made = entries(selected, ca_cert=Path("ca.pem"), network="host")
    definition = bake.bake_file(made)
    public = {f"{i.repository}:{n}" for s in selected for i in s.images for n in i.names}
    for entry in made:
        target = definition["target"][bake.target_name(entry.image)]
        (tag,) = target["tags"]
        assert tag not in public and references.is_temporary(tag), tag
        assert tag.startswith(f"{references.TEMP_REPOSITORY}/") and f":{entry.image.flavor}-bake-" in tag
        assert target["target"] == entry.image.flavor
        assert target["context"] == f"images/{entry.combination.folder}" and target["dockerfile"] == "Dockerfile"
        # the secrets and network are build_request's: the pip.conf, the uv.toml and the CA bundle, never in a layer
        assert target["secret"] == [
            "id=pipconf,src=.bake/pip.conf",
            "id=uvconf,src=.bake/uv.toml",
            "id=cacert,src=ca.pem",
        ]
        assert target["network"] == "host"
        # the Dockerfile's labels and the build's own (`--label` of `build`): the same labels in every build path
        assert target["labels"] == entry.image.label_map() | dict(entry.request.labels)
        assert dict(entry.request.labels)["org.opencontainers.image.created"] == "2026-11-29T00:00:00Z"
        assert "cache-from" not in target and "cache-to" not in target


def test_groups_per_combination_torch_minor_flavor_and_default(selected: list[plan.Selected]) -> None:
    groups = {k: v["targets"] for k, v in bake.bake_file(entries(selected))["group"].items()}
    assert groups["2_13_0-cpu-py3_11-debian12"] == ["2_13_0-cpu-runtime", "2_13_0-cpu-devel"]  # runtime first
    assert groups["torch-2_7"] == ["2_7_0-cuda11_8-cudnn9-runtime", "2_7_0-cuda11_8-cudnn9-devel"]
    assert groups["runtime"] == [
        "2_7_0-cuda11_8-cudnn9-runtime",
        "2_13_0-cpu-runtime",
        "2_14_1-cuda13_0-cudnn9-runtime",
    ]
    assert groups["devel"] == ["2_7_0-cuda11_8-cudnn9-devel", "2_13_0-cpu-devel"]
    assert sorted(groups["default"]) == sorted(bake.target_name(i) for s in selected for i in s.images)


def test_a_devel_target_builds_in_the_same_bake_as_its_runtime(selected: list[plan.Selected]) -> None:
    """devel FROM runtime: the same Dockerfile and context, one combination group, runtime listed first."""
    definition = bake.bake_file(entries(selected))
    cpu = next(s.combination for s in selected if s.combination.devel_from == "runtime")
    runtime, devel = (definition["target"][bake.target_name(cpu.image(f))] for f in ("runtime", "devel"))
    assert (runtime["context"], runtime["dockerfile"]) == (devel["context"], devel["dockerfile"])
    group = definition["group"][cpu.folder.replace(".", "_")]["targets"]
    assert group.index(bake.target_name(cpu.image("runtime"))) < group.index(bake.target_name(cpu.image("devel")))


def test_cache_settings_only_when_given_with_the_tag_or_target_name(selected: list[plan.Selected]) -> None:
    cache = bake.Cache(("type=registry,ref=reg.example/cache:{target}", "reg.example/pytorch:{tag}"), ("type=inline",))
    definition = bake.bake_file(entries(selected), cache)
    target = definition["target"]["2_13_0-cpu-devel"]
    assert target["cache-from"] == [
        "type=registry,ref=reg.example/cache:2_13_0-cpu-devel",
        "reg.example/pytorch:2.13.0-cpu-devel",
    ]
    assert target["cache-to"] == ["type=inline"]
    assert "cache-from" not in bake.bake_file(entries(selected))["target"]["2_13_0-cpu-devel"]


def test_the_bake_reference_is_stable_and_differs_per_input_digest(selected: list[plan.Selected]) -> None:
    combination = selected[0].combination
    runtime = combination.image("runtime")
    assert bake.bake_reference(combination, runtime) == bake.bake_reference(combination, runtime)
    other = dataclasses.replace(runtime, input_digest="sha256:" + "f" * 64)
    assert bake.bake_reference(combination, other) != bake.bake_reference(combination, runtime)


# --- metadata ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ("", "not JSON"),
        ("[1, 2]", "not a list"),
        ('"x"', "not a string"),
        ("null", "not null"),
        ("[" * 100_000, "nests lists and mappings deeper than 100 levels"),
        ("1" * 5000, "is not JSON this tool reads"),
    ],
)
def test_metadata_that_is_not_a_json_object_is_refused(text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        bake.read_metadata(text, "m.json")
    assert message in str(caught.value.problems[0]) and "m.json" in str(caught.value.problems[0])


def test_a_selected_image_without_a_metadata_entry_is_named(selected: list[plan.Selected]) -> None:
    runtime = selected[0].combination.image("runtime")
    metadata = {bake.target_name(runtime): {"containerimage.digest": "sha256:" + "a" * 64}}
    with pytest.raises(InputError) as caught:
        bake.baked_images(metadata, selected[:1], "m.json")
    (problem,) = caught.value.problems
    assert "no entry for bake target '2_7_0-cuda11_8-cudnn9-devel'" in str(problem)


def test_a_metadata_entry_gives_the_reference_and_digests(selected: list[plan.Selected]) -> None:
    combination = selected[0].combination
    devel, runtime = combination.image("devel"), combination.image("runtime")
    metadata = {
        bake.target_name(devel): {"containerimage.digest": "sha256:" + "a" * 64},  # docker driver: no image.name
        bake.target_name(runtime): {
            "image.name": "reg.example/torchimages-tmp/x:runtime-1,reg.example/other:1",
            "containerimage.config.digest": "sha256:" + "b" * 64,
            "containerimage.digest": "sha256:" + "c" * 64,
        },
    }
    found = bake.baked_images(metadata, selected[:1], "m.json")
    assert found[devel] == references.Baked(bake.bake_reference(combination, devel), ("sha256:" + "a" * 64,))
    assert found[runtime] == references.Baked(
        "reg.example/torchimages-tmp/x:runtime-1", ("sha256:" + "b" * 64, "sha256:" + "c" * 64)
    )


@pytest.mark.parametrize(
    "entry", [{"image.name": 3}, {"containerimage.digest": "md5:00"}, {"containerimage.digest": 1}]
)
def test_a_malformed_metadata_entry_is_refused(selected: list[plan.Selected], entry: object) -> None:
    metadata = {bake.target_name(i): entry for s in selected[:1] for i in s.images}
    with pytest.raises(InputError) as caught:
        bake.baked_images(metadata, selected[:1], "m.json")
    assert "malformed entry" in str(caught.value.problems[0])


@pytest.mark.parametrize(("entry", "kind"), [(None, "null"), ([], "a list"), ("sha256:" + "a" * 64, "a string")])
def test_an_entry_that_is_not_an_object_says_what_it_is(
    selected: list[plan.Selected], entry: object, kind: str
) -> None:
    metadata = {bake.target_name(i): entry for s in selected[:1] for i in s.images}
    with pytest.raises(InputError) as caught:
        bake.baked_images(metadata, selected[:1], "m.json")
    messages = [str(p) for p in caught.value.problems]
    assert all(f"its entry is {kind}, not an object of its build result" in m for m in messages), messages
    assert not any("no entry" in m for m in messages), "a null entry is there: it is not missing"


@pytest.mark.parametrize(
    ("reference", "temporary"),
    [
        ("torchimages-tmp/2.13.0-cpu-py3.11-debian12:runtime-1", True),
        ("reg.example:5000/team/torchimages-tmp/x:devel-2", True),
        ("torchimages-tmp/x@sha256:" + "a" * 64, True),
        ("torchimages/pytorch:2.13.0-cpu-runtime", False),
        ("torchimages-tmp:latest", False),
        ("evil-torchimages-tmp/x:1", False),
        ("torchimages/bootstrap-debian:12", False),
    ],
)
def test_only_temporary_references_count_as_temporary(reference: str, temporary: bool) -> None:
    assert references.is_temporary(reference) is temporary


# --- the commands: bad input exits 2 with the reason, before any engine is asked ---------------------


@pytest.fixture
def matrix_file(write_matrix: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TORCHIMAGES_INDEX_URL", "TORCHIMAGES_EXTRA_INDEX_URLS", "TORCHIMAGES_FIND_LINKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # an engine asked for would not answer
    return write_matrix(MATRIX)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "expected a JSON object of bake target -> build result, not a list"),
        (b"\xff\xfe garbage", "the bake metadata file (--from) is UTF-16 (little-endian)"),
        (b"{\xe9}", ":1: error: the bake metadata file (--from) is not UTF-8: byte 0xe9 at column 2"),
        (
            b"{\n\n" + b"[" * 100_000,
            ":3: error: the bake metadata file (--from) nests lists and mappings deeper than 100",
        ),
        (b'{"2_13_0-cpu-devel": null}', "target '2_13_0-cpu-devel': its entry is null, not an object"),
        (b"{}", "names no bake target of this plan's images"),
        (
            b'{"2_13_0-cpu-devel": {"containerimage.digest": "sha256:00"}}',
            "no entry for bake target '2_13_0-cpu-runtime'",
        ),
    ],
)
def test_promote_from_hostile_metadata_exits_2_with_the_reason(
    cli: Callable[..., tuple[int, str, str]], matrix_file: Path, tmp_path: Path, content: bytes, message: str
) -> None:
    metadata = tmp_path / "metadata.json"
    metadata.write_bytes(content)
    selectors = ["2.13.0-cpu"] if b"devel" in content else []
    code, _, err = cli("promote", "--matrix", str(matrix_file), "--from", str(metadata), *selectors)
    assert code == 2, err
    assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing.json", "cannot read the bake metadata file (--from): No such file or directory"),
        (".", "the bake metadata file (--from) must be a regular file, not a directory"),
        ("/dev/zero", "the bake metadata file (--from) must be a regular file, not a character device"),
    ],
)
def test_promote_from_a_missing_file_or_a_folder_exits_2(
    cli: Callable[..., tuple[int, str, str]], matrix_file: Path, tmp_path: Path, where: str, message: str
) -> None:
    code, _, err = cli("promote", "--matrix", str(matrix_file), "--from", str(tmp_path / where))
    assert code == 2 and message in err and "Traceback" not in err, err


def test_promote_needs_from(cli: Callable[..., tuple[int, str, str]], matrix_file: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        cli("promote", "--matrix", str(matrix_file))
    assert exited.value.code == 2


def test_bake_writes_the_file_and_the_pip_conf_and_uv_toml_secrets(
    cli: Callable[..., tuple[int, str, str]], matrix_file: Path, tmp_path: Path
) -> None:
    out, secrets = tmp_path / "bake.json", tmp_path / "secrets"
    code, _, err = cli(
        "bake", "--matrix", str(matrix_file), "--output", str(out), "--secrets-dir", str(secrets),
        "--extra-index-url", "https://mirror.example/simple", "--find-links", "http://172.17.0.1:8000/",
        "--trusted-host", "172.17.0.1", "2.13.0-cpu",
    )  # fmt: skip
    assert code == 0, err
    definition = json.loads(out.read_text())
    assert sorted(definition["target"]) == ["2_13_0-cpu-devel", "2_13_0-cpu-runtime"]
    pip_conf, uv_toml = sorted(secrets.iterdir())  # pip-<digest>.conf, uv-<digest>.toml
    assert pip_conf.name.startswith("pip-") and uv_toml.name.startswith("uv-") and uv_toml.suffix == ".toml"
    expected = [f"id=pipconf,src={pip_conf}", f"id=uvconf,src={uv_toml}"]
    assert definition["target"]["2_13_0-cpu-devel"]["secret"] == expected
    assert pip_conf.read_text() == (
        "[global]\nindex-url = https://pypi.org/simple\nextra-index-url = https://mirror.example/simple\n"
        "find-links = http://172.17.0.1:8000/\ntrusted-host = 172.17.0.1\n"
    )
    assert uv_toml.read_text() == (
        'index-url = "https://download.pytorch.org/whl/cpu"\n'
        'extra-index-url = ["https://mirror.example/simple"]\n'
        'find-links = ["http://172.17.0.1:8000/"]\n'
        'index-strategy = "unsafe-best-match"\n'
        'allow-insecure-host = ["172.17.0.1"]\n'
    )
    for secret in (pip_conf, uv_toml):
        assert secret.stat().st_mode & 0o077 == 0, f"{secret.name} may hold credentials: private"


def test_bake_refuses_a_local_wheel_folder(
    cli: Callable[..., tuple[int, str, str]], matrix_file: Path, tmp_path: Path
) -> None:
    code, out, err = cli("bake", "--matrix", str(matrix_file), "--find-links", str(tmp_path))
    assert code == 2 and out == ""
    assert "serves no wheel folder" in err and "pass its URL instead" in err


def test_a_pushing_bake_names_temporary_references_in_the_registry(selected: list[plan.Selected]) -> None:
    combination = selected[0].combination
    image = combination.image("devel")
    reference = bake.bake_reference(combination, image, "ghcr.io/team/")
    assert reference.startswith("ghcr.io/team/torchimages-tmp/") and references.is_temporary(reference)
    metadata: dict[str, dict[str, str]] = {bake.target_name(i): {} for i in combination.images}
    assert bake.baked_images(metadata, selected[:1], "m.json", "ghcr.io/team")[image].reference == reference


@pytest.mark.parametrize("named_contexts", [True, False])
def test_a_devel_target_starts_from_its_runtime_target(
    selected: list[plan.Selected], tmp_path: Path, named_contexts: bool
) -> None:
    """Issue 19: devel built on the runtime target's result (`contexts`), so buildx builds runtime once, with
    `no-cache` too; `--no-named-contexts` (builders on Docker 20.10) leaves them out."""
    options = requests.BuildOptions(images_dir=Path("images"), log_dir=Path("logs"), no_cache=True)
    request = bake.BakeRequest(
        options, WheelSources("https://pypi.example/simple"), secrets_dir=tmp_path, named_contexts=named_contexts
    )
    targets = bake.bake_file(bake.entries(selected, request))["target"]
    for s in selected:
        flavors = {image.flavor: bake.target_name(image) for image in s.images}
        assert "contexts" not in targets[flavors["runtime"]]
        if "devel" in flavors:
            expected = {"runtime": f"target:{flavors['runtime']}"} if named_contexts else None
            assert targets[flavors["devel"]].get("contexts") == expected


TWO_PLATFORMS = """\
repository: example/pytorch
matrix:
  include:
    - {torch: 2.9.1, cuda: cpu, os: debian12, torchvision: none, torchaudio: none,
       platforms: [linux/amd64, linux/arm64]}
"""


def test_a_combination_of_two_platforms_bakes_a_target_per_platform(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    """Each platform's target builds for that platform, with its own labels and wheel index, devel on the runtime
    of its platform; a group per architecture lets a native runner bake its own."""
    (chosen,) = plan.select(plan.load(write_matrix(TWO_PLATFORMS)), [])
    options = requests.BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    request = bake.BakeRequest(options, WheelSources(), secrets_dir=tmp_path / "secrets")
    found = bake.bake_file(bake.entries([chosen], request))
    targets, groups = found["target"], found["group"]
    assert sorted(targets) == [
        "2_9_1-cpu-devel-amd64",
        "2_9_1-cpu-devel-arm64",
        "2_9_1-cpu-runtime-amd64",
        "2_9_1-cpu-runtime-arm64",
    ]
    arm64 = chosen.combination.image("devel", "linux/arm64")
    devel = targets["2_9_1-cpu-devel-arm64"]
    assert devel["platforms"] == ["linux/arm64"] and devel["contexts"] == {"runtime": "target:2_9_1-cpu-runtime-arm64"}
    assert devel["labels"]["io.torchimages.input-digest"] == arm64.input_digest
    assert devel["labels"]["io.torchimages.platform"] == "linux/arm64"
    assert targets["2_9_1-cpu-devel-amd64"]["contexts"] == {"runtime": "target:2_9_1-cpu-runtime-amd64"}
    assert groups["arm64"]["targets"] == ["2_9_1-cpu-runtime-arm64", "2_9_1-cpu-devel-arm64"]
    uv = {name: Path(t["secret"][1].split("src=")[1]).read_text() for name, t in targets.items()}
    assert "https://pypi.org/simple" in uv["2_9_1-cpu-runtime-arm64"]
    assert "download.pytorch.org/whl/cpu" in uv["2_9_1-cpu-runtime-amd64"]


def test_a_bake_on_an_engine_that_keeps_attestations_asks_for_them_in_every_target(
    cli: Callable[..., tuple[int, str, str]], matrix_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: `bake` asks this machine's engine (cli.common.attestations, stubbed here as an engine on the
    containerd store that made its generator): every target attaches the SBOM by that generator and provenance
    mode=max; an engine that keeps none gets no `attest`, and says why."""
    from torchimages.cli import common
    from torchimages.engine import SbomAttestation

    generator = "torchimages.invalid/sbom-generator:0123456789abcdef0123"
    monkeypatch.setattr(common, "attestations", lambda: SbomAttestation(True, "a test's engine", generator))
    out = tmp_path / "bake.json"
    code, _, err = cli("bake", "--matrix", str(matrix_file), "--output", str(out), "2.13.0-cpu")
    assert code == 0, err
    assert "Attestations (SBOM, provenance): attached (a test's engine)" in err
    targets = json.loads(out.read_text())["target"]
    for target in targets.values():
        assert target["attest"] == [f"type=sbom,generator={generator}", "type=provenance,mode=max"]
    attested_digests = {t["labels"]["io.torchimages.build-digest"] for t in targets.values()}
    monkeypatch.setattr(common, "attestations", lambda: SbomAttestation(False, "the classic image store"))
    code, _, err = cli("bake", "--matrix", str(matrix_file), "--output", str(out), "2.13.0-cpu")
    assert code == 0 and "Attestations (SBOM, provenance): not attached: the classic image store" in err
    targets = json.loads(out.read_text())["target"]
    assert not [t for t in targets.values() if "attest" in t]
    # the build digest does not cover them (`outdated` asks no engine): build checks an up-to-date image's own
    assert attested_digests == {t["labels"]["io.torchimages.build-digest"] for t in targets.values()}
