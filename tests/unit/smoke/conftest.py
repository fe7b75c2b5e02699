"""The smoke suites' markers (cpu, gpu, ...), so that a unit test may import a suite module and run its test
functions on facts written out (--strict-markers refuses an unknown marker at import)."""

from __future__ import annotations

import pytest

from torchimages.smoke.plugin import MARKERS


def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
