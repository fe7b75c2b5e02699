"""The layer scan's cache (torchimages/security/layer_cache.py): a layer is read once, whichever image holds it;
a changed layer, other rules or other secrets are read again; a blob that does not hash to its name is not
trusted; a bad entry of any kind is a miss; the size limit evicts the least recently used; `clear` removes the
cache's own files only; a folder that cannot be used keeps nothing and the scan still reads every layer. The
images are literal `docker save` archives made here (test_layers.py's), handed to the fake engine with the
diff_ids its inspect answers."""

from __future__ import annotations

import gzip
import inspect
import json
import os
import re
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fakes import FakeEngine
from tests.unit.security.test_layers import (
    BASE,
    NETRC,
    PEM_KEY,
    REFERENCE,
    docker_20_save,
    docker_26_save,
    layer,
    sha,
    tar_of,
)
from torchimages.engine import ImageInfo
from torchimages.security import layer_cache, layers
from torchimages.security.layer_cache import LayerCache
from torchimages.security.layers import Layer
from torchimages.security.leaks import Hit, Secret, secrets_of
from torchimages.security.model import Scan
from torchimages.security.tarstream import Source

LIMIT = 1 << 20
RUNTIME = [layer(*BASE), layer(("opt/venv/bin/python", b"ELF"), ("root/.netrc", NETRC))]
DEVEL = [*RUNTIME, layer(("usr/local/cuda/bin/nvcc", b"ELF"), ("home/u/.ssh/id_rsa", PEM_KEY))]


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """How many layer tarballs the scan parsed (one entry per read_layer call)."""
    calls: list[int] = []
    real = layers.read_layer

    def counted(source: Source, secrets: Sequence[Secret]) -> Layer:
        calls.append(1)
        return real(source, secrets)

    monkeypatch.setattr(layers, "read_layer", counted)
    yield calls


def engine_with(tarballs: list[bytes], archive: bytes | None = None, reference: str = REFERENCE) -> FakeEngine:
    """A fake engine holding one image: its `docker save` archive, and its diff_ids as inspect answers."""
    engine = FakeEngine()
    add(engine, tarballs, archive, reference)
    return engine


def add(engine: FakeEngine, tarballs: list[bytes], archive: bytes | None = None, reference: str = REFERENCE) -> None:
    engine.archives[reference] = archive if archive is not None else docker_26_save(tarballs)
    engine.add(ImageInfo(reference, "sha256:" + "1" * 64, {}, {}, "", tuple(sha(t) for t in tarballs)))


def scan(
    engine: FakeEngine,
    cache: LayerCache | None,
    reference: str = REFERENCE,
    secrets: tuple[tuple[str, bytes], ...] = (),
) -> Scan:
    return layers.scan(engine, reference, secrets, cache=cache)


def exports(engine: FakeEngine) -> int:
    return sum(1 for call, _ in engine.calls if call == "exported")


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if layer_cache.ENTRY_NAME.fullmatch(p.name))


@pytest.fixture
def cache(tmp_path: Path) -> LayerCache:
    return LayerCache(tmp_path / "cache" / layer_cache.FOLDER, LIMIT)


# --- read once ------------------------------------------------------------------------------------------------


def test_a_layer_is_scanned_once_and_a_second_scan_exports_nothing(cache: LayerCache, reads: list[int]) -> None:
    engine = engine_with(RUNTIME)
    first = scan(engine, cache)
    assert first.scanned and len(reads) == 2 and exports(engine) == 1
    assert first.note == "2 layers, 5 entries"
    assert len(entries(cache.folder)) == 2 and oct(cache.folder.stat().st_mode & 0o777) == "0o700"
    again = scan(engine, cache)
    assert exports(engine) == 1 and len(reads) == 2  # nothing exported, nothing read
    assert again.findings == first.findings and again.note == "2 layers, 5 entries (2 from the cache)"


def test_devel_after_runtime_reads_only_its_own_layer(cache: LayerCache, reads: list[int]) -> None:
    engine = engine_with(RUNTIME)
    add(engine, DEVEL, reference="devel:1")
    scan(engine, cache)
    assert len(reads) == 2
    devel = scan(engine, cache, "devel:1")
    assert len(reads) == 3 and exports(engine) == 2
    assert devel.note.endswith("(2 from the cache)")
    uncached = scan(engine, None, "devel:1")
    assert devel.findings == uncached.findings and [f.key for f in devel.findings] == [
        "/root/.netrc",
        "/home/u/.ssh/id_rsa",
    ]
    assert devel.findings[1].subject.startswith("layer 3 of 3 (sha256:")


def test_a_changed_layer_is_scanned_again(cache: LayerCache, reads: list[int]) -> None:
    engine = engine_with(RUNTIME)
    scan(engine, cache)
    changed = [RUNTIME[0], layer(("opt/venv/bin/python", b"ELF2"))]
    add(engine, changed, reference="rebuilt:1")
    result = scan(engine, cache, "rebuilt:1")
    assert len(reads) == 3 and result.findings == () and result.note.endswith("(1 from the cache)")


def oci(blobs: list[tuple[str, bytes]], diff_ids: list[str]) -> bytes:
    """An OCI-layout `docker save` archive: each layer blob (the digest it is named by, its content) in order,
    and a configuration naming `diff_ids`."""
    config = json.dumps({"rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    entry = {"Config": f"blobs/sha256/{sha(config)[7:]}", "Layers": [f"blobs/sha256/{d[7:]}" for d, _ in blobs]}
    members: list[tuple[str, bytes | str]] = [(f"blobs/sha256/{d[7:]}", content) for d, content in blobs]
    members += [(f"blobs/sha256/{sha(config)[7:]}", config), ("manifest.json", json.dumps([entry]).encode())]
    return tar_of(members)


def test_a_blob_whose_content_does_not_match_its_digest_is_not_trusted(cache: LayerCache) -> None:
    engine = engine_with(RUNTIME)
    scan(engine, cache)
    # The clean base's digest names a blob that holds a netrc, beside a layer the cache does not hold.
    liar, new = layer(("root/.netrc", NETRC)), layer(("etc/motd", b"new"))
    diff_ids = [sha(RUNTIME[0]), sha(new)]
    add(engine, [RUNTIME[0], new], oci([(sha(RUNTIME[0]), liar), (sha(new), new)], diff_ids), "liar:1")
    result = scan(engine, cache, "liar:1")
    assert not result.scanned and "layer 1 of 2" in result.note
    assert "its content does not match its digest" in result.note
    assert layer_cache.load(cache, sha(RUNTIME[0]), ()) is not None  # the entry itself is still the base's


def test_a_layer_read_is_kept_only_under_the_digest_its_bytes_have(cache: LayerCache) -> None:
    archive = oci([(sha(t), t) for t in RUNTIME], [sha(b"other"), sha(RUNTIME[1])])
    scan(engine_with(RUNTIME, archive), cache)
    assert len(entries(cache.folder)) == 1  # the configuration names another digest for the first: not kept
    assert layer_cache.load(cache, sha(b"other"), ()) is None


def test_a_gzip_layer_is_kept_under_its_uncompressed_digest(cache: LayerCache, reads: list[int]) -> None:
    plain = layer(("home/u/.netrc", NETRC))
    packed = gzip.compress(plain, mtime=0)
    engine = engine_with([plain], oci([(sha(packed), packed)], [sha(plain)]))
    first = scan(engine, cache)
    # under its diff_id, and under its blob's name (the containerd store saves the gzip blob)
    assert [f.key for f in first.findings] == ["/home/u/.netrc"] and len(entries(cache.folder)) == 2
    again = scan(engine, cache)
    assert exports(engine) == 1 and again.findings == first.findings and len(reads) == 1


def test_a_gzip_blob_read_before_is_only_hashed_in_the_next_image(cache: LayerCache, reads: list[int]) -> None:
    """devel on the containerd store: runtime's gzip blobs, then its own; runtime's are taken from the cache by
    their blob's name (their content hashed to it), only devel's own layer is unpacked and read."""
    shared, own = layer(("home/u/.netrc", NETRC)), layer(("opt/devel.txt", b"nvcc"))
    shared_gz, own_gz = gzip.compress(shared, mtime=0), gzip.compress(own, mtime=0)
    engine = engine_with([shared], oci([(sha(shared_gz), shared_gz)], [sha(shared)]))
    scan(engine, cache)
    add(
        engine, [shared, own], oci([(sha(shared_gz), shared_gz), (sha(own_gz), own_gz)], [sha(shared), sha(own)]), "d:1"
    )
    devel = scan(engine, cache, "d:1")
    assert len(reads) == 2  # runtime's layer once, devel's own once
    assert [f.key for f in devel.findings] == ["/home/u/.netrc"]  # the cached layer's finding still said
    assert "(1 from the cache)" in devel.note


def test_a_gzip_blob_whose_content_is_not_its_name_is_not_taken_from_the_cache(cache: LayerCache) -> None:
    shared, own = layer(("home/u/.netrc", NETRC)), layer(("opt/devel.txt", b"nvcc"))
    shared_gz, own_gz = gzip.compress(shared, mtime=0), gzip.compress(own, mtime=0)
    engine = engine_with([shared], oci([(sha(shared_gz), shared_gz)], [sha(shared)]))
    scan(engine, cache)
    other = gzip.compress(layer(("etc/x", b"x")), mtime=0)  # under the cached blob's name: other bytes
    blobs = [(sha(shared_gz), other), (sha(own_gz), own_gz)]
    add(engine, [shared, own], oci(blobs, [sha(shared), sha(own)]), "lie:1")  # the cached layer's place
    lying = scan(engine, cache, "lie:1")
    assert not lying.scanned and "its content does not match its digest" in lying.note


def test_a_cached_gzip_blob_named_for_another_layer_of_a_save_is_not_clean(cache: LayerCache) -> None:
    """A save whose manifest names a gzip blob the cache holds (its bytes are its name) at a place whose diff_id,
    in the configuration and inspect, is another layer's: the cache does not answer for the blob (its entry is
    keyed by the diff_id its tar hashed to), so it is read, and the scan says it is not that layer."""
    clean, secret = layer(("etc/motd", b"hello")), layer(("root/.netrc", NETRC))
    clean_gz = gzip.compress(clean, mtime=0)
    engine = engine_with([clean], oci([(sha(clean_gz), clean_gz)], [sha(clean)]))
    assert scan(engine, cache).scanned
    add(engine, [secret], oci([(sha(clean_gz), clean_gz)], [sha(secret)]), "other:1")
    other = scan(engine, cache, "other:1")
    assert not other.scanned and "layer 1 of 1" in other.note, other.note
    assert "its content is not the layer its configuration names" in other.note


def test_a_cached_gzip_blob_at_a_place_the_saved_configuration_names_otherwise_is_not_clean(cache: LayerCache) -> None:
    """inspect names the cached blob's layer (so the cache answers for the blob), but the save's own configuration
    names another layer at that place: the place is checked against the diff_id the cache saw, and is not clean."""
    clean, secret, other = layer(("etc/motd", b"hello")), layer(("root/.netrc", NETRC)), layer(("etc/x", b"x"))
    clean_gz, other_gz = gzip.compress(clean, mtime=0), gzip.compress(other, mtime=0)
    engine = engine_with([clean], oci([(sha(clean_gz), clean_gz)], [sha(clean)]))
    assert scan(engine, cache).scanned
    saved = oci([(sha(clean_gz), clean_gz), (sha(other_gz), other_gz)], [sha(secret), sha(other)])
    add(engine, [clean, other], saved, "liar:1")  # inspect: the clean layer, then one the cache does not hold
    liar = scan(engine, cache, "liar:1")
    assert not liar.scanned and "layer 1 of 2" in liar.note, liar.note
    assert "its content is not the layer its configuration names" in liar.note


def test_a_cached_gzip_blob_is_kept_with_the_diff_id_its_tar_hashed_to(cache: LayerCache) -> None:
    """The entry for a gzip blob is keyed by the blob and its tar's digest together: the blob's name alone finds
    nothing, and the pair finds the layer."""
    plain = layer(("home/u/.netrc", NETRC))
    packed = gzip.compress(plain, mtime=0)
    scan(engine_with([plain], oci([(sha(packed), packed)], [sha(plain)])), cache)
    assert layer_cache.load(cache, sha(packed), ()) is None
    kept = layer_cache.load(cache, f"{sha(packed)} {sha(plain)}", ())
    assert kept is not None and [hit.path for hit in kept.hits] == ["/home/u/.netrc"]


# --- what the key holds ---------------------------------------------------------------------------------------


def test_other_rules_invalidate_every_entry(
    cache: LayerCache, reads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = engine_with(RUNTIME)
    scan(engine, cache)
    monkeypatch.setattr(layer_cache, "rules_digest", lambda: "0" * 64)
    scan(engine, cache)
    assert len(reads) == 4 and exports(engine) == 2


@pytest.mark.parametrize("module", layer_cache.RULES, ids=[m.__name__.rsplit(".", 1)[-1] for m in layer_cache.RULES])
def test_the_rules_digest_covers_each_rules_module_s_source(
    module: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    digest = layer_cache.rules_digest()
    assert digest is not None and len(digest) == 64
    changed = tmp_path / Path(module.__file__ or "").name
    changed.write_bytes(Path(module.__file__ or "").read_bytes() + b"# one rule more\n")
    monkeypatch.setattr(module, "__file__", str(changed))
    layer_cache.rules_digest.cache_clear()
    try:
        assert layer_cache.rules_digest() not in (None, digest)
        monkeypatch.setattr(module, "__file__", str(tmp_path / "gone.py"))
        layer_cache.rules_digest.cache_clear()
        assert layer_cache.rules_digest() is None  # no source to hash: nothing is cached
        assert not layer_cache.store(LayerCache(tmp_path / "c", LIMIT), sha(b"x"), (), Layer())
    finally:
        layer_cache.rules_digest.cache_clear()


def test_every_module_a_layer_is_read_through_is_in_the_rules() -> None:
    """A change to how a layer is read (not only to the rules) makes every entry a miss."""
    rules = {m.__name__ for m in layer_cache.RULES}
    for module in layer_cache.RULES:
        for line in inspect.getsource(module).splitlines():
            found = re.match(r"from (torchimages\.security\.\w+) import", line)
            if found and found[1] != "torchimages.security.model":  # the findings' types, no rule
                assert found[1] in rules, (module.__name__, found[1])


NO_RULES = {"torchimages.security.model", "torchimages.settings", "torchimages.engine"}  # types, bounds' settings


def test_every_torchimages_module_a_rule_is_built_from_is_in_the_rules() -> None:
    """values.py's patterns build leaks's marks (a login in a URL): changing them makes every entry a miss."""
    rules = {m.__name__ for m in layer_cache.RULES}
    assert "torchimages.values" in rules
    for module in layer_cache.RULES:
        for name, value in vars(module).items():
            used = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", "")
            if used.startswith("torchimages.") and not any(used.startswith(n) for n in NO_RULES):
                assert used in rules, (module.__name__, name, used)


def test_other_secrets_invalidate_and_a_renamed_secret_is_named_by_its_new_name(
    cache: LayerCache, reads: list[int]
) -> None:
    content = b"[global]\nindex-url = https://mirror.example.org/simple\n"
    engine = engine_with([layer(*BASE), layer(("etc/leaked.ini", content))])
    scan(engine, cache, secrets=(("pip.conf", content),))
    assert len(reads) == 2
    other = scan(engine, cache, secrets=(("pip.conf", b"other"),))
    assert len(reads) == 4 and other.findings == ()
    renamed = scan(engine, cache, secrets=(("uv.toml", content),))
    assert len(reads) == 6 and renamed.findings[0].detail.endswith("the build's secret uv.toml")
    same = scan(engine, cache, secrets=(("uv.toml", content),))
    assert len(reads) == 6 and same.findings == renamed.findings


def test_a_layer_that_was_not_read_is_never_kept(cache: LayerCache) -> None:
    zstd = b"\x28\xb5\x2f\xfd" + b"\0" * 600
    engine = engine_with([layer(*BASE), zstd])
    first = scan(engine, cache)
    again = scan(engine, cache)
    assert not again.scanned and "zstd" in again.note and exports(engine) == 2
    assert len(entries(cache.folder)) == 1 and again.findings == first.findings
    assert not layer_cache.store(cache, sha(zstd), (), Layer(problem="zstd"))


# --- bad entries --------------------------------------------------------------------------------------------


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _symlink(path: Path) -> None:
    kept = path.with_name("kept")
    path.rename(kept)
    path.symlink_to(kept.name)


def _other_key(path: Path) -> None:
    found = json.loads(path.read_bytes())
    path.write_text(json.dumps({**found, "layer": sha(b"another layer")}))


BAD_ENTRIES: dict[str, Callable[[Path], object]] = {
    "garbage": lambda p: p.write_bytes(os.urandom(200)),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-7]),
    "empty": lambda p: p.write_bytes(b""),
    "not utf-8": lambda p: p.write_bytes(b'{"format": 1, "layer": "\xff"}'),
    "wrong types": lambda p: p.write_text(json.dumps({**json.loads(p.read_bytes()), "entries": "3"})),
    "a bool format": lambda p: p.write_text(json.dumps({**json.loads(p.read_bytes()), "format": True})),
    "hits of three": lambda p: p.write_text(json.dumps({**json.loads(p.read_bytes()), "hits": [["a", "b", "c"]]})),
    "a list": lambda p: p.write_text("[1, 2]"),
    "deeply nested": lambda p: p.write_text("[" * 100_000),
    "too large": lambda p: p.write_bytes(b" " * (layer_cache.ENTRY_MAX + 1)),
    "another key": _other_key,
    "a symlink": _symlink,
    "a folder": _folder,
    "a fifo": _fifo,
}


@pytest.mark.parametrize("spoil", BAD_ENTRIES.values(), ids=list(BAD_ENTRIES))
def test_a_bad_entry_is_a_miss_and_the_scan_still_right(
    cache: LayerCache, reads: list[int], spoil: Callable[[Path], object]
) -> None:
    engine = engine_with(RUNTIME)
    first = scan(engine, cache)
    for path in entries(cache.folder):
        spoil(path)
    again = scan(engine, cache)
    assert len(reads) == 4 and exports(engine) == 2
    assert again.findings == first.findings and again.note == first.note


# --- the size limit and clearing ----------------------------------------------------------------------------


def test_the_size_limit_evicts_the_least_recently_used(tmp_path: Path) -> None:
    found = Layer((Hit("/root/.netrc", "a netrc file"),), entries=3)
    rules = layer_cache.rules_digest() or ""
    size = len(layer_cache.encode(sha(b"a"), rules, layer_cache.secrets_digest(()), found))
    cache = LayerCache(tmp_path / "scans", 2 * size + size // 2)  # room for two entries
    names = {}
    for at, name in enumerate(("a", "b")):
        assert layer_cache.store(cache, sha(name.encode()), (), found)
        names[name] = cache.folder / layer_cache.entry_name(sha(name.encode()), rules, layer_cache.secrets_digest(()))
        os.utime(names[name], (1000 + at, 1000 + at))
    assert layer_cache.load(cache, sha(b"a"), ()) == found  # a hit: a is now the most recently used
    assert layer_cache.store(cache, sha(b"c"), (), found)
    assert layer_cache.load(cache, sha(b"b"), ()) is None  # b went
    assert layer_cache.load(cache, sha(b"a"), ()) == found and layer_cache.load(cache, sha(b"c"), ()) == found
    assert layer_cache.usage(cache) == layer_cache.Usage(2, 2 * size)
    tiny = LayerCache(tmp_path / "tiny", size - 1)  # an entry larger than the whole limit is not kept
    assert not layer_cache.store(tiny, sha(b"a"), (), found) and layer_cache.usage(tiny).entries == 0


def test_clear_removes_the_cache_s_own_files_only(cache: LayerCache) -> None:
    scan(engine_with(RUNTIME), cache)
    (cache.folder / "notes.txt").write_text("mine")
    (cache.folder / "sub").mkdir()
    half = cache.folder / f".{'a' * 64}.json.x1y2_z.tmp"
    half.write_text("{")
    assert layer_cache.clear(cache) == layer_cache.Cleared(3)
    assert sorted(p.name for p in cache.folder.iterdir()) == ["notes.txt", "sub"]
    assert layer_cache.usage(cache) == layer_cache.Usage(0, 0)
    assert layer_cache.clear(LayerCache(cache.folder / "nothing", LIMIT)) == layer_cache.Cleared(0)


# --- a folder that cannot be used ---------------------------------------------------------------------------


def test_a_cache_folder_that_cannot_be_made_keeps_nothing_and_the_scan_still_reads(
    tmp_path: Path, reads: list[int]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("in the way")
    engine = engine_with(RUNTIME)
    expected = scan(engine, None)
    for folder in (blocker / layer_cache.FOLDER, blocker):
        result = scan(engine, LayerCache(folder, LIMIT))
        assert result.findings == expected.findings and result.note == expected.note
    assert len(reads) == 6 and blocker.read_text() == "in the way"


def test_a_folder_another_user_may_write_is_not_used(tmp_path: Path, reads: list[int]) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    cache = LayerCache(shared, LIMIT)
    engine = engine_with(RUNTIME)
    scan(engine, cache)
    assert list(shared.iterdir()) == [] and not layer_cache.ready(cache)


def test_the_settings_name_the_folder_the_limit_and_off(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path)}
    assert layer_cache.from_settings(env) == LayerCache(tmp_path / "torchimages" / "layer-scans", 64 << 20)
    mine = {**env, "TORCHIMAGES_CACHE_DIR": str(tmp_path / "t"), "TORCHIMAGES_SCAN_CACHE_BYTES": "4096"}
    assert layer_cache.from_settings(mine) == LayerCache(tmp_path / "t" / "layer-scans", 4096)
    assert layer_cache.from_settings({**env, "TORCHIMAGES_SCAN_CACHE": "off"}) is None
    relative = layer_cache.tool_folder({"XDG_CACHE_HOME": "relative", "HOME": str(tmp_path)})
    assert relative is not None and relative.parts[-2:] == (".cache", "torchimages")  # the XDG spec: ignored


# --- the same findings with and without ---------------------------------------------------------------------

WRITTEN = layer(("home/u/.netrc", NETRC))
IMAGES = {
    "deleted later": [layer(*BASE), layer(("root/.netrc", NETRC)), layer(("root/", None), ("root/.wh..netrc", b""))],
    "opaque above": [WRITTEN, layer(("home/u/.wh..wh..opq", b""))],
    "folder deleted": [layer(("tmp/build/a.whl", b"x"), ("home/u/.netrc", NETRC)), layer(("tmp/.wh.build", b""))],
    "a layer twice": [layer(*BASE), WRITTEN, layer(("etc/motd", b"1")), WRITTEN],
    "an empty layer": [layer(*BASE), bytes(1024), WRITTEN],
    "stray files": [layer(("tmp/a", b"a"), ("tmp/b/c", b"c"), ("var/tmp/x", b"x"), ("root/.python_history", b"h"))],
    "a zstd layer": [WRITTEN, b"\x28\xb5\x2f\xfd" + b"\0" * 600],
}
LAYOUTS = {"docker 26": docker_26_save, "docker 26, manifest first": None, "docker 20.10": docker_20_save}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("image", list(IMAGES))
def test_the_findings_with_the_cache_are_those_without(cache: LayerCache, image: str, layout: str) -> None:
    tarballs = IMAGES[image]
    save = LAYOUTS[layout]
    archive = save(tarballs) if save is not None else docker_26_save(tarballs, manifest_first=True)
    engine = engine_with(tarballs, archive)
    without = scan(engine, None)
    cold, warm = scan(engine, cache), scan(engine, cache)
    for result in (cold, warm):
        assert (result.findings, result.scanned) == (without.findings, without.scanned)
        assert result.note.split(" (")[0].split(";")[0] == without.note.split(";")[0]
    if without.scanned:
        assert exports(engine) == 2  # the warm scan exported nothing


# --- the entry parser ---------------------------------------------------------------------------------------

KEY = (sha(b"layer"), "r" * 64, "s" * 64)
texts = st.text(max_size=40)
layers_st = st.builds(
    Layer,
    hits=st.lists(st.builds(Hit, texts, texts), max_size=5).map(tuple),
    deleted=st.frozensets(texts, max_size=5),
    opaque=st.frozensets(texts, max_size=5),
    entries=st.integers(min_value=0, max_value=10**12),
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    found = layer_cache.decode(data, *KEY)
    assert found is None or isinstance(found, Layer)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(st.none() | st.booleans() | st.integers() | texts, lambda c: st.lists(c) | st.dictionaries(texts, c))
)
def test_arbitrary_json_never_raises(value: object) -> None:
    data = json.dumps(value).encode()
    assert layer_cache.decode(data, *KEY) is None


@settings(max_examples=300, deadline=None)
@given(layers_st)
def test_any_layer_read_comes_back_the_same(found: Layer) -> None:
    data = layer_cache.encode(*KEY, found)
    assert layer_cache.decode(data, *KEY) == found
    assert layer_cache.decode(data, sha(b"other"), *KEY[1:]) is None


def test_the_secrets_digest_is_the_set_s_not_its_order() -> None:
    one, two = secrets_of([("a", b"1"), ("b", b"2")]), secrets_of([("b", b"2"), ("a", b"1")])
    assert layer_cache.secrets_digest(one) == layer_cache.secrets_digest(two)
    assert layer_cache.secrets_digest(one) != layer_cache.secrets_digest((Secret("a", 1, "x"),))


def test_a_gzip_blob_saved_under_a_name_its_bytes_do_not_have_is_not_kept_under_that_name(cache: LayerCache) -> None:
    """An archive whose blob named B holds another layer's gzip (its tar hashing to the diff_id the configuration
    names): the result is kept under the diff_id only, so the next image whose true blob B holds a secret is read,
    and the secret found."""
    clean, secret = layer(("etc/motd", b"hello")), layer(("root/.netrc", NETRC))
    clean_gz, secret_gz = gzip.compress(clean, mtime=0), gzip.compress(secret, mtime=0)
    named = sha(secret_gz)
    engine = engine_with([clean], oci([(named, clean_gz)], [sha(clean)]))
    assert scan(engine, cache).findings == ()
    add(engine, [secret], oci([(named, secret_gz)], [sha(secret)]), "second:1")
    second = scan(engine, cache, "second:1")
    assert [f.key for f in second.findings] == ["/root/.netrc"] and "from the cache" not in second.note
