"""bench/pull.py's pure parts: its arguments (bounds, loopback registries only, clear argparse errors), the
layer sizes it reads from a registry's manifest, and its table. The pushes and pulls need an engine (not here)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import compression  # bench/ scripts import their siblings by name
import pull


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stopped:
        pull.parse_args(list(argv))
    assert stopped.value.code == 2
    return capsys.readouterr().err


def test_defaults() -> None:
    args = pull.parse_args([])
    assert (args.image, args.registry, args.runs) == (compression.DEFAULT_IMAGE, None, 1)
    args = pull.parse_args(["img:tag", "--registry", "127.0.0.1:5000", "--runs", "10"])
    assert (args.image, args.registry, args.runs) == ("img:tag", "127.0.0.1:5000", 10)
    assert pull.parse_args(["--registry", "localhost:1"]).registry == "localhost:1"
    assert pull.parse_args(["--registry", "[::1]:65535"]).registry == "[::1]:65535"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--runs", "0"], "argument --runs: 0 is not from 1 to 10"),
        (["--runs", "-1"], "argument --runs: -1 is not from 1 to 10"),
        (["--runs", "11"], "argument --runs: 11 is not from 1 to 10"),
        (["--runs", "two"], "argument --runs: 'two' is not a whole number"),
        (["--runs", "1.5"], "argument --runs: '1.5' is not a whole number"),
        (["--registry", "registry.example.org:5000"], "is not HOST:PORT of a registry on loopback"),
        (["--registry", "10.0.0.1:5000"], "is not HOST:PORT of a registry on loopback"),
        (["--registry", "127.0.0.1"], "is not HOST:PORT of a registry on loopback"),
        (["--registry", "127.0.0.1:0"], "port 0 is not from 1 to 65535"),
        (["--registry", "127.0.0.1:70000"], "port 70000 is not from 1 to 65535"),
        (["--registry", "127.0.0.300:5000"], "127.0.0.300 is no IPv4 address"),
        (["--registry", "http://127.0.0.1:5000"], "is not HOST:PORT of a registry on loopback"),
        ([" "], "' ': not an image reference: a reference has no spaces or control characters"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_are_argparse_errors(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    err = refused(capsys, *argv)
    assert message in err and "Traceback" not in err


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_registry_text_is_taken_or_refused_cleanly(text: str) -> None:
    try:
        taken = pull.registry(text)
    except argparse.ArgumentTypeError:
        return
    host, port = taken.rsplit(":", 1)
    assert host in ("localhost", "[::1]") or host.startswith("127.")
    assert 1 <= int(port) <= 65535


# An OCI manifest as a registry serves it (sizes literal).
MANIFEST = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:c", "size": 9_000},
    "layers": [
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": "sha256:a", "size": 30_000_000},
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": "sha256:b", "size": 560_000_000},
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": "sha256:d", "size": 410_000_000},
    ],
}


def test_layer_sizes_come_from_the_manifest() -> None:
    assert pull.layer_sizes(MANIFEST) == (30_000_000, 560_000_000, 410_000_000)


@pytest.mark.parametrize(
    "manifest",
    [
        {"manifests": [{"digest": "sha256:x"}]},  # an index
        {"layers": "none"},
        {"layers": [{"digest": "sha256:a"}]},
        {"layers": [{"size": -1}]},
        {"layers": [{"size": "12"}]},
        {"layers": [7]},
    ],
)
def test_a_manifest_without_layer_sizes_stops_the_run_saying_so(manifest: dict[str, object]) -> None:
    with pytest.raises(SystemExit, match="the registry's manifest"):
        pull.layer_sizes(manifest)


def test_the_table_shows_each_compression_largest_layers_and_totals() -> None:
    gzip = pull.Pulled("gzip", (61.2,), (30_000_000, 700_000_000, 500_000_000), 1_150_000_000, 6_240_000_000)
    zstd = pull.Pulled(
        "zstd", (48.0, 40.5, 44.25), (29_000_000, 560_000_000, 410_000_000), 1_150_000_000, 6_240_000_000
    )
    assert pull.table([gzip, zstd]).splitlines() == [
        "| compression | pull s | layers | largest compressed | largest uncompressed | compressed | uncompressed |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| gzip | 61.2 | 3 | 700 MB | 1.15 GB | 1.23 GB | 6.24 GB |",
        "| zstd | 44.2 (best 40.5) | 3 | 560 MB | 1.15 GB | 999 MB | 6.24 GB |",
    ]
