"""The parser built from the command table, and main(): the exit statuses, the error messages, and a
standard output whose failures (a reader gone, a full disk) are told from the others."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO, cast

from torchimages import (
    __version__,
    settings,
    stopping,  # records the signal dispositions the tool inherited (before any handler is installed)
    values,
)
from torchimages.cli import PROG, options
from torchimages.cli.commands import COMMANDS
from torchimages.cli.common import EXIT_BROKEN_PIPE, EXIT_USAGE, UsageError
from torchimages.problems import InputError, distinct, escaped, shown

DESCRIPTION = "Build, verify and test PyTorch/CUDA images."


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser (its sub-commands' too) whose refusals never say a URL's login: argparse echoes what it
    refuses (`unrecognized arguments: --mirror http://USER:PASSWORD@...`)."""

    def error(self, message: str) -> NoReturn:
        super().error(values.hide_logins(message))


def parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, from the command table; `prog` names the command as invoked."""
    top = _Parser(prog=prog or PROG, description=DESCRIPTION)
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    top.set_defaults(prog=top.prog)  # the command as invoked, for the messages that name another command
    sub = top.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        p = sub.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            epilog=settings.epilog(command.name, top.prog),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if command.common:
            options.common(p, bases=command.bases_option)
        command.options(p)
        p.set_defaults(run=command.run)
    return top


class _Output:
    """A standard stream that escapes what no line of text holds (problems.escaped: an escape sequence, a
    carriage return, a surrogate of an undecodable byte; a newline and a tab pass), whatever printed it: the
    last guard behind `shown` at each place text from outside is printed. It remembers whether writing to it
    failed (so that error is told from others). `unescaped` is the stream itself, for the one writer that
    draws with escape sequences (the live progress view, which escapes its own text)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.failed = False

    @property
    def unescaped(self) -> TextIO:
        return self.stream

    def write(self, text: str) -> int:
        try:
            self.stream.write(escaped(text, keep="\n\t"))
        except OSError:
            self.failed = True
            raise
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError:
            self.failed = True
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _silence(stream: TextIO) -> None:
    """Point a standard stream at /dev/null so the interpreter's own flush at exit finds nothing to fail on."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor (captured in tests)
        pass


def _closed_stderr_to_devnull() -> None:
    """Started with stderr closed (`2>&-`): Python's `print(file=None)` would write to stdout, and the first
    file opened would take descriptor 2, so children (docker, pytest) would write into it. Put /dev/null on
    descriptor 2 instead: warnings and errors are dropped (the exit status still tells), stdout stays what
    the command promises."""
    if sys.stderr is not None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != 2:
        os.dup2(devnull, 2)
        os.close(devnull)
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - lives as long as the process


def _run(args: argparse.Namespace) -> int:
    """Run the chosen command; bad input, settings and usage print their message (exit status 2)."""
    from torchimages.engine import EngineError  # no SDK import: the engine imports docker only when connecting

    try:
        options.apply_settings(args)
        code = int(args.run(args))
    except InputError as exc:
        for problem in distinct(exc.problems):
            print(problem, file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, settings.SettingError, values.BadValue, EngineError, FileNotFoundError) as exc:
        print(shown(f"error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.flush()  # a closed or full stdout fails here, where main catches it, not at exit
    return code


def _stopped(command: str, stop: stopping.Stopped) -> int:
    """Say in one line on standard error what a signal stopped; 128 + N. When threads that only wait on the
    network are still running (a registry query of `lock --bases` or the doctor), the process ends at once
    rather than waiting for their answers: everything the main thread writes is whole or removed by now."""
    status = stopping.say(command, stop)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(status)
    return status


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """Run one command; exit status 0 ok, 1 a check/build/test failed, 2 bad input or usage, 141 reader gone,
    128+N stopped by signal N (130 SIGINT: Ctrl-C, 143 SIGTERM), said in one line, nothing half-written.
    `prog`: the command as invoked (default: `torchimages`, the console script)."""
    _closed_stderr_to_devnull()
    handlers = stopping.install()
    real_stderr = sys.stderr
    sys.stderr = cast(TextIO, _Output(real_stderr))
    args: argparse.Namespace | None = None
    try:
        args = parser(prog).parse_args(argv)
        return _main(args)
    except (stopping.Stopped, KeyboardInterrupt) as exc:
        stop = exc if isinstance(exc, stopping.Stopped) else stopping.Stopped(signal.SIGINT)
        return _stopped(f"{args.prog} {args.command}" if args else prog or PROG, stop)
    finally:
        sys.stderr = real_stderr
        stopping.restore(handlers)


def _main(args: argparse.Namespace) -> int:
    """Run the parsed command with a standard output whose failures are told from the others."""
    if sys.stdout is None:  # started with stdout closed (`>&-`): the output would be lost without a word
        print("error: standard output is closed", file=sys.stderr)
        return EXIT_USAGE
    real_stdout = sys.stdout
    stdout = _Output(real_stdout)
    sys.stdout = cast(TextIO, stdout)
    try:
        return _run(args)
    except BrokenPipeError:  # the reader went away (`build.py list 2>&1 | head -1`): quiet, as shells do
        _silence(real_stdout)
        _silence(sys.stderr)
        return EXIT_BROKEN_PIPE
    except OSError as exc:
        if not stdout.failed:
            raise
        _silence(real_stdout)
        print(f"error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        sys.stdout = real_stdout
