"""engine.process.streamed, what DockerEngine.exported streams `docker save` through: a command's stdout read
once; a failure said on leaving, a reader that stops early no failure, a cancel ending the stream at once
(real processes, no Docker)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from torchimages.engine import EngineError
from torchimages.engine.process import streamed


def test_the_whole_output_streams_and_a_clean_end_says_nothing() -> None:
    with streamed(["sh", "-c", "printf 'a%.0s' $(seq 1 100000)"]) as stream:
        assert stream.read() == b"a" * 100_000


def test_a_command_that_fails_after_its_output_is_an_engine_error_with_its_stderr() -> None:
    with pytest.raises(EngineError, match="boom"), streamed(["sh", "-c", "printf abc; echo boom >&2; exit 3"]) as s:
        assert s.read() == b"abc"


def test_a_reader_that_stops_early_kills_the_command_and_is_no_failure(tmp_path: Path) -> None:
    pid = tmp_path / "pid"
    started = time.monotonic()
    with streamed(["sh", "-c", f"echo $$ > {pid}; exec yes"]) as stream:
        assert stream.read(10) == b"y\ny\ny\ny\ny\n"
    assert time.monotonic() - started < 5
    assert not Path(f"/proc/{pid.read_text().strip()}").exists()  # killed and reaped


def test_a_reader_s_own_error_is_raised_as_it_is_when_the_command_did_not_fail() -> None:
    with pytest.raises(ValueError, match="bad archive"), streamed(["yes"]) as stream:
        stream.read(4)
        raise ValueError("bad archive")


def test_a_reader_s_error_after_the_command_failed_is_the_command_s_failure() -> None:
    """A cut-short stream (the reader's tar error) whose command failed: the engine's reason, not the tar's."""
    with pytest.raises(EngineError, match="no such image"), streamed(["sh", "-c", "echo no such image >&2; exit 1"]):
        raise ValueError("unexpected end of data")


def test_a_cancel_ends_a_stream_that_waits_and_says_so() -> None:
    cancelled = threading.Event()
    threading.Timer(0.3, cancelled.set).start()
    started = time.monotonic()
    with pytest.raises(EngineError, match="cancelled"), streamed(["sleep", "60"], cancelled) as stream:
        assert stream.read() == b""
    assert time.monotonic() - started < 5


def test_an_interrupt_goes_through_and_the_command_goes() -> None:
    with pytest.raises(KeyboardInterrupt), streamed(["yes"]) as stream:
        stream.read(1)
        raise KeyboardInterrupt


def test_a_command_that_cannot_start_is_an_engine_error() -> None:
    with pytest.raises(EngineError, match="could not run"), streamed(["/nonexistent/docker", "save", "x"]):
        pass


def test_a_cancel_set_before_it_starts_starts_nothing(tmp_path: Path) -> None:
    cancelled = threading.Event()
    cancelled.set()
    with (
        pytest.raises(EngineError, match="cancelled before it started"),
        streamed(["touch", str(tmp_path / "x")], cancelled),
    ):
        pass
    assert not (tmp_path / "x").exists()


def test_a_stream_that_stalls_is_stopped_and_said(tmp_path: Path) -> None:
    """A `docker save` that sends a little and then nothing, forever: the read waiting on it ends at the stall
    limit, and leaving says why (never a hang)."""
    started = time.monotonic()
    with (
        pytest.raises(EngineError, match=r"sent nothing for 0\.5 s: stopped"),
        streamed(["sh", "-c", "printf abc; exec sleep 30"], stall_s=0.5) as stream,
    ):
        assert stream.read(3) == b"abc"
        assert stream.read(10) == b""  # the end, once it was killed
    assert time.monotonic() - started < 5


def test_a_reader_that_gave_up_on_a_stalled_stream_is_not_held_on_leaving() -> None:
    """Leaving looks whether the stream was at its end: that look too ends at the stall limit, and the stall
    (the engine's reason) is said, not the reader's."""
    started = time.monotonic()
    with pytest.raises(EngineError, match="sent nothing"), streamed(["sh", "-c", "exec sleep 30"], stall_s=0.5):
        raise ValueError("bad archive")
    assert time.monotonic() - started < 5
