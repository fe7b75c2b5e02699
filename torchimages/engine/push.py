"""Pushes retried on a registry's or the network's passing trouble, never on a permanent error."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from torchimages.engine.types import EngineError

# A push is tried at most PUSH_TRIES times; the n-th retry waits PUSH_BACKOFF_S * 2**(n-1) seconds.
PUSH_TRIES = 3
PUSH_BACKOFF_S = 2.0


# A registry's or the network's passing trouble (worth another try); an auth or "denied"/"unknown" error is not.
_TRANSIENT = re.compile(
    r"connection (?:refused|reset|aborted)|broken pipe|timed? ?out|timeout|\bEOF\b|temporar(?:y|ily)|"
    r"no such host|network is unreachable|\b50[0234]\b|internal server error|bad gateway|service unavailable|"
    r"gateway time|too many requests|\b429\b",
    re.IGNORECASE,
)
_PERMANENT = re.compile(
    r"denied|unauthori[sz]ed|authentication required|forbidden|\bunknown\b|not found", re.IGNORECASE
)


def transient(error: str) -> bool:
    """Whether a push error is worth another try: a connection or server (5xx, 429) error, never an auth,
    "denied" or "unknown" one."""
    return bool(_TRANSIENT.search(error)) and not _PERMANENT.search(error)


def push_with_retries(
    attempt: Callable[[], list[str]],
    what: str,
    say: Callable[[str], None],
    tries: int = PUSH_TRIES,
    backoff_s: float = PUSH_BACKOFF_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Run `attempt` (one push: its errors, or EngineError) until it succeeds, fails for good or has been
    tried `tries` times; exponential backoff between tries, each retry told to `say`. The last errors."""
    for n in range(1, tries + 1):
        try:
            errors = attempt()
        except EngineError as exc:
            errors = [str(exc)]
        if not errors or n == tries or not all(map(transient, errors)):
            return errors
        delay = backoff_s * 2 ** (n - 1)
        say(f"{what}: push failed ({errors[-1]}); retry {n}/{tries - 1} in {delay:.0f} s")
        sleep(delay)
    return errors
