"""What every test starts from: SIGINT as at a terminal.

The tests stand for a user at a terminal, where Ctrl-C stops the tool. A CI wrapper or a background job
(`make test &` in a script) may start pytest with SIGINT ignored; every tool process the tests start would
inherit that and keep it, as the convention is (torchimages/stopping.py), and the tool imported in-process
would record it. So it is put back here, before any module of the tool is imported. The tests of a tool
started with SIGINT ignored (tests/unit/cli/test_signals.py, the escalation) start it so themselves.
"""

from __future__ import annotations

import signal

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import pytest

from tests import scheduling, timing


def pytest_configure(config: pytest.Config) -> None:
    timing.register(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    scheduling.arrange(items)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> scheduling.GroupScheduling:
    """With `-n N`: one group of tests (tests/scheduling.py) to a worker at a time."""
    return scheduling.GroupScheduling(config, log)
