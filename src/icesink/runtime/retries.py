"""Which batch failures are worth waiting out, and how long to wait between attempts. No I/O: a
Java exception is asked for its class and causes through py4j, the rest is read from the objects.

A batch is all or nothing per table (files first, then one commit per table that re-checks the
table's offsets), so running it again after a failure is safe: what did land is skipped, what did
not is written again. Worth running again are outages of the services the batch talks to — the
catalog, the S3 server, the Schema Registry, a broker — which end by themselves. Bad data, bad
config and a commit refused because another job moved the offsets do not: those fail the job.

A failure is judged by the classes of the exceptions in its chain (`__cause__`, else `__context__`:
`raise ... from None` keeps the latter), each where it comes from:
- the JVM, through py4j's Py4JJavaError: the Java exception and its causes, each by its class and
  superclasses (`JAVA_TRANSIENT`; a shaded copy such as org.apache.iceberg.shaded.org.apache.hc...
  counts as the class it copies), and an AWS service error when it is a 503 or a throttling;
- Python: ConnectionError, TimeoutError, requests' ConnectionError and Timeout, confluent-kafka's
  KafkaException for brokers it cannot reach, pyarrow's S3 OSError by its AWS error code, and our
  RegistryUnavailableError and CommitOutcomeUnknownError;
- a Python worker's failure (PySpark's PythonException, or the JVM's
  org.apache.spark.api.python.PythonException) and a task failure whose exception Spark could not
  ship: only their text is left, a traceback or a stack trace. Its exception lines are read for the
  class names of `TEXT_TRANSIENT` (and pyarrow's AWS error codes), never for free-text phrases.
Our other errors are verdicts: they count by their causes only, as their text may quote a record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import requests
from confluent_kafka import KafkaError, KafkaException
from pyspark.errors import PythonException

from icesink.errors import CommitOutcomeUnknownError, IcesinkError, RegistryUnavailableError

# Java classes (or superclasses) of the exceptions that services being unreachable or overloaded
# raise: the JDK's sockets, Apache HttpClient 4 (the AWS SDK) and 5 (Iceberg's REST client), and
# Iceberg's answers to HTTP 500, 503 and to a commit whose outcome it could not learn.
JAVA_TRANSIENT = frozenset(
    {
        "java.net.SocketException",  # ConnectException ("Connection refused"), "Connection reset", ...
        "java.net.SocketTimeoutException",  # "connect timed out", "Read timed out"
        "org.apache.http.NoHttpResponseException",
        "org.apache.http.ConnectionClosedException",
        "org.apache.http.conn.ConnectTimeoutException",
        "org.apache.hc.core5.http.NoHttpResponseException",
        "org.apache.hc.core5.http.ConnectionClosedException",
        "org.apache.iceberg.exceptions.ServiceUnavailableException",
        "org.apache.iceberg.exceptions.ServiceFailureException",
        "org.apache.iceberg.exceptions.CommitStateUnknownException",
    }
)
# An S3 error answer: transient when it is a 503 (Service Unavailable, SlowDown) or a throttling.
_AWS_SERVICE_ERROR = "software.amazon.awssdk.core.exception.SdkServiceException"
# Where only text is left: the Java exceptions its stack trace is made of.
_JAVA_TEXT_ONLY = ("org.apache.spark.api.python.PythonException",)
_JAVA_TASK_FAILURE = "org.apache.spark.SparkException"

# The same by name, for text (a stack trace cannot be asked for superclasses, so the subclasses
# that occur are listed), and the Python exceptions a worker's traceback may end with.
TEXT_TRANSIENT = JAVA_TRANSIENT | {
    "java.net.ConnectException",
    "java.net.NoRouteToHostException",
    "org.apache.http.conn.HttpHostConnectException",
    "org.apache.hc.client5.http.HttpHostConnectException",
    "org.apache.hc.client5.http.ConnectTimeoutException",
    "ConnectionError",  # Python's, and requests.exceptions.ConnectionError
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ConnectionAbortedError",
    "BrokenPipeError",
    "TimeoutError",
    "socket.timeout",
    "requests.exceptions.Timeout",
    "requests.exceptions.ConnectTimeout",
    "requests.exceptions.ReadTimeout",
    "icesink.errors.RegistryUnavailableError",
    "icesink.errors.CommitOutcomeUnknownError",
}

# pyarrow's S3 filesystem raises OSError("... AWS Error <code> during <operation> ...").
AWS_TRANSIENT_CODES = frozenset({"NETWORK_CONNECTION", "SLOW_DOWN", "SERVICE_UNAVAILABLE"})
_AWS_CODE = re.compile(r"\bAWS Error (\w+)")

# librdkafka's errors for brokers it cannot reach (KafkaError.retriable() is set for few of them).
KAFKA_UNREACHABLE = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT})

# An exception line of a Python traceback ("requests.exceptions.ConnectionError: ..."), of a Java
# stack trace ("Caused by: java.net.ConnectException: ...", py4j's ": java.net..."), or of Spark's
# task failure ("... (TID 17) (host executor 1): java.net.ConnectException: ...").
_EXCEPTION_LINE = re.compile(
    r"(?:^(?:: )?|\): |Caused by: )\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?::\s(.*)|:?$)", re.M
)
_JAVA_CHAIN_LIMIT = 32


def _named(name: str, names: Iterable[str]) -> bool:
    """`name` is one of `names`, or a shaded copy of one (`<prefix>.<name>`)."""
    return any(name == n or name.endswith("." + n) for n in names)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


# ---------------------------------------------------------------- text: a traceback, a stack trace


def _exception_lines(text: str) -> Iterator[tuple[str, str]]:
    for m in _EXCEPTION_LINE.finditer(text):
        yield m.group(1), m.group(2) or ""


def _transient_line(name: str, message: str) -> bool:
    if _named(name, TEXT_TRANSIENT):
        return True
    return name == "OSError" and aws_error_code(message) in AWS_TRANSIENT_CODES


def text_is_transient(text: str) -> bool:
    """Whether a traceback or stack trace has an exception line of a transient class."""
    return any(_transient_line(name, message) for name, message in _exception_lines(text))


# ---------------------------------------------------------------- the JVM


def _java_classes(throwable: Any) -> list[str]:
    names: list[str] = []
    cls = throwable.getClass()
    while cls is not None and len(names) < 16:
        names.append(str(cls.getName()))
        cls = cls.getSuperclass()
    return names


def _java_causes(throwable: Any) -> Iterator[Any]:
    for _ in range(_JAVA_CHAIN_LIMIT):
        if throwable is None:
            return
        yield throwable
        throwable = throwable.getCause()


def _java_one(throwable: Any) -> bool:
    classes = _java_classes(throwable)
    if any(_named(c, JAVA_TRANSIENT) for c in classes):
        return True
    if any(_named(c, (_AWS_SERVICE_ERROR,)) for c in classes):
        return int(throwable.statusCode()) == 503 or bool(throwable.isThrottlingException())
    text_only = _named(classes[0], _JAVA_TEXT_ONLY) or (
        _named(classes[0], (_JAVA_TASK_FAILURE,)) and throwable.getCause() is None
    )
    return text_only and text_is_transient(str(throwable.getMessage() or ""))


def java_is_transient(throwable: Any) -> bool:
    """Whether a Java exception (a py4j JavaObject) or one of its causes is an outage."""
    try:
        return any(_java_one(t) for t in _java_causes(throwable))
    except Exception:  # the JVM is gone or the object is not a Throwable: nothing to wait for
        return False


# ---------------------------------------------------------------- Python


def aws_error_code(message: str) -> str | None:
    """The AWS error code pyarrow's S3 filesystem puts into its OSError's message, if any."""
    m = _AWS_CODE.search(message)
    return m.group(1) if m else None


def _kafka_transient(e: KafkaException) -> bool:
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and (bool(err.retriable()) or err.code() in KAFKA_UNREACHABLE)


def _one(e: BaseException) -> bool:
    if isinstance(e, IcesinkError):
        return False
    if isinstance(e, (ConnectionError, TimeoutError, requests.ConnectionError, requests.Timeout)):
        return True
    if isinstance(e, KafkaException):
        return _kafka_transient(e)
    java = getattr(e, "java_exception", None)  # py4j's Py4JJavaError
    if java is not None:
        return java_is_transient(java)
    if isinstance(e, PythonException):
        return text_is_transient(str(e))
    if isinstance(e, OSError):
        return aws_error_code(str(e)) in AWS_TRANSIENT_CODES
    return False


def is_transient(exc: BaseException) -> bool:
    """True when `exc` comes from a service being unreachable, not from the data or the config."""
    chain = _chain(exc)
    if any(isinstance(e, (RegistryUnavailableError, CommitOutcomeUnknownError)) for e in chain):
        return True
    if isinstance(exc, (KeyboardInterrupt, SystemExit, MemoryError)):
        return False
    return any(_one(e) for e in chain)


def backoff_seconds(attempt: int, first: float = 2.0, cap: float = 30.0) -> float:
    """Wait before attempt `attempt` (1 = the first retry): doubling from `first`, at most `cap`."""
    return float(min(cap, first * 2 ** max(0, attempt - 1)))


def brief(exc: BaseException, limit: int = 300) -> str:
    """One line for the log: the first line of the innermost message that names the failure."""
    for e in reversed(_chain(exc)):
        text = str(e).strip()
        if text:
            lines = text.splitlines()
            line = next((ln.strip() for ln in lines if text_is_transient(ln.strip())), lines[0])
            return f"{type(e).__name__}: {line}"[:limit]
    return type(exc).__name__
