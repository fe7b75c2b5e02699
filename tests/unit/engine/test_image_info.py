"""What `docker image inspect` says of an image, read into ImageInfo (docker_engine._image_info): its platform is
`os/architecture` where both are plain names, else "" (nothing is asked of a platform it does not name)."""

from __future__ import annotations

from typing import Any

import pytest

from torchimages.engine.docker_engine import _image_info

INSPECTED = {  # the fields read, as Docker 26.1 printed them for a built image (2026-12-07)
    "Id": "sha256:" + "1" * 64,
    "RepoTags": ["repo/img:tag"],
    "RepoDigests": [],
    "Architecture": "arm64",
    "Os": "linux",
    "Size": 123,
    "Config": {"Env": ["PATH=/opt/venv/bin:/usr/bin", "EMPTY"], "User": "1000", "Labels": {"a": "b"}},
    "RootFS": {"Layers": ["sha256:" + "2" * 64]},
}


def test_an_inspected_image_is_read_with_its_platform() -> None:
    info = _image_info("repo/img:tag", INSPECTED)
    assert (info.id, info.platform, info.size, info.user, info.tags) == (
        "sha256:" + "1" * 64,
        "linux/arm64",
        123,
        "1000",
        ("repo/img:tag",),
    )
    assert info.env == {"PATH": "/opt/venv/bin:/usr/bin", "EMPTY": ""} and info.labels == {"a": "b"}


@pytest.mark.parametrize(
    ("os_name", "architecture"),
    [
        (None, "amd64"),
        ("linux", None),
        ("", "amd64"),
        ("linux", "amd64/v8"),
        ("linux", 64),
        ("lin ux", "amd64"),
        ("linux", "\uff41md64"),  # a full-width letter
    ],
)
def test_a_platform_that_is_not_two_plain_names_is_none(os_name: Any, architecture: Any) -> None:
    assert _image_info("x", {**INSPECTED, "Os": os_name, "Architecture": architecture}).platform == ""
