"""The push retry policy (issue 11): transient registry or network failures are retried, at most 3 tries,
with exponential backoff, each retry said; an auth, "denied" or "unknown" error is not retried."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from torchimages.engine import EngineError, push_with_retries, transient


class FakeRegistry:
    """Answers each push with the next of its answers: a list of errors, or an exception to raise."""

    def __init__(self, *answers: list[str] | Exception) -> None:
        self.answers = list(answers)
        self.pushes = 0

    def push(self) -> list[str]:
        self.pushes += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def retry(registry: FakeRegistry) -> tuple[list[str], list[str], list[float]]:
    said: list[str] = []
    slept: list[float] = []
    sleep: Callable[[float], None] = slept.append
    errors = push_with_retries(registry.push, "r/x:1", said.append, sleep=sleep)
    return errors, said, slept


def test_a_connection_error_is_retried_with_backoff_until_it_succeeds() -> None:
    registry = FakeRegistry(
        EngineError("pushing r/x:1 failed: the Docker engine does not answer ([Errno 104] Connection reset by peer)"),
        ["r/x:1: received unexpected HTTP status: 503 Service Unavailable"],
        [],
    )
    errors, said, slept = retry(registry)
    assert errors == [] and registry.pushes == 3
    assert slept == [2.0, 4.0]
    assert [line.split(";")[1].strip() for line in said] == ["retry 1/2 in 2 s", "retry 2/2 in 4 s"]
    assert "Connection reset" in said[0] and "503" in said[1]


def test_at_most_three_tries() -> None:
    registry = FakeRegistry(*[["r/x:1: dial tcp 10.0.0.1:5000: connect: connection refused"]] * 4)
    errors, said, _ = retry(registry)
    assert registry.pushes == 3 and len(said) == 2
    assert errors == ["r/x:1: dial tcp 10.0.0.1:5000: connect: connection refused"]


@pytest.mark.parametrize(
    "error",
    [
        "denied: requested access to the resource is denied",
        "unauthorized: authentication required",
        "unknown: repository name not known to registry",
        "name unknown: repository not found",
    ],
)
def test_a_real_error_is_not_retried(error: str) -> None:
    registry = FakeRegistry([f"r/x:1: {error}"], [])
    errors, said, slept = retry(registry)
    assert registry.pushes == 1 and said == [] and slept == [] and errors == [f"r/x:1: {error}"]


def test_what_is_transient() -> None:
    assert transient("received unexpected HTTP status: 502 Bad Gateway")
    assert transient("unexpected status code 502 from the registry")  # the status alone is enough
    assert transient("unexpected status code 500") and transient("unexpected status code 504")
    assert transient("Get https://r/v2/: net/http: TLS handshake timeout")
    assert transient("unexpected EOF")
    assert not transient("denied: access forbidden")
    assert not transient("manifest invalid")


@pytest.mark.parametrize(
    "error",
    [
        "denied: requested access to the resource is denied (timeout waiting for the token)",
        "unauthorized: authentication required; connection reset by the auth server",
        "unknown: blob upload unknown (received unexpected HTTP status: 503 Service Unavailable)",
        "name unknown: repository not found after a temporary redirect",
    ],
)
def test_a_permanent_error_that_mentions_a_transient_word_is_not_retried(error: str) -> None:
    """A transient word inside a denied/unauthorized/unknown error does not make it worth another try."""
    assert not transient(error)
    registry = FakeRegistry([f"r/x:1: {error}"], [])
    errors, said, slept = retry(registry)
    assert registry.pushes == 1 and said == [] and slept == [] and errors == [f"r/x:1: {error}"]


@pytest.mark.parametrize("order", ["transient first", "permanent first"])
def test_an_attempt_with_a_transient_and_a_permanent_error_is_not_retried(order: str) -> None:
    """One push's errors are retried only when every one of them is transient."""
    passing = "r/x:1: received unexpected HTTP status: 503 Service Unavailable"
    denied = "r/x:1: denied: requested access to the resource is denied"
    both = [passing, denied] if order == "transient first" else [denied, passing]
    registry = FakeRegistry(both, [])
    errors, said, slept = retry(registry)
    assert registry.pushes == 1 and said == [] and slept == [] and errors == both
