"""The command table: one frozen row per command, its options and its run() from the command's module."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from torchimages.cli import (
    bake,
    build,
    cache,
    doctor,
    join,
    kb,
    lock,
    outdated,
    plan,
    promote,
    render,
    test,
    validate,
    verify_signature,
    workflow,
)
from torchimages.cli import list as list_command
from torchimages.cli import settings as settings_command


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, help, options and what it runs; `common`: it takes the matrix options;
    `bases_option`: among them `--bases` (lock's `--bases` is its own: TORCHIMAGES_BASES says it there)."""

    name: str
    help: str
    options: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    common: bool = True
    bases_option: bool = True


def _row(module: ModuleType, common: bool = True, bases_option: bool = True) -> Command:
    return Command(module.NAME, module.HELP, module.options, module.run, common, bases_option)


COMMANDS = (
    _row(validate),
    _row(list_command),
    _row(render),
    _row(plan),
    _row(build),
    _row(test),
    _row(bake),
    _row(promote),
    _row(join),
    _row(lock, bases_option=False),
    _row(outdated),
    _row(doctor),
    _row(workflow),
    _row(verify_signature, common=False),
    _row(settings_command, common=False),
    _row(cache, common=False),
    _row(kb, common=False),
)
