"""Registry bases: names, mirrors, digest locks in the rendered FROM lines, end-of-life warnings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from torchimages import compat, reference, registry, render
from torchimages.planning import bases, plan
from torchimages.problems import InputError

Cli = Callable[..., tuple[int, str, str]]
# CUDA 12.6: its nvcc wheels hold only ptxas, so devel starts from an nvidia/cuda image, a second registry base.
UBUNTU = "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '12.6', os: ubuntu24.04}\n"
DEBIAN = "matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n"
OS_DIGEST = "sha256:" + "a" * 64
TOOLKIT_DIGEST = "sha256:" + "b" * 64
TOOLKIT = "nvidia/cuda:12.6.3-devel-ubuntu24.04"


def write_lock(matrix: Path, entries: dict[str, str]) -> Path:
    path = bases.lock_path(matrix)
    bases.write_locks(path, entries, matrix.name, None)
    return path


def dockerfile(loaded: plan.Plan) -> str:
    (text,) = render.dockerfiles(render.render_all(loaded.combinations, loaded.templates)).values()
    return text


@pytest.mark.parametrize(
    ("reference", "domain", "path", "tag", "digest"),
    [
        ("ubuntu:24.04", "docker.io", "library/ubuntu", "24.04", ""),
        ("nvidia/cuda:13.0.0-devel-ubuntu24.04", "docker.io", "nvidia/cuda", "13.0.0-devel-ubuntu24.04", ""),
        ("127.0.0.1:5000/library/ubuntu:24.04", "127.0.0.1:5000", "library/ubuntu", "24.04", ""),
        ("localhost/hub/ubuntu", "localhost", "hub/ubuntu", "latest", ""),
        (f"ubuntu:24.04@{OS_DIGEST}", "docker.io", "library/ubuntu", "24.04", OS_DIGEST),
        ("nvcr.io/nvidia/cuda:12.8.1-devel-ubuntu24.04", "nvcr.io", "nvidia/cuda", "12.8.1-devel-ubuntu24.04", ""),
    ],
)
def test_references_are_split_as_docker_normalises_them(
    reference: str, domain: str, path: str, tag: str, digest: str
) -> None:
    assert registry.parse(reference) == registry.Reference(domain, path, tag, digest)


def test_loopback_registries_are_spoken_to_over_http() -> None:
    assert registry.scheme("127.0.0.1:5000") == "http"
    assert registry.scheme("localhost:5000") == "http"
    assert registry.scheme("registry-1.docker.io") == "https"
    url = registry.manifest_url(registry.parse("ubuntu:24.04"))
    assert url == "https://registry-1.docker.io/v2/library/ubuntu/manifests/24.04"


@pytest.mark.parametrize(
    ("name", "mirror", "pulled"),
    [
        ("ubuntu:24.04", "mirror.example.com/hub", "mirror.example.com/hub/library/ubuntu:24.04"),
        ("ubuntu:24.04", "127.0.0.1:5000", "127.0.0.1:5000/library/ubuntu:24.04"),
        (TOOLKIT, "mirror.example.com/hub", f"mirror.example.com/hub/{TOOLKIT}"),
        (
            "nvcr.io/nvidia/cuda:13.0.0-base-ubuntu24.04",
            "m.example.com",
            "m.example.com/nvidia/cuda:13.0.0-base-ubuntu24.04",
        ),
        ("ubuntu:24.04", None, "ubuntu:24.04"),
    ],
)
def test_a_mirror_keeps_the_full_docker_hub_path(name: str, mirror: str | None, pulled: str) -> None:
    assert bases.mirrored(name, mirror) == pulled


@pytest.mark.parametrize(
    ("mirror", "complaint"),
    [
        ("https://mirror.example.com", "without a scheme"),
        ("mirror", "not a registry host"),
        ("mirror.example.com/Hub", "prefix component 'Hub'"),
        ("mirror.example.com:99999", "port"),
        ("mirror.example.com/hub@sha256:00", "no digest"),
        ("mirror .example.com", "without spaces"),
    ],
)
def test_a_bad_mirror_is_refused_with_the_rule(mirror: str, complaint: str) -> None:
    problem = reference.mirror_problem(mirror)
    assert problem is not None and complaint in problem


def test_good_mirrors_pass() -> None:
    for mirror in ("127.0.0.1:5000", "mirror.example.com/a/docker-hub", "localhost:5000/x"):
        assert reference.mirror_problem(mirror) is None, mirror


def test_locked_bases_are_pulled_by_digest_and_change_the_input_digest(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(UBUNTU)
    unlocked = plan.load(path)
    write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    locked = plan.load(path)
    text = dockerfile(locked)
    assert f"FROM ubuntu:24.04@{OS_DIGEST} AS runtime" in text
    assert f"FROM {TOOLKIT}@{TOOLKIT_DIGEST} AS devel" in text
    (combination,) = locked.combinations
    assert not any("not locked" in w.message for w in combination.warnings)
    before = {i.flavor: i.input_digest for i in unlocked.combinations[0].images}
    after = {i.flavor: i.input_digest for i in combination.images}
    assert before["runtime"] != after["runtime"] and before["devel"] != after["devel"]


def test_a_mirror_rewrites_registry_bases_and_keeps_the_digest(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("base_registry: mirror.example.com/hub\n" + UBUNTU)
    write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    text = dockerfile(plan.load(path))
    assert f"FROM mirror.example.com/hub/library/ubuntu:24.04@{OS_DIGEST} AS runtime" in text
    assert f"FROM mirror.example.com/hub/{TOOLKIT}@{TOOLKIT_DIGEST} AS devel" in text
    overridden = dockerfile(plan.load(path, base_registry="127.0.0.1:5000"))
    assert f"FROM 127.0.0.1:5000/library/ubuntu:24.04@{OS_DIGEST} AS runtime" in overridden


def test_bootstrapped_bases_are_never_rewritten(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(DEBIAN)
    loaded = plan.load(path, base_registry="mirror.example.com/hub")
    assert "FROM torchimages/bootstrap-debian:12 AS runtime" in dockerfile(loaded)
    assert loaded.combinations[0].registry_bases == ()
    assert not loaded.all_warnings()


def test_a_missing_lock_is_one_warning_with_the_command(write_matrix: Callable[[str], Path]) -> None:
    loaded = plan.load(write_matrix(UBUNTU))
    (warning,) = [w for w in loaded.all_warnings() if "not locked" in w.message]
    assert "matrix.bases.lock does not exist" in str(warning)
    assert "python build.py lock --bases" in str(warning)
    assert "FROM ubuntu:24.04 AS runtime" in dockerfile(loaded)


def test_required_locks_make_a_missing_entry_an_error(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix("require_locked_bases: true\n" + UBUNTU)
    write_lock(path, {"ubuntu:24.04": OS_DIGEST})
    code, _, err = cli("render", "--matrix", str(path))
    assert code == 2, err
    assert (
        f"error: os: registry bases are not locked to a digest: matrix.bases.lock has no entry for them ({TOOLKIT})"
        in err
    )
    assert "python build.py lock --bases" in err
    assert not (path.parent / "images").exists()


def test_a_lock_entry_no_base_uses_is_a_stale_warning(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(UBUNTU)
    write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST, "ubuntu:22.04": OS_DIGEST})
    (warning,) = plan.load(path).warnings
    assert "stale entries for bases no combination uses: ubuntu:22.04" in str(warning)


def test_a_malformed_lock_is_refused_with_the_fix(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(UBUNTU)
    bases.lock_path(path).write_text("bases:\n  ubuntu:24.04: latest\n")
    with pytest.raises(InputError) as caught:
        plan.load(path)
    assert "'latest' is not a sha256:<64 hex> digest" in str(caught.value)
    code, _, err = cli("validate", "--matrix", str(path))
    assert code == 2 and "lock --bases" in err


def test_a_bad_base_registry_exits_2(
    cli: Cli, write_matrix: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matrix(UBUNTU)
    with pytest.raises(SystemExit) as refused:  # argparse refuses it, before the matrix is read
        cli("render", "--matrix", str(path), "--base-registry", "https://mirror.example.com")
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "argument --base-registry: 'https://mirror.example.com': name a registry as HOST[:PORT][/PREFIX], " in err
    assert "without a scheme" in err
    path.write_text("base_registry: mirror\nrequire_locked_bases: maybe\n" + UBUNTU)
    code, _, err = cli("validate", "--matrix", str(path))
    assert code == 2
    assert "matrix.yaml:1: error: base_registry: 'mirror' is not a registry host" in err
    assert "matrix.yaml:2: error: require_locked_bases: must be true or false" in err


def test_an_end_of_life_base_warns_with_replacement_and_source(write_matrix: Callable[[str], Path]) -> None:
    loaded = plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n"))
    (warning,) = [w for w in loaded.all_warnings() if "end-of-life" in w.message]
    text = str(warning)
    assert "base nvidia/cuda:11.8.0-* is end-of-life and will be removed" in text
    assert "(sources: NVIMG, COG)" in text
    assert "use a CUDA 12.6 or newer build" in text


def test_a_supported_base_gives_no_end_of_life_warning(write_matrix: Callable[[str], Path]) -> None:
    loaded = plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.7.1, cuda: '12.6'}\n"))
    assert not [w for w in loaded.all_warnings() if "end-of-life" in w.message]


def test_end_of_life_facts_name_their_sources() -> None:
    kb = compat.load()
    assert kb.base_image_eol, "the knowledge base marks nvidia/cuda tags NVIDIA removes"
    for entry in kb.base_image_eol:
        assert entry.sources and all(s in kb.sources for s in entry.sources)
    raw = {"image": "x:*", "status": "gone", "reason": "r", "replacement": "y"}
    with pytest.raises(ValueError, match="name its sources"):
        compat._eol(raw, kb.sources)
    with pytest.raises(ValueError, match="status is gone or going"):
        compat._eol({**raw, "status": "old", "sources": ["NVIMG"]}, kb.sources)


# --- `lock --bases --check`: the registry's digests against the locked ones ----------------------------------

SERVED_DIGEST = "sha256:" + "c" * 64


@pytest.fixture
def serving(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """What the registry serves: base name -> digest (a base not named: the registry says it is unknown)."""
    served: dict[str, str] = {}

    def resolve_digest(name: str) -> str:
        if name not in served:
            raise registry.RegistryError(f"{name}: manifest unknown")
        return served[name]

    monkeypatch.setattr(registry, "resolve_digest", resolve_digest)
    return served


def test_lock_check_passes_when_the_registry_serves_the_locked_digests(
    cli: Cli, write_matrix: Callable[[str], Path], serving: dict[str, str]
) -> None:
    path = write_matrix(UBUNTU)
    lock = write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    before = lock.read_text()
    serving.update({"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    code, out, err = cli("lock", "--bases", "--check", "--matrix", str(path))
    assert (code, err) == (0, "") and "2 bases up to date" in out
    assert lock.read_text() == before


def test_lock_check_fails_naming_both_digests_when_the_registry_serves_another(
    cli: Cli, write_matrix: Callable[[str], Path], serving: dict[str, str]
) -> None:
    path = write_matrix(UBUNTU)
    lock = write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    before = lock.read_text()
    serving.update({"ubuntu:24.04": OS_DIGEST, TOOLKIT: SERVED_DIGEST})
    code, _, err = cli("lock", "--bases", "--check", "--matrix", str(path))
    assert code == 1
    assert f"stale: {TOOLKIT}: locked {TOOLKIT_DIGEST}, the registry serves {SERVED_DIGEST}" in err
    assert "ubuntu:24.04" not in err and "lock --bases" in err
    assert lock.read_text() == before, "--check writes nothing"


def test_lock_check_fails_for_a_base_the_lock_lacks_or_the_registry_cannot_say(
    cli: Cli, write_matrix: Callable[[str], Path], serving: dict[str, str]
) -> None:
    path = write_matrix(UBUNTU)
    write_lock(path, {"ubuntu:24.04": OS_DIGEST})
    serving.update({"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    code, _, err = cli("lock", "--bases", "--check", "--matrix", str(path))
    assert code == 1 and f"stale: {TOOLKIT}: locked nothing, the registry serves {TOOLKIT_DIGEST}" in err
    write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    del serving[TOOLKIT]
    code, _, err = cli("lock", "--bases", "--check", "--matrix", str(path))
    assert code == 1 and f"{TOOLKIT}: manifest unknown" in err


BASE_NAME, BASE_DIGEST = "org.opencontainers.image.base.name", "org.opencontainers.image.base.digest"


def test_each_image_names_its_registry_base_and_its_locked_digest(write_matrix: Callable[[str], Path]) -> None:
    """runtime: the OS base; devel on an nvidia/cuda image: that image; by their full names, not the mirror's, with
    the digest of the lock; a label of the Dockerfile, which leaves the input digest as the lock made it."""
    path = write_matrix("base_registry: mirror.example.com/hub\n" + UBUNTU)
    unlocked = {i.flavor: i.label_map() for i in plan.load(path).combinations[0].images}
    assert (unlocked["runtime"][BASE_NAME], BASE_DIGEST in unlocked["runtime"]) == (
        "docker.io/library/ubuntu:24.04",
        False,
    )
    assert unlocked["devel"][BASE_NAME] == f"docker.io/{TOOLKIT}"
    write_lock(path, {"ubuntu:24.04": OS_DIGEST, TOOLKIT: TOOLKIT_DIGEST})
    (combination,) = plan.load(path).combinations
    runtime, devel = combination.image("runtime").label_map(), combination.image("devel").label_map()
    assert (runtime[BASE_NAME], runtime[BASE_DIGEST]) == ("docker.io/library/ubuntu:24.04", OS_DIGEST)
    assert (devel[BASE_NAME], devel[BASE_DIGEST]) == (f"docker.io/{TOOLKIT}", TOOLKIT_DIGEST)
    text = dockerfile(plan.load(path))
    assert f'org.opencontainers.image.base.digest="{OS_DIGEST}"' in text
    assert f'org.opencontainers.image.base.digest="{TOOLKIT_DIGEST}"' in text


def test_a_devel_on_runtime_names_the_os_base_and_a_bootstrapped_base_is_named_by_its_own_labels(
    write_matrix: Callable[[str], Path],
) -> None:
    cpu = write_matrix("matrix:\n  include:\n    - {torch: 2.13.0, cuda: cpu, os: ubuntu24.04}\n")
    write_lock(cpu, {"ubuntu:24.04": OS_DIGEST})
    (combination,) = plan.load(cpu).combinations
    assert combination.devel_from == "runtime"
    for flavor in ("runtime", "devel"):
        labels = combination.image(flavor).label_map()
        assert (labels[BASE_NAME], labels[BASE_DIGEST]) == ("docker.io/library/ubuntu:24.04", OS_DIGEST)
    (debian,) = plan.load(write_matrix(DEBIAN)).combinations  # a local image: no name of a registry's, no digest
    assert not [k for i in debian.images for k in i.label_map() if k.startswith("org.opencontainers.image.base.")]
