"""Run one of the Makefile's commands with make's variables as arguments, never as shell text (issue 42).

    python scripts/make_args.py WORD...

runs this interpreter on the WORDs (`python build.py build ...`, `python -m pytest ...`), where a word
`=NAME` is the value of the environment variable MAKEARG_NAME as one argument (left out where it is empty),
`+NAME` is that value split into arguments as a shell would split it (quotes group words; nothing in it is run
or expanded: shlex), and any other word is itself. The Makefile exports each variable a user sets (TAG,
MATRIX, BUILD_ARGS, ...) as MAKEARG_<NAME>, unexpanded (`$(value ...)`), so `;`, quotes, `$(...)` and backticks
reach the tool as the text they are. A value that cannot be split (an unclosed quote): one line, exit 2.
Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import os
import shlex
import sys

PREFIX = "MAKEARG_"


def words(argv: list[str], environ: dict[str, str]) -> list[str]:
    """The command's arguments with each `=NAME` and `+NAME` replaced by its variable's words; ValueError
    naming the variable when a `+NAME` value cannot be split."""
    found: list[str] = []
    for word in argv:
        if word[:1] in ("=", "+") and len(word) > 1:
            value = environ.get(PREFIX + word[1:], "")
            if word[0] == "=":
                found += [value] if value else []
                continue
            try:
                found += shlex.split(value)
            except ValueError as exc:
                raise ValueError(f"{word[1:]}: cannot split {value!r} into arguments: {exc}") from None
            continue
        found.append(word)
    return found


def main(argv: list[str]) -> int:
    try:
        command = words(argv, dict(os.environ))
    except ValueError as exc:
        print(f"make: {exc}", file=sys.stderr)
        return 2
    if not command:
        print("make: scripts/make_args.py: no command to run", file=sys.stderr)
        return 2
    os.execv(sys.executable, [sys.executable, *command])
    return 0  # not reached: execv replaces this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
