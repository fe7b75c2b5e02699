"""One runtime per build whatever the cache (issue 19): runtime is built first, and devel is built on exactly
that runtime image (a named build context), so the two share every runtime layer with `--no-cache` too.

Against the fake engine: its builds record their requests, and an image built on a named context gets that
image's layers first (tests/fakes.py). Break the rule in builder.py (build devel without the context, or
devel first) and the first tests fail.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fakes import FakeEngine
from tests.unit.building.test_builder import CPU_HOLDS, CPU_MATRIX, MATRIX, labels_of_a_build, run, true_facts
from torchimages.building import builder
from torchimages.building.builder import Builder
from torchimages.building.references import TEMP_REPOSITORY
from torchimages.building.requests import BuildOptions
from torchimages.engine import BuildRequest
from torchimages.planning import plan


@pytest.fixture
def selection(write_matrix: Callable[[str], Path]) -> list[plan.Selected]:
    return plan.select(plan.load(write_matrix(MATRIX)), [])[:1]


def contexts(request: BuildRequest) -> dict[str, str]:
    return dict(request.contexts)


@pytest.mark.parametrize(("no_cache", "jobs"), [(False, 1), (True, 1), (True, 2)])
def test_devel_is_built_on_the_runtime_image_just_built(
    selection: list[plan.Selected], tmp_path: Path, no_cache: bool, jobs: int
) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    outcomes = run(engine, selection, tmp_path, no_cache=no_cache, jobs=jobs)
    assert [o.status for o in outcomes] == ["built", "built"]
    runtime, devel = engine.built
    assert (runtime.target, devel.target) == ("runtime", "devel")
    assert contexts(runtime) == {}
    (held,) = engine.held  # the runtime image, under a second temporary name until devel is built
    assert held.startswith(TEMP_REPOSITORY + "/") and contexts(devel) == {"runtime": f"docker-image://{held}"}
    assert engine.ids.get(held) == engine.ids.get(runtime.reference)
    assert engine.temporary() == []  # both temporary names gone


def test_an_up_to_date_runtime_is_what_devel_is_built_on(selection: list[plan.Selected], tmp_path: Path) -> None:
    """runtime skipped (its input digest unchanged): devel starts from the runtime image that carries the tag."""
    engine = FakeEngine(true_facts(selection[0].combination))
    runtime = selection[0].combination.image("runtime")
    engine.images[runtime.reference] = labels_of_a_build(selection, tmp_path, true_facts(selection[0].combination))[
        runtime.reference
    ]
    engine.layers[runtime.reference] = ("base", "venv")
    outcomes = run(engine, selection, tmp_path)
    assert [o.status for o in outcomes] == ["built", "skipped"]
    (devel,) = engine.built
    assert devel.target == "devel" and contexts(devel) == {"runtime": f"docker-image://{engine.held[0]}"}
    assert engine.layers[devel.reference][:2] == ("base", "venv")
    assert engine.temporary() == []


def test_a_devel_not_built_on_its_runtime_is_not_tagged(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    """devel FROM runtime (a CPU combination) but the engine ignored the context (runtime's layers are not
    devel's first): devel fails, untagged."""
    selection = plan.select(plan.load(write_matrix(CPU_MATRIX)), [])
    assert selection[0].combination.devel_from == "runtime"
    engine = FakeEngine(CPU_HOLDS)
    engine.ignores_contexts = True
    devel, runtime = run(engine, selection, tmp_path)
    assert (devel.status, runtime.status) == ("failed", "built")
    assert "is not built on" in devel.detail and "runtime's layers are not its first" in devel.detail
    assert [(r.target, r.no_cache) for r in engine.built] == [("runtime", False), ("devel", False), ("devel", True)]
    assert all("devel" not in name for name in engine.tagged)
    assert engine.temporary() == []


def test_when_runtime_does_not_build_devel_is_not_built(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination), build_status=1)
    devel, runtime = run(engine, selection, tmp_path)
    assert (devel.status, runtime.status) == ("failed", "failed")
    assert (
        devel.detail == f"not built: devel is built on its runtime image, and the build of {runtime.image.tag} failed"
    )
    assert [r.target for r in engine.built] == ["runtime"] and engine.temporary() == []


def test_a_runtime_that_fails_verification_still_carries_a_verified_devel(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    """runtime built but refused (its smoke gate): devel is built on it all the same and verified on its own."""
    engine = FakeEngine(true_facts(selection[0].combination))
    gate: builder.SmokeGate = lambda c, image, ref, facts, start: ["runtime only"] if image.flavor == "runtime" else []  # noqa: E731
    devel, runtime = run(engine, selection, tmp_path, gate)
    assert (devel.status, runtime.status) == ("built", "failed")
    assert contexts(engine.built[1]) == {"runtime": f"docker-image://{engine.held[0]}"}
    assert len(engine.probed) == 2 and engine.temporary() == []


def test_an_engine_without_named_contexts_builds_devel_alone_and_says_so(
    selection: list[plan.Selected], tmp_path: Path
) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    engine.takes_contexts = False
    said: list[str] = []
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    outcomes = Builder(engine, opts, out=said.append).build(selection)
    assert [o.status for o in outcomes] == ["built", "built"]
    assert [contexts(r) for r in engine.built] == [{}, {}] and engine.held == []
    assert sum(builder.NO_NAMED_CONTEXTS in line for line in said) == 1


def test_an_interrupt_during_runtime_starts_no_devel(selection: list[plan.Selected], tmp_path: Path) -> None:
    engine = FakeEngine(true_facts(selection[0].combination))
    cancelled = threading.Event()
    engine.on_build = lambda request: cancelled.set()
    devel, runtime = run(engine, selection, tmp_path, cancelled=cancelled)
    assert (devel.status, runtime.status) == ("interrupted", "interrupted")
    assert devel.detail == "not started" and len(engine.built) == 1 and engine.temporary() == []


def test_a_devel_from_a_cache_of_another_runtime_is_built_again_without_the_cache(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    """BuildKit served devel's steps from a cache made on another runtime image (its layers not runtime's):
    devel is built once more with --no-cache, and then it is on its runtime and tagged."""
    selection = plan.select(plan.load(write_matrix(CPU_MATRIX)), [])
    engine = FakeEngine(CPU_HOLDS)

    def stale_cache_once(request: BuildRequest) -> None:
        engine.ignores_contexts = request.target == "devel" and not request.no_cache

    engine.on_build = stale_cache_once
    devel, runtime = run(engine, selection, tmp_path)
    assert (devel.status, runtime.status) == ("built", "built")
    assert [(r.target, r.no_cache) for r in engine.built] == [("runtime", False), ("devel", False), ("devel", True)]
    assert engine.layers[devel.image.reference][:1] == engine.layers[runtime.image.reference]


def bootstrapped_selection(write_matrix: Callable[[str], Path]) -> tuple[list[plan.Selected], FakeEngine]:
    """MATRIX's first combination (Ubuntu 22.04) under `--bases bootstrap`, on an engine that holds its base."""
    from torchimages.building import bootstrap

    selected = plan.select(plan.load(write_matrix(MATRIX), os_bases="bootstrap"), [])[:1]
    os = selected[0].combination.os
    engine = FakeEngine(true_facts(selected[0].combination))
    engine.images["torchimages/bootstrap-ubuntu:22.04"] = {bootstrap.DIGEST_LABEL: bootstrap.digest(os, None)}
    return selected, engine


def test_under_bootstrap_every_build_maps_the_os_base_and_says_so(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    selected, engine = bootstrapped_selection(write_matrix)
    outcomes = run(engine, selected, tmp_path)
    assert [o.status for o in outcomes] == ["built", "built"]
    mapped = {"ubuntu:22.04": "docker-image://torchimages/bootstrap-ubuntu:22.04"}
    runtime, devel = engine.built
    assert contexts(runtime) == mapped and contexts(devel) == {**mapped, "runtime": f"docker-image://{engine.held[0]}"}
    assert ("io.torchimages.bases", "bootstrap") in runtime.labels
    assert ("org.opencontainers.image.base.name", "torchimages/bootstrap-ubuntu:22.04") in runtime.labels
    assert ("io.torchimages.bases", "bootstrap") in devel.labels  # on the nvidia/cuda image: base.name is that
    assert not any(key == "org.opencontainers.image.base.name" for key, _ in devel.labels)


def test_under_bootstrap_an_engine_without_named_contexts_builds_nothing(
    write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    from torchimages.problems import InputError

    selected, engine = bootstrapped_selection(write_matrix)
    engine.takes_contexts = False
    opts = BuildOptions(images_dir=tmp_path / "images", log_dir=tmp_path / "logs")
    with pytest.raises(InputError, match="--bases bootstrap maps the Dockerfile's FROM"):
        Builder(engine, opts, out=lambda _: None).build(selected)
    assert engine.built == [] and not (tmp_path / "logs").exists()
