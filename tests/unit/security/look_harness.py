"""The os-updates look's `keys` and `auth` blocks (os_updates.LOOK, with its `checksum` helper and FRAME) run by a
real sh, apt-config a stub: what the look prints of the files apt reads, for tests that give those files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from torchimages.security import os_updates


def run_look(tmp_path: Path, shell: str = "", dump: str = "", files: str = "") -> str:
    """The blocks' output: `shell` is what the stub's `apt-config shell` prints (assignments), `dump` its `apt-config
    dump` lines, `files` the sources files the look names (the look's `files`, one word each)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (tmp_path / "shell.txt").write_text(shell)
    (tmp_path / "dump.txt").write_text(dump)
    stub = bin_dir / "apt-config"
    stub.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = shell ] && cat "{tmp_path}/shell.txt"\n'
        f'[ "$1" = dump ] && cat "{tmp_path}/dump.txt"\n'
        "exit 0\n"
    )
    stub.chmod(0o755)
    look = os_updates.LOOK
    start = look.index("checksum() {")
    helper = look[start : look.index("\n}\n", start) + 3]
    block = look[look.index("echo '### keys'") : look.index("echo '### packages'")]
    done = subprocess.run(
        ["sh", "-c", f"{os_updates.FRAME}{helper}files='{files}'\n{block}"],
        capture_output=True,
        check=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"},
    )
    return done.stdout.decode()


def look_sections(tmp_path: Path, shell: str = "", dump: str = "", files: str = "") -> dict[str, str]:
    """run_look's output read as the check reads it: its sections (`keys`, `auth`, ...) by name."""
    return os_updates.sections(run_look(tmp_path, shell, dump, files))
