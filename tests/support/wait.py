"""The one way tests wait for something that happens in another process or service."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str | Callable[[], str], interval: float = 1.0
) -> None:
    """Polls `condition` every `interval` seconds until it holds; fails after `timeout` seconds,
    naming `what` (a function when the description is only worth building on failure, e.g. a log's
    tail). The condition may itself fail the test early (an assertion: the job exited)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            description = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {description}")
        time.sleep(interval)
