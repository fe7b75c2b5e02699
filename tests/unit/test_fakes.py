"""The test helpers stay whole: the one fake engine has every method of the Engine protocol and every public
method of DockerEngine, with the same parameters (a method added to either fails here until the fake has it
too); the golden helper says how to rewrite a golden and rewrites only when asked."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tests import golden
from tests.fakes import FakeEngine
from torchimages.engine import DockerEngine, Engine


def methods(cls: type) -> dict[str, inspect.Signature]:
    """The public methods a class defines itself (not object's), with their signatures."""
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


def parameters(signature: inspect.Signature) -> list[tuple[str, inspect._ParameterKind]]:
    return [(p.name, p.kind) for p in signature.parameters.values()]


@pytest.mark.parametrize("source", [Engine, DockerEngine], ids=["Engine protocol", "DockerEngine"])
def test_the_fake_has_every_method_with_the_same_parameters(source: type) -> None:
    wanted, fake = methods(source), methods(FakeEngine)
    assert wanted, f"found no methods on {source.__name__}"
    missing = sorted(set(wanted) - set(fake))
    assert not missing, f"tests/fakes.py FakeEngine lacks {missing} of {source.__name__}"
    differ = {n: (str(wanted[n]), str(fake[n])) for n in wanted if parameters(wanted[n]) != parameters(fake[n])}
    assert not differ, f"FakeEngine's parameters differ from {source.__name__}'s: {differ}"


def test_the_fake_is_an_engine_to_the_type_checker() -> None:
    engine: Engine = FakeEngine()  # mypy checks tests: a method missing or mistyped fails `make lint`
    assert engine.answers()


def test_the_golden_helper_says_how_to_rewrite_and_rewrites_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "g.txt"
    path.write_text("one\ntwo\n")
    monkeypatch.delenv(golden.UPDATE_ENV, raising=False)
    golden.check(path, "one\ntwo\n")
    with pytest.raises(AssertionError) as caught:
        golden.check(path, "one\nthree\n")
    message = str(caught.value)
    assert "g.txt differs" in message and "UPDATE_GOLDEN=1 .venv/bin/python -m pytest" in message
    assert message.splitlines()[-2:] == ["-two", "+three"] and path.read_text() == "one\ntwo\n"
    with pytest.raises(AssertionError, match="is missing"):
        golden.check(tmp_path / "none.txt", "x")
    monkeypatch.setenv(golden.UPDATE_ENV, "1")
    golden.check(path, "one\nthree\n")
    assert path.read_text() == "one\nthree\n"
