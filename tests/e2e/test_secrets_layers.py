"""The release gate's secrets check on a real engine: an image whose one RUN writes /root/.netrc (and a copy of
a build secret, and a /tmp leftover) and whose next RUN deletes them all; the final filesystem holds none, the
layer below still does, and the check reads it there through `docker save` (DockerEngine.exported). Seconds:
two RUN steps on the bootstrapped base."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from torchimages import engine
from torchimages.security import layers

pytestmark = pytest.mark.e2e
BASE = "torchimages/bootstrap-debian:12"


@pytest.fixture(scope="module")
def leaky(docker_client: Any, tmp_path_factory: pytest.TempPathFactory, debian_base: str) -> Iterator[tuple[str, Path]]:
    """The image's tag, and the secret file whose content it copied."""
    marker = uuid.uuid4().hex
    folder = tmp_path_factory.mktemp("leaky")
    secret = folder / "pip.conf"
    secret.write_text(f"[global]\nindex-url = https://mirror.example.org/{marker}/simple\n")
    (folder / "Dockerfile").write_text(
        f"FROM {BASE}\n"
        f"RUN printf 'machine example.org login u password {marker}\\n' > /root/.netrc"
        f" && printf '[global]\\nindex-url = https://mirror.example.org/{marker}/simple\\n' > /etc/copied.conf"
        " && mkdir /tmp/build && echo x > /tmp/build/wheel\n"
        "RUN rm -r /root/.netrc /etc/copied.conf /tmp/build\n"
    )
    tag = f"torchimages-e2e-{marker[:8]}/leaky:1"
    docker_client.images.build(path=str(folder), tag=tag, rm=True, forcerm=True, pull=False, network_mode="none")
    try:
        yield tag, secret
    finally:
        docker_client.images.remove(tag, force=True)


def test_what_a_later_layer_deletes_is_found_in_the_layer_below(leaky: tuple[str, Path], docker_client: Any) -> None:
    tag, secret = leaky
    total = len(docker_client.images.get(tag).attrs["RootFS"]["Layers"])
    result = layers.scan(engine.DockerEngine(), tag, [(secret.name, secret.read_bytes())])
    assert result.scanned, result.note
    found = {f.key: f for f in result.findings}
    assert set(found) == {"/root/.netrc", "/etc/copied.conf", "/tmp/build"}, result.findings
    for finding in found.values():  # the RUN that wrote them, the one before the top
        assert finding.subject.startswith(f"layer {total - 1} of {total} (sha256:"), finding
        assert finding.subject.endswith(f", deleted in layer {total}"), finding
    assert found["/root/.netrc"].detail == "/root/.netrc: a netrc file (logins and passwords)"
    assert found["/etc/copied.conf"].detail.endswith("the content of the build's secret pip.conf")
    base = layers.scan(engine.DockerEngine(), BASE, [(secret.name, secret.read_bytes())])
    assert base.scanned and base.findings == (), base.findings  # the bootstrapped base is clean


def test_an_export_of_no_image_or_a_cancelled_one_is_an_engine_error(leaky: tuple[str, Path]) -> None:
    real = engine.DockerEngine()
    with pytest.raises(engine.EngineError, match="no image"):
        layers.scan(real, "torchimages-e2e-none/nothing:0", ())
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(engine.EngineError, match="cancelled"):
        layers.scan(real, leaky[0], (), cancelled)
