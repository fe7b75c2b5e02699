"""What every test starts from: SIGINT as at a terminal.

The tests stand for a user at a terminal, where Ctrl-C stops the tool. A CI wrapper or a background job
(`make test &` in a script) may start pytest with SIGINT ignored; every tool process the tests start would
inherit that and keep it, as the convention is (torchimages/stopping.py), and the tool imported in-process
would record it. So it is put back here, before any module of the tool is imported. The tests of a tool
started with SIGINT ignored (tests/unit/cli/test_signals.py, the escalation) start it so themselves.
"""

from __future__ import annotations

import os
import signal

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest
from hypothesis import settings as hypothesis_settings

from tests import scheduling, timing

# CI (.ci/run runs with CI=true): the property tests draw the same examples every run, so that a red CI is the
# change's, never a new seed's; every other run (a developer's, `make mutants`' whole-suite start) draws new ones, and
# an example found failing there becomes an @example of its test (docs/reliability.md).
hypothesis_settings.register_profile("ci", derandomize=True)
if os.environ.get("CI") == "true":
    hypothesis_settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    timing.register(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    scheduling.arrange(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> scheduling.GroupScheduling:
    """With `-n N`: one group of tests (tests/scheduling.py) to a worker at a time."""
    return scheduling.GroupScheduling(config, log)
