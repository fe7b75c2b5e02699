"""An image's attestations read from the engine's containerd content store by digest (`ctr content get`), each blob
hashed to its name, and the image's `docker save` read instead wherever the store does not answer. `ctr` and the
docker CLI are stand-in scripts here; the blobs are literals of test_containerd_store.image_blobs."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.unit.engine.test_containerd_store import ATTRS, CONTAINERD, Image, engine_of, image_blobs, saved_layout
from torchimages import engine
from torchimages.engine import content_store, manifests
from torchimages.engine.content_store import ContentStore, Unreadable

SBOM, PROVENANCE = "https://spdx.dev/Document", "https://slsa.dev/provenance/v0.2"
CTR = """#!/bin/sh
# ctr --address A --namespace N content get DIGEST: the blob from STORE/<hex>, as containerd's client does
echo "$@" >> {calls}
[ "$1 $3 $5 $6" = "--address --namespace content get" ] || exit 64
blob={store}/${{7#sha256:}}
[ -f "$blob" ] || {{ echo "ctr: content digest $7: not found" >&2; exit 1; }}
exec cat "$blob"
"""


def fake_ctr(tmp_path: Path, blobs: dict[str, bytes]) -> tuple[ContentStore, Path]:
    """A `ctr` serving `blobs` (by their digest's hex), and the file where it writes each call."""
    store, calls = tmp_path / "store", tmp_path / "calls"
    store.mkdir()
    for digest, data in blobs.items():
        (store / digest.removeprefix("sha256:")).write_bytes(data)
    ctr = tmp_path / "ctr"
    ctr.write_text(CTR.format(store=store, calls=calls))
    ctr.chmod(0o755)
    calls.write_text("")
    return ContentStore(str(ctr), "/run/x.sock"), calls


def engine_with(tmp_path: Path, store: ContentStore | None, image_id: str, saved: Path | None = None) -> Any:
    """A DockerEngine on the containerd store whose image r/x:1 has `image_id`, reading `store`; its docker CLI
    prints `saved` for `docker save` (else fails: a test that reads no save)."""
    cli = tmp_path / "docker"
    cli.write_text(f'#!/bin/sh\n[ "$1" = save ] && exec cat {saved}\nexit 3\n' if saved else "#!/bin/sh\nexit 3\n")
    cli.chmod(0o755)
    found, sdk = engine_of(CONTAINERD)
    found.__dict__.update(_docker_cli=str(cli), _content_stores=(store,) if store else ())

    known = Image()
    known.attrs = {**ATTRS, "Id": image_id}
    sdk.images.get = lambda reference: known if reference == "r/x:1" else Image()  # type: ignore[method-assign]
    return found


def test_the_attestations_are_four_blobs_read_by_digest_and_no_save(tmp_path: Path) -> None:
    index, blobs = image_blobs()
    store, calls = fake_ctr(tmp_path, blobs)
    attested = engine_with(tmp_path, store, index).attestations("r/x:1", "linux/amd64")
    assert attested.predicates == (SBOM, PROVENANCE)
    assert attested.problems() == []
    asked = calls.read_text().splitlines()
    assert len(asked) == 4  # the index, the attestation manifest, two statements: no layer, no image manifest
    assert asked[0] == f"--address /run/x.sock --namespace moby content get {index}"


@pytest.mark.parametrize("how", ["missing", "tampered"])
def test_a_store_that_does_not_answer_truly_leaves_the_saved_image_to_say(tmp_path: Path, how: str) -> None:
    index, blobs = image_blobs()
    _, good = image_blobs(tamper=True)
    served = {d: b for d, b in blobs.items() if d != index} if how == "missing" else good
    store, calls = fake_ctr(tmp_path, served)
    (tmp_path / "s").mkdir()
    found = engine_with(tmp_path, store, index, saved_layout(tmp_path / "s"))
    assert found.attestations("r/x:1", "linux/amd64").predicates == (SBOM, PROVENANCE)
    assert calls.read_text()  # the store was asked first


def test_a_tampered_statement_in_both_is_never_read_as_attested(tmp_path: Path) -> None:
    index, blobs = image_blobs(tamper=True)
    store, _ = fake_ctr(tmp_path, blobs)
    (tmp_path / "s").mkdir()
    found = engine_with(tmp_path, store, index, saved_layout(tmp_path / "s", tamper=True))
    with pytest.raises(engine.EngineError, match="is not in the image's content"):
        found.attestations("r/x:1", "linux/amd64")


def test_an_image_that_is_one_manifest_is_said_from_the_store_without_a_save(tmp_path: Path) -> None:
    _, blobs = image_blobs()
    manifest = next(d for d, b in blobs.items() if b.startswith(b'{"schemaVersion": 2, "layers"'))
    store, calls = fake_ctr(tmp_path, blobs)
    with pytest.raises(engine.EngineError, match="one image manifest, not an index"):
        engine_with(tmp_path, store, manifest).attestations("r/x:1", "linux/amd64")
    assert len(calls.read_text().splitlines()) == 1


def test_get_hashes_what_ctr_says_and_refuses_what_is_not_the_digest(tmp_path: Path) -> None:
    index, blobs = image_blobs()
    store, _ = fake_ctr(tmp_path, {index: blobs[index], "sha256:" + "0" * 64: b"other bytes"})
    assert store.get(index, 1 << 20) == blobs[index]
    with pytest.raises(Unreadable, match="does not hash to its name"):
        store.get("sha256:" + "0" * 64, 1 << 20)
    with pytest.raises(Unreadable, match="not found"):
        store.get("sha256:" + "1" * 64, 1 << 20)
    with pytest.raises(Unreadable, match="not a sha256 digest"):
        store.get("sha256:../../etc/passwd", 1 << 20)
    with pytest.raises(Unreadable, match="passed the limit"):
        store.get(index, 10)
    with pytest.raises(Unreadable, match="could not run"):
        ContentStore(str(tmp_path / "no-ctr"), "/run/x.sock").get(index, 1 << 20)


def test_blobs_are_read_once_each_and_asking_for_one_reads_it(tmp_path: Path) -> None:
    index, blobs = image_blobs()
    store, calls = fake_ctr(tmp_path, blobs)
    read = content_store.Blobs(store, 1 << 20)
    assert index in read and read[index] == blobs[index] and list(read) == [index] and len(read) == 1
    assert len(calls.read_text().splitlines()) == 1
    with pytest.raises(Unreadable):
        _ = "sha256:" + "2" * 64 in read
    number: object = 5
    assert number not in read


def test_the_stores_are_the_named_address_else_each_usable_default_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "ctr").write_text("#!/bin/sh\n")
    (bin_ / "ctr").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_))
    first, second = tmp_path / "a.sock", tmp_path / "b.sock"
    listening = [socket.socket(socket.AF_UNIX), socket.socket(socket.AF_UNIX)]
    listening[0].bind(str(first))
    listening[1].bind(str(second))
    (tmp_path / "plain").write_text("")
    places = (str(tmp_path / "none"), str(tmp_path / "plain"), str(first), str(second))
    monkeypatch.setattr(content_store, "ADDRESSES", places)
    ctr = str(bin_ / "ctr")
    try:
        assert content_store.find_content_stores({}) == (ContentStore(ctr, str(first)), ContentStore(ctr, str(second)))
        named = {"TORCHIMAGES_CONTAINERD_ADDRESS": "/elsewhere.sock"}
        assert content_store.find_content_stores(named) == (ContentStore(ctr, "/elsewhere.sock"),)
        allowed = os.access
        monkeypatch.setattr(os, "access", lambda path, mode: path != str(first) and allowed(path, mode))
        assert content_store.find_content_stores({}) == (ContentStore(ctr, str(second)),)  # a socket it may not use
        monkeypatch.setattr(content_store, "ADDRESSES", (str(tmp_path / "plain"),))
        assert content_store.find_content_stores({}) == ()  # a file, not a socket
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        assert content_store.find_content_stores(named) == ()  # no ctr
    finally:
        for one in listening:
            one.close()


def test_the_classic_store_has_no_content_store_to_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.unit.engine.test_containerd_store import CLASSIC

    found, _ = engine_of(CLASSIC)
    monkeypatch.setattr(content_store, "find_content_stores", lambda: pytest.fail("asked on the classic store"))
    assert found._content_stores == ()


def test_a_store_that_is_not_the_engines_is_passed_for_the_next(tmp_path: Path) -> None:
    """A system containerd beside the engine's own: the first answers `not found`, the second holds the image."""
    index, blobs = image_blobs()
    (tmp_path / "other").mkdir()
    other, asked_other = fake_ctr(tmp_path / "other", {})
    store, asked = fake_ctr(tmp_path, blobs)
    found = engine_with(tmp_path, store, index)
    found.__dict__.update(_content_stores=(other, store))
    assert found.attestations("r/x:1", "linux/amd64").predicates == (SBOM, PROVENANCE)
    assert len(asked_other.read_text().splitlines()) == 1 and len(asked.read_text().splitlines()) == 4


def test_a_cancelled_read_asks_the_store_nothing_and_is_said(tmp_path: Path) -> None:
    index, blobs = image_blobs()
    store, calls = fake_ctr(tmp_path, blobs)
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(engine.EngineError, match="cancelled"):
        engine_with(tmp_path, store, index).attestations("r/x:1", "linux/amd64", cancelled)
    assert calls.read_text() == ""


def test_a_ctr_that_never_answers_is_stopped_at_its_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctr = tmp_path / "ctr"
    ctr.write_text("#!/bin/sh\nexec sleep 30\n")
    ctr.chmod(0o755)
    monkeypatch.setattr(content_store, "GET_TIMEOUT_S", 0.5)
    started = time.monotonic()
    with pytest.raises(Unreadable, match="time limit"):
        ContentStore(str(ctr), "/run/x.sock").get("sha256:" + "1" * 64, 1 << 20)
    assert time.monotonic() - started < 10


def test_an_index_that_is_a_docker_manifest_list_gets_one_verdict_whichever_way_it_is_read() -> None:
    """The content store reads the index by the image's id, the save through its index.json: either way a Docker
    manifest list with the attestations beside the image is read alike (outside attack 21)."""
    from tests.unit.engine.test_containerd_store import sha
    from torchimages.engine import attestation

    _, blobs = image_blobs()
    (index,) = [b for b in blobs.values() if b.startswith(b'{"manifests"')]
    listed = json.dumps({"mediaType": manifests.DOCKER_LIST, **json.loads(index)}).encode()
    blobs[sha(listed)] = listed
    read = attestation.attested_in(sha(listed), blobs, "linux/amd64")
    top = json.dumps({"manifests": [{"mediaType": manifests.DOCKER_LIST, "digest": sha(listed)}]}).encode()
    assert attestation.read_attested(top, blobs, "linux/amd64") == read and read.problems() == []


def test_a_stored_blob_is_read_by_digest_from_the_store_that_holds_it_else_none(tmp_path: Path) -> None:
    index, blobs = image_blobs()
    (tmp_path / "other").mkdir()
    other, _ = fake_ctr(tmp_path / "other", {})
    store, _ = fake_ctr(tmp_path, blobs)
    found = engine_with(tmp_path, store, index)
    found.__dict__.update(_content_stores=(other, store))
    assert found.stored_blob(index) == blobs[index]
    assert found.stored_blob("sha256:" + "9" * 64) is None  # held by neither
    found.__dict__.update(_content_stores=())  # the classic store, or a socket this user may not use
    assert found.stored_blob(index) is None


def test_an_index_is_held_by_loading_a_layout_of_it_and_never_on_the_classic_store(tmp_path: Path) -> None:
    from tests.unit.engine.test_containerd_store import CLASSIC
    from torchimages.engine import oci_layout

    index = b'{"manifests":[],"mediaType":"application/vnd.oci.image.index.v1+json","schemaVersion":2}'
    found, sdk = engine_of(CONTAINERD)
    loaded: list[bytes] = []
    sdk.images.load = loaded.append  # type: ignore[attr-defined]
    found.hold_index("r/x:staged", index)
    assert loaded == [oci_layout.layout("r/x:staged", index)]
    with pytest.raises(engine.EngineError, match="not an index"):
        found.hold_index("r/x:staged", b'{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json"}')
    classic, sdk = engine_of(CLASSIC)
    sdk.images.load = loaded.append  # type: ignore[attr-defined]
    with pytest.raises(engine.EngineError, match="classic image store holds no index"):
        classic.hold_index("r/x:staged", index)
    assert len(loaded) == 1
