"""The secrets check reading an image's layers from the engine's content store (layers.read_stored) instead of its
`docker save`: each layer blob streamed by its digest, hashed as stored and as a tar, and a layer the cache holds
not opened at all. The blobs are literals made here (tar layers, gzip'd), handed to the fake engine as
StoredLayers; the same layers as a `docker save` give the same answer."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from tests.fakes import FakeEngine
from tests.unit.security.test_layers import BASE, NETRC, REFERENCE, docker_26_save, layer, sha
from torchimages.engine import EngineError, StoredLayers
from torchimages.security import layer_cache, layers
from torchimages.security.layer_cache import LayerCache
from torchimages.security.model import SECRETS, Finding

WRITTEN = layer(("root/.netrc", NETRC))
DELETED = layer(("root/", None), ("root/.wh..netrc", b""))
CLEAN = layer(("opt/", None), ("opt/venv/", None), ("opt/venv/pyvenv.cfg", b"home = /usr/bin\n"))


def stored(tars: list[bytes], blobs: list[bytes] | None = None, opened: list[str] | None = None) -> StoredLayers:
    """StoredLayers of these layer tars, gzip'd (`blobs`: the bytes the store holds instead, under the gzip'd
    tars' names); each blob opened is recorded in `opened`."""
    zipped = [gzip.compress(t, mtime=0) for t in tars]
    held = dict(zip([sha(z) for z in zipped], blobs if blobs is not None else zipped, strict=True))

    @contextlib.contextmanager
    def open_blob(digest: str) -> Iterator[IO[bytes]]:
        if opened is not None:
            opened.append(digest)
        yield io.BytesIO(held[digest])

    return StoredLayers(tuple(sha(z) for z in zipped), tuple(sha(t) for t in tars), open_blob)


def engine_storing(layers_of: StoredLayers) -> FakeEngine:
    """A fake engine holding the image, its layers as inspect names them the stored configuration's (as
    DockerEngine.stored_layers makes sure)."""
    engine = FakeEngine()
    engine.images[REFERENCE], engine.layers[REFERENCE] = {}, layers_of.diff_ids
    engine.stored[REFERENCE] = layers_of
    return engine


def exports(engine: FakeEngine) -> int:
    return sum(1 for call, _ in engine.calls if call == "exported")


def test_a_netrc_is_found_from_the_stored_layers_and_nothing_is_exported() -> None:
    engine = engine_storing(stored([layer(*BASE), WRITTEN, DELETED]))
    result = layers.scan(engine, REFERENCE, [])
    assert result.findings == (
        Finding(
            SECRETS,
            "/root/.netrc",
            f"layer 2 of 3 ({sha(WRITTEN)[:19]}), deleted in layer 3",
            "/root/.netrc: a netrc file (logins and passwords)",
        ),
    )
    assert result.note == "3 layers, 6 entries"
    assert exports(engine) == 0, "no docker save where the store answers"


@pytest.mark.parametrize(
    "tars",
    [
        [layer(*BASE), WRITTEN, DELETED],
        [layer(*BASE), CLEAN],
        [CLEAN, CLEAN, WRITTEN],  # a layer twice: one blob
        [layer(*BASE), layer(("tmp/", None), ("tmp/build/", None), ("tmp/build/x", b"left\n"))],
    ],
    ids=["deleted-netrc", "clean", "a-layer-twice", "a-stray-folder"],
)
def test_the_stored_layers_give_the_answer_the_saved_image_gives(tars: list[bytes]) -> None:
    from_store = layers.scan(engine_storing(stored(tars)), REFERENCE, [])
    saved = FakeEngine()
    saved.archives[REFERENCE] = docker_26_save(tars)
    from_save = layers.scan(saved, REFERENCE, [])
    assert (from_store.findings, from_store.note, from_store.scanned) == (
        from_save.findings,
        from_save.note,
        from_save.scanned,
    )


def test_a_blob_whose_bytes_are_not_its_name_is_not_read_as_the_layer() -> None:
    tars = [layer(*BASE), WRITTEN]
    other = gzip.compress(CLEAN, mtime=0)  # a clean layer served under the netrc layer's name
    result = layers.scan(engine_storing(stored(tars, [gzip.compress(tars[0], mtime=0), other])), REFERENCE, [])
    assert not result.scanned
    assert f"layer 2 of 2 ({sha(WRITTEN)[:19]}) not read: its content does not match its digest" in result.note


def test_a_blob_that_is_not_the_configurations_layer_is_not_read_as_it() -> None:
    written = gzip.compress(WRITTEN, mtime=0)
    layers_of = stored([layer(*BASE), WRITTEN])
    mismatched = StoredLayers(layers_of.blobs, (layers_of.diff_ids[0], sha(CLEAN)), layers_of.open)
    assert sha(written) == layers_of.blobs[1]
    result = layers.scan(engine_storing(mismatched), REFERENCE, [])
    assert not result.scanned
    assert "not read: its content is not the layer its configuration names" in result.note
    assert [f.key for f in result.findings] == ["/root/.netrc"], "what its bytes held is still said"


@pytest.mark.parametrize(
    ("blob", "said"),
    [
        (b"\x28\xb5\x2f\xfd" + b"\0" * 600, "it is zstd-compressed, which this check does not read"),
        (b"\x89PNG" + b"\0" * 600, "it is no tar, gzip or zstd stream"),
    ],
)
def test_a_blob_that_is_no_tar_or_gzip_is_not_scanned_saying_what_it_is(blob: bytes, said: str) -> None:
    tars = [layer(*BASE), WRITTEN]
    result = layers.scan(engine_storing(stored(tars, [gzip.compress(tars[0], mtime=0), blob])), REFERENCE, [])
    assert not result.scanned and f"layer 2 of 2 ({sha(WRITTEN)[:19]}) not read: {said}" in result.note


def test_an_uncompressed_blob_is_read_too() -> None:
    tars = [layer(*BASE), WRITTEN]

    @contextlib.contextmanager
    def open_blob(digest: str) -> Iterator[IO[bytes]]:
        yield io.BytesIO({sha(t): t for t in tars}[digest])

    result = layers.scan(
        engine_storing(StoredLayers((sha(tars[0]), sha(WRITTEN)), (sha(tars[0]), sha(WRITTEN)), open_blob)),
        REFERENCE,
        [],
    )
    assert result.scanned and [f.key for f in result.findings] == ["/root/.netrc"]


def test_layers_the_cache_holds_are_not_opened_and_both_digests_are_kept(tmp_path: Path) -> None:
    cache = LayerCache(tmp_path / "cache" / layer_cache.FOLDER, 1 << 30)
    runtime = [layer(*BASE), CLEAN]
    opened: list[str] = []
    first = layers.scan(engine_storing(stored(runtime, opened=opened)), REFERENCE, [], cache=cache)
    assert first.scanned and len(opened) == 2
    for tar in runtime:  # kept by diff_id, and by the gzip blob's name (its bytes were seen to hash to it) with it
        assert cache.get(sha(tar), []) is not None
        assert cache.get(layers.blob_key(sha(gzip.compress(tar, mtime=0)), sha(tar)), []) is not None
    opened.clear()
    devel = layers.scan(engine_storing(stored([*runtime, WRITTEN], opened=opened)), REFERENCE, [], cache=cache)
    assert opened == [sha(gzip.compress(WRITTEN, mtime=0))], "runtime's layers are not opened again"
    assert devel.note.startswith("3 layers, ") and "(2 from the cache)" in devel.note
    assert [f.key for f in devel.findings] == ["/root/.netrc"]


def test_a_layer_not_read_is_not_kept(tmp_path: Path) -> None:
    cache = LayerCache(tmp_path / "cache" / layer_cache.FOLDER, 1 << 30)
    tars = [layer(*BASE), WRITTEN]
    layers.scan(
        engine_storing(stored(tars, [gzip.compress(tars[0], mtime=0), b"\x89PNG" + b"\0" * 600])),
        REFERENCE,
        [],
        cache=cache,
    )
    assert cache.get(sha(tars[0]), []) is not None and cache.get(sha(WRITTEN), []) is None


def test_the_images_bounds_hold_for_stored_layers() -> None:
    tiny = layers.Limits(image_bytes=1000)
    noise = random.Random(0).randbytes(100_000)  # gzip does not shrink it: the stored blob is as large
    engine = engine_storing(stored([layer(*BASE), layer(("opt/big", noise))]))
    result = layers.scan(engine, REFERENCE, [], limits=tiny)
    assert not result.scanned and "the image" in result.note


def test_a_stream_that_fails_is_the_engines_error() -> None:
    @contextlib.contextmanager
    def failing(digest: str) -> Iterator[IO[bytes]]:
        yield io.BytesIO(b"")
        raise EngineError("`ctr content get` failed: content digest not found")

    tars = [layer(*BASE)]
    engine = engine_storing(StoredLayers((sha(gzip.compress(tars[0], mtime=0)),), (sha(tars[0]),), failing))
    with pytest.raises(EngineError, match="content digest not found"):
        layers.scan(engine, REFERENCE, [])


def test_a_blob_named_twice_for_the_same_layer_is_read_once() -> None:
    opened: list[str] = []
    result = layers.scan(engine_storing(stored([CLEAN, CLEAN, WRITTEN], opened=opened)), REFERENCE, [])
    assert len(opened) == 2 and [f.key for f in result.findings] == ["/root/.netrc"]


def test_a_blob_named_for_two_layers_of_other_content_is_not_read_as_either(tmp_path: Path) -> None:
    """The manifest names one blob twice; the configuration gives the two places other diff_ids (a cached base,
    then the netrc layer): neither place is taken from the cache or read as clean."""
    cache = LayerCache(tmp_path / "cache" / layer_cache.FOLDER, 1 << 30)
    base = layer(*BASE)
    layers.scan(engine_storing(stored([base])), REFERENCE, [], cache=cache)  # the base is kept
    blob = sha(gzip.compress(base, mtime=0))
    opened: list[str] = []
    twice = stored([base], opened=opened)
    lying = StoredLayers((blob, blob), (sha(base), sha(WRITTEN)), twice.open)
    result = layers.scan(engine_storing(lying), REFERENCE, [], cache=cache)
    assert not result.scanned, result.note
    assert "layer 2 of 2" in result.note and "its blob is named for two layers of other content" in result.note
    assert cache.get(sha(WRITTEN), []) is None


def test_what_a_layer_held_is_still_said_when_its_bytes_are_not_its_digest() -> None:
    tars = [layer(*BASE), WRITTEN]
    other = gzip.compress(WRITTEN, mtime=1)  # the same tar gzip'd at another time: not the blob the manifest names
    engine = engine_storing(stored(tars, [gzip.compress(tars[0], mtime=0), other]))
    result = layers.scan(engine, REFERENCE, [])
    assert not result.scanned
    assert [f.key for f in result.findings] == ["/root/.netrc"], "what was found before the problem is said"


def test_a_blob_named_for_two_layers_keeps_what_its_first_read_found() -> None:
    written = gzip.compress(WRITTEN, mtime=0)
    lying = StoredLayers((sha(written), sha(written)), (sha(WRITTEN), sha(CLEAN)), stored([WRITTEN]).open)
    result = layers.scan(engine_storing(lying), REFERENCE, [])
    assert not result.scanned and "its blob is named for two layers of other content" in result.note
    assert [f.key for f in result.findings] == ["/root/.netrc", "/root/.netrc"]


def base_named_twice(base: bytes) -> FakeEngine:
    """An engine whose `docker save` of REFERENCE names the base's blob at both places of its manifest.json, its
    configuration giving the second place the netrc layer's diff_id."""
    from tests.unit.security.test_layers import config_of, tar_of

    config = config_of([base, WRITTEN])
    blob, config_name = f"blobs/sha256/{sha(base)[7:]}", f"blobs/sha256/{sha(config)[7:]}"
    entry = {"Config": config_name, "Layers": [blob, blob]}
    saved = FakeEngine()
    saved.archives[REFERENCE] = tar_of(
        [(blob, base), (config_name, config), ("manifest.json", json.dumps([entry]).encode())]
    )
    return saved


def test_a_saved_image_whose_manifest_names_another_blob_for_a_layer_is_not_clean() -> None:
    """The `docker save` path: manifest.json names the base's blob at both places, the configuration gives the
    second place the netrc layer's diff_id; the blob read there is not that layer."""
    base = layer(*BASE)
    saved = base_named_twice(base)
    result = layers.scan(saved, REFERENCE, [])
    assert not result.scanned
    assert f"layer 2 of 2 ({sha(WRITTEN)[:19]}) not read: its blob is named for two layers of other content" in (
        result.note
    )


def test_a_cached_tar_blob_named_for_another_layer_of_a_save_is_not_clean(tmp_path: Path) -> None:
    """The same save with the base's layer in the scan cache: its tar is hashed as it streams past, and neither
    place passes as taken from the cache."""
    from tests.unit.security.test_layers import docker_26_save

    cache = LayerCache(tmp_path / "cache" / layer_cache.FOLDER, 1 << 30)
    base = layer(*BASE)
    first = FakeEngine()
    first.archives[REFERENCE] = docker_26_save([base])
    assert layers.scan(first, REFERENCE, [], cache=cache).scanned
    saved = base_named_twice(base)
    result = layers.scan(saved, REFERENCE, [], cache=cache)
    assert not result.scanned, result.note
    assert "not read: its blob is named for two layers of other content" in result.note


def test_a_saved_layer_whose_tar_is_not_its_diff_id_is_not_clean() -> None:
    from tests.unit.security.test_layers import config_of, tar_of

    base = layer(*BASE)
    config = config_of([base, CLEAN])  # the second place: the configuration names another layer than the blob's
    blobs = [f"blobs/sha256/{sha(t)[7:]}" for t in (base, WRITTEN)]
    config_name = f"blobs/sha256/{sha(config)[7:]}"
    entry = {"Config": config_name, "Layers": blobs}
    saved = FakeEngine()
    saved.archives[REFERENCE] = tar_of(
        [(blobs[0], base), (blobs[1], WRITTEN), (config_name, config), ("manifest.json", json.dumps([entry]).encode())]
    )
    result = layers.scan(saved, REFERENCE, [])
    assert not result.scanned
    assert "layer 2 of 2" in result.note and "its content is not the layer its configuration names" in result.note
    assert [f.key for f in result.findings] == ["/root/.netrc"], "what it held is still said"


@pytest.mark.parametrize("twice", ["layer", "symlink", "hard link", "manifest", "manifest last"])
def test_a_save_that_names_a_file_twice_is_not_read(twice: str) -> None:
    """A second member of a name would replace what the first held (a layer holding a netrc, then a clean one under
    the same name; a link twice; a manifest.json naming no layer before or after the true one): the save is not
    read, whichever comes last."""
    from tests.unit.security.test_layers import config_of

    base, secret = layer(*BASE), layer(("root/.netrc", NETRC))
    config = config_of([base])
    blob, config_name = f"blobs/sha256/{sha(base)[7:]}", f"blobs/sha256/{sha(config)[7:]}"
    manifest = json.dumps([{"Config": config_name, "Layers": [blob]}]).encode()
    empty = json.dumps([{"Config": config_name, "Layers": []}]).encode()
    cases: dict[str, list[tuple[str, bytes | tuple[bytes, str]]]] = {
        "layer": [(blob, secret), (blob, base), ("manifest.json", manifest)],
        "symlink": [
            (blob, base),
            ("old/layer.tar", (tarfile.SYMTYPE, blob)),
            ("old/layer.tar", (tarfile.SYMTYPE, blob)),
            ("manifest.json", manifest),
        ],
        "hard link": [
            (blob, base),
            ("old/layer.tar", (tarfile.LNKTYPE, blob)),
            ("old/layer.tar", (tarfile.LNKTYPE, blob)),
            ("manifest.json", manifest),
        ],
        "manifest": [(blob, base), ("manifest.json", empty), ("manifest.json", manifest)],
        "manifest last": [(blob, base), ("manifest.json", manifest), ("manifest.json", empty)],
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in [*cases[twice], (config_name, config)]:
            info = tarfile.TarInfo(name)
            if isinstance(data, tuple):
                info.type, info.linkname = data
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    saved = FakeEngine()
    saved.archives[REFERENCE] = out.getvalue()
    result = layers.scan(saved, REFERENCE, [])
    assert not result.scanned and result.findings == ()
    assert "the exported image could not be read: " in result.note and "is in the archive twice" in result.note
