"""The one fake engine stays whole: every method of the Engine protocol, and every public method of
DockerEngine the code calls, with the same parameters. A method added to either fails here until the fake
has it too."""

from __future__ import annotations

import inspect

import pytest

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
