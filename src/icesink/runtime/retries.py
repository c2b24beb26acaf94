"""Which batch failures are worth waiting out, and how long to wait between attempts. Pure.

A batch is all or nothing per table (files first, then one commit per table that re-checks the
table's offsets), so running it again after a failure is safe: what did land is skipped, what did
not is written again. Worth running again are outages of the services the batch talks to — the
catalog, the S3 server, the Schema Registry, a broker — which end by themselves. Bad data, bad
config and a commit refused because another job moved the offsets do not: those fail the job.
"""

from __future__ import annotations

from icesink.errors import CommitOutcomeUnknownError, IcesinkError, RegistryUnavailableError

# Text of the errors that services being unreachable or overloaded raise through the JVM (Iceberg's
# REST client, the AWS SDK, Kafka's client) and the Python workers (pyarrow's S3, httpx).
_UNREACHABLE = (
    "java.net.ConnectException",
    "Connection refused",
    "Connection reset",
    "connect timed out",
    "Read timed out",
    "SocketTimeoutException",
    "NoHttpResponseException",
    "Unable to execute HTTP request",
    "Service Unavailable",
    "ServiceUnavailableException",
    "ServiceFailureException",
    "CommitStateUnknownException",
    "Failed to connect",
    "Couldn't connect to server",
    "NETWORK_CONNECTION",
    "SlowDown",
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def is_transient(exc: BaseException) -> bool:
    """True when `exc` comes from a service being unreachable, not from the data or the config.
    Our own errors count by their cause only: their text may quote a record or a column."""
    chain = _chain(exc)
    if any(isinstance(e, (RegistryUnavailableError, CommitOutcomeUnknownError)) for e in chain):
        return True
    if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
        return False
    text = "\n".join(str(e) for e in chain if not isinstance(e, IcesinkError))
    return any(marker in text for marker in _UNREACHABLE)


def backoff_seconds(attempt: int, first: float = 2.0, cap: float = 30.0) -> float:
    """Wait before attempt `attempt` (1 = the first retry): doubling from `first`, at most `cap`."""
    return float(min(cap, first * 2 ** max(0, attempt - 1)))


def brief(exc: BaseException, limit: int = 300) -> str:
    """One line for the log: the first line of the innermost message that names the failure."""
    for e in reversed(_chain(exc)):
        text = str(e).strip()
        if text:
            line = next(
                (ln.strip() for ln in text.splitlines() if any(m in ln for m in _UNREACHABLE)),
                text.splitlines()[0],
            )
            return f"{type(e).__name__}: {line}"[:limit]
    return type(exc).__name__
