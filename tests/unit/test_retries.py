"""Which failures a batch waits out (`runtime.retries`), judged by exception class per edge: the JVM
through py4j, Python clients, and the text of a Python worker's traceback."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from confluent_kafka import KafkaError, KafkaException
from py4j.protocol import Py4JJavaError, escape_new_line
from pyspark.errors import PythonException

from icesink.errors import (
    CommitError,
    CommitOutcomeUnknownError,
    DecodeError,
    KafkaUnavailableError,
    RegistryUnavailableError,
    SchemaConflictError,
    WriteError,
)
from icesink.runtime import retries

# The JVM classes of the failures the fault tests provoke, with their superclasses (from the jars).
_SUPER = {
    "java.lang.Throwable": None,
    "java.lang.Exception": "java.lang.Throwable",
    "java.lang.RuntimeException": "java.lang.Exception",
    "java.io.IOException": "java.lang.Exception",
    "java.io.InterruptedIOException": "java.io.IOException",
    "java.io.UncheckedIOException": "java.lang.RuntimeException",
    "java.net.SocketException": "java.io.IOException",
    "java.net.ConnectException": "java.net.SocketException",
    "java.net.SocketTimeoutException": "java.io.InterruptedIOException",
    "java.net.UnknownHostException": "java.io.IOException",
    "org.apache.iceberg.shaded.org.apache.hc.client5.http.HttpHostConnectException": "java.net.ConnectException",
    "org.apache.iceberg.shaded.org.apache.hc.core5.http.NoHttpResponseException": "java.io.IOException",
    "org.apache.iceberg.aws.shaded.org.apache.http.conn.HttpHostConnectException": "java.net.ConnectException",
    "org.apache.iceberg.aws.shaded.org.apache.http.conn.ConnectTimeoutException": "java.io.InterruptedIOException",
    "org.apache.iceberg.exceptions.RESTException": "java.lang.RuntimeException",
    "org.apache.iceberg.exceptions.ServiceUnavailableException": "org.apache.iceberg.exceptions.RESTException",
    "org.apache.iceberg.exceptions.ServiceFailureException": "org.apache.iceberg.exceptions.RESTException",
    "org.apache.iceberg.exceptions.CommitStateUnknownException": "java.lang.RuntimeException",
    "org.apache.iceberg.exceptions.CommitFailedException": "java.lang.RuntimeException",
    "org.apache.iceberg.exceptions.ValidationException": "java.lang.RuntimeException",
    "org.apache.iceberg.exceptions.NoSuchTableException": "java.lang.RuntimeException",
    "software.amazon.awssdk.core.exception.SdkException": "java.lang.RuntimeException",
    "software.amazon.awssdk.core.exception.SdkClientException": "software.amazon.awssdk.core.exception.SdkException",
    "software.amazon.awssdk.core.exception.SdkServiceException": "software.amazon.awssdk.core.exception.SdkException",
    "software.amazon.awssdk.awscore.exception.AwsServiceException":
        "software.amazon.awssdk.core.exception.SdkServiceException",
    "software.amazon.awssdk.services.s3.model.S3Exception":
        "software.amazon.awssdk.awscore.exception.AwsServiceException",
    "org.apache.spark.SparkException": "java.lang.Exception",
    "org.apache.spark.api.python.PythonException": "java.lang.RuntimeException",
}  # fmt: skip


class _Class:
    """java.lang.Class as py4j shows it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def getName(self) -> str:  # noqa: N802
        return self._name

    def getSuperclass(self) -> _Class | None:  # noqa: N802
        parent = _SUPER[self._name]
        return _Class(parent) if parent else None


class _Throwable:
    """A java.lang.Throwable as py4j shows it, and what py4j needs to print a Py4JJavaError."""

    _target_id = "o42"

    def __init__(self, cls: str, message: str = "", cause: _Throwable | None = None, status: int = 0) -> None:
        self._cls, self._message, self._cause, self._status = cls, message, cause, status
        self._gateway_client = self

    def getClass(self) -> _Class:  # noqa: N802
        return _Class(self._cls)

    def getMessage(self) -> str:  # noqa: N802
        return self._message

    def getCause(self) -> _Throwable | None:  # noqa: N802
        return self._cause

    def statusCode(self) -> int:  # noqa: N802
        return self._status

    def isThrottlingException(self) -> bool:  # noqa: N802
        return self._status == 429

    def send_command(self, command: str) -> str:  # py4j's answer to "print this exception"
        lines, t = [], self
        while t is not None:
            lines.append(f"{'Caused by: ' if lines else ''}{t._cls}: {t._message}\n\tat x.y(Z.java:1)")
            t = t._cause
        return "ys" + escape_new_line("\n".join(lines))


def jvm_error(*chain: tuple[str, str] | tuple[str, str, int]) -> Py4JJavaError:
    """A real Py4JJavaError over a Java exception and its causes, outermost first."""
    cause = None
    for cls, message, *status in reversed(chain):
        cause = _Throwable(cls, message, cause, *status)
    assert cause is not None
    return Py4JJavaError("An error occurred while calling o99.commit.\n", cause)


REST_DOWN = jvm_error(
    ("org.apache.iceberg.exceptions.RESTException", "Error occurred while processing POST request"),
    ("org.apache.iceberg.shaded.org.apache.hc.client5.http.HttpHostConnectException",
     "Connect to http://localhost:8181 [localhost/127.0.0.1] failed: Connection refused"),
)  # fmt: skip


# ---------------------------------------------------------------- the JVM


def test_an_unreachable_catalog_is_waited_out() -> None:
    assert retries.is_transient(REST_DOWN)
    assert retries.is_transient(jvm_error(("java.net.SocketException", "Connection reset")))
    assert retries.is_transient(jvm_error(("java.net.SocketTimeoutException", "Read timed out")))
    no_answer = ("org.apache.iceberg.shaded.org.apache.hc.core5.http.NoHttpResponseException", "failed to respond")
    assert retries.is_transient(jvm_error(("org.apache.iceberg.exceptions.RESTException", "Error"), no_answer))


def test_the_catalogs_5xx_and_an_unknown_commit_state_are_waited_out() -> None:
    for cls in ("ServiceUnavailableException", "ServiceFailureException", "CommitStateUnknownException"):
        assert retries.is_transient(jvm_error((f"org.apache.iceberg.exceptions.{cls}", "Service Unavailable")))
    # Other answers of the catalog are final.
    assert not retries.is_transient(jvm_error(("org.apache.iceberg.exceptions.RESTException", "Unable to process")))
    assert not retries.is_transient(jvm_error(("org.apache.iceberg.exceptions.NoSuchTableException", "a.b")))


def test_an_unreachable_s3_is_waited_out() -> None:
    down = jvm_error(
        ("java.io.UncheckedIOException", "Failed to close"),
        ("software.amazon.awssdk.core.exception.SdkClientException",
         "Unable to execute HTTP request: Connect to localhost:9000 failed: Connection refused"),
        ("org.apache.iceberg.aws.shaded.org.apache.http.conn.HttpHostConnectException", "Connection refused"),
    )  # fmt: skip
    assert retries.is_transient(down)
    timeout = ("org.apache.iceberg.aws.shaded.org.apache.http.conn.ConnectTimeoutException", "connect timed out")
    assert retries.is_transient(jvm_error(("software.amazon.awssdk.core.exception.SdkClientException", "x"), timeout))


def test_s3_slow_down_is_waited_out_its_refusals_are_not() -> None:
    s3 = "software.amazon.awssdk.services.s3.model.S3Exception"
    assert retries.is_transient(jvm_error((s3, "Please reduce your request rate. (Status Code: 503)", 503)))
    assert retries.is_transient(jvm_error((s3, "Too Many Requests", 429)))
    assert not retries.is_transient(jvm_error((s3, "Access Denied (Status Code: 403)", 403)))
    assert not retries.is_transient(jvm_error((s3, "The specified bucket does not exist", 404)))


def test_a_fenced_commit_and_a_config_error_in_the_jvm_are_final() -> None:
    fenced = CommitError("table a.b: offsets changed while the batch was written")
    fenced.__cause__ = jvm_error(
        ("org.apache.iceberg.exceptions.ValidationException", "icesink: offsets changed; Connection refused")
    )
    assert not retries.is_transient(fenced)
    # A host name that does not resolve is a config error, however it is wrapped.
    assert not retries.is_transient(
        jvm_error(("software.amazon.awssdk.core.exception.SdkClientException", "Unable to execute HTTP request: x"),
                  ("java.net.UnknownHostException", "catalog.example"))
    )  # fmt: skip


def test_our_error_over_an_unreachable_catalog_is_waited_out() -> None:
    outer = CommitError("cannot create namespace demo")
    outer.__cause__ = REST_DOWN
    assert retries.is_transient(outer)


def test_a_jvm_that_cannot_answer_is_not_waited_for() -> None:
    class Gone:
        def getClass(self) -> Any:  # noqa: N802
            raise ConnectionRefusedError("the gateway is closed")

    assert not retries.java_is_transient(Gone())


# ---------------------------------------------------------------- Python clients


def test_python_connection_failures_are_waited_out() -> None:
    assert retries.is_transient(ConnectionRefusedError(111, "Connection refused"))
    assert retries.is_transient(TimeoutError("timed out"))
    assert retries.is_transient(requests.ConnectionError("Max retries exceeded"))
    assert retries.is_transient(requests.ReadTimeout("read timed out"))
    assert not retries.is_transient(requests.HTTPError("400 Client Error"))


def test_the_registry_and_an_unconfirmed_commit_are_waited_out() -> None:
    assert retries.is_transient(RegistryUnavailableError("registry http://r unavailable after 3 attempts"))
    assert retries.is_transient(CommitOutcomeUnknownError("table a.b: the catalog did not confirm"))


def test_a_wrapped_registry_outage_is_waited_out() -> None:
    outer = DecodeError("batch 3 could not be decoded")
    outer.__cause__ = RegistryUnavailableError("down")
    assert retries.is_transient(outer)


def test_pyarrow_s3_errors_count_by_their_aws_error_code() -> None:
    assert retries.is_transient(
        OSError("AWS Error NETWORK_CONNECTION during GetObject: curlCode: 7, Couldn't connect to server")
    )
    assert retries.is_transient(OSError("When uploading part for key 'x': AWS Error SLOW_DOWN during UploadPart"))
    assert not retries.is_transient(OSError("AWS Error ACCESS_DENIED during PutObject operation: Access Denied"))
    assert not retries.is_transient(OSError("[Errno 28] No space left on device"))


def _kafka(code: int, retriable: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, "Local: Broker transport failure", retriable=retriable))


def test_kafka_brokers_out_of_reach_are_waited_out() -> None:
    assert retries.is_transient(_kafka(KafkaError._TRANSPORT))
    assert retries.is_transient(_kafka(KafkaError._ALL_BROKERS_DOWN))
    assert retries.is_transient(_kafka(KafkaError.REQUEST_TIMED_OUT, retriable=True))
    assert not retries.is_transient(_kafka(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert not retries.is_transient(_kafka(KafkaError.SASL_AUTHENTICATION_FAILED))


def test_our_kafka_error_counts_by_the_clients_error() -> None:
    def raised(cause: KafkaException) -> KafkaUnavailableError:
        try:
            try:
                raise cause
            except KafkaException as e:
                raise KafkaUnavailableError(f"cannot read offsets from Kafka at k:9092: {e}") from None
        except KafkaUnavailableError as ours:
            return ours

    assert retries.is_transient(raised(_kafka(KafkaError._TRANSPORT)))
    assert not retries.is_transient(raised(_kafka(KafkaError.SASL_AUTHENTICATION_FAILED)))


# ---------------------------------------------------------------- a Python worker's traceback

WORKER = """
  An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 3184, in main
    process()
  File "/opt/icesink/icesink/tasks/files.py", line 200, in write
    writer.write(batch)
{last}
"""


def test_a_workers_network_failure_is_waited_out() -> None:
    s3 = "OSError: When uploading part for key 'ns/t/data/x.parquet': AWS Error NETWORK_CONNECTION during UploadPart"
    assert retries.is_transient(PythonException(WORKER.format(last=s3)))
    refused = "ConnectionRefusedError: [Errno 111] Connection refused"
    assert retries.is_transient(PythonException(WORKER.format(last=refused)))
    wrapped = WriteError("batch 4: writing table ns.t failed")
    wrapped.__cause__ = PythonException(WORKER.format(last=s3))
    assert retries.is_transient(wrapped)


def test_a_workers_poison_record_is_final() -> None:
    required = "icesink.tasks.files.RequiredColumnError: table ns.t: 1 row(s) have no value for id"
    assert not retries.is_transient(PythonException(WORKER.format(last=required)))
    # The class decides, not the words of a message quoting a record.
    quoting = "ValueError: 'java.net.ConnectException: Connection refused' is not a number"
    assert not retries.is_transient(PythonException(WORKER.format(last=quoting)))


def test_the_jvms_python_exception_is_read_as_text() -> None:
    s3 = "OSError: AWS Error NETWORK_CONNECTION during CompleteMultipartUpload operation"
    job_failed = jvm_error(
        ("org.apache.spark.SparkException", "Job aborted due to stage failure: Task 0 in stage 12.0 failed"),
        ("org.apache.spark.api.python.PythonException", WORKER.format(last=s3)),
    )
    assert retries.is_transient(job_failed)
    poison = jvm_error(
        ("org.apache.spark.SparkException", "Job aborted due to stage failure"),
        ("org.apache.spark.api.python.PythonException", WORKER.format(last="ValueError: Casting field 'id'")),
    )
    assert not retries.is_transient(poison)


def test_a_task_failure_without_its_exception_is_read_as_text() -> None:
    lost = (
        "Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 "
        "in stage 3.0 (TID 5) (10.0.0.5 executor driver): java.net.ConnectException: Connection refused\n\tat x"
    )
    assert retries.is_transient(jvm_error(("org.apache.spark.SparkException", lost)))
    # With a cause, the cause decides (here a poison record), not the words of the summary.
    assert not retries.is_transient(
        jvm_error(("org.apache.spark.SparkException", lost), ("java.lang.ArithmeticException", "overflow"))
    )


@pytest.mark.parametrize(
    "line",
    [
        "Caused by: java.net.ConnectException: Connection refused",
        "java.net.SocketTimeoutException: connect timed out",
        "org.apache.iceberg.aws.shaded.org.apache.http.NoHttpResponseException: localhost:9000 failed to respond",
        "requests.exceptions.ConnectionError: HTTPConnectionPool(host='r', port=8081): Max retries exceeded",
        "icesink.errors.RegistryUnavailableError: schema registry http://r unavailable after 5 attempts",
        "TimeoutError",
    ],
)
def test_exception_lines_of_transient_classes(line: str) -> None:
    assert retries.text_is_transient(f'Traceback (most recent call last):\n  File "x.py", line 1\n{line}\n')


# ---------------------------------------------------------------- final verdicts, backoff, the log line


def test_verdicts_on_data_and_config_are_final() -> None:
    assert not retries.is_transient(SchemaConflictError("column id is bigint in the table, string in the record"))
    # Our own verdict stands even when the text happens to mention a connection.
    assert not retries.is_transient(DecodeError("topic t partition 0 offset 3: 'Connection refused' is not a number"))
    assert not retries.is_transient(ValueError("division by zero"))
    assert not retries.is_transient(RuntimeError("java.net.ConnectException: Connection refused"))
    assert not retries.is_transient(KeyboardInterrupt())


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [retries.backoff_seconds(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


def test_brief_names_the_unreachable_part() -> None:
    e = RuntimeError(
        "An error occurred while calling o123.commit.\n  at x\njava.net.ConnectException: Connection refused"
    )
    assert retries.brief(e) == "RuntimeError: java.net.ConnectException: Connection refused"
    assert retries.brief(REST_DOWN).startswith("Py4JJavaError: Caused by: org.apache.iceberg.shaded.org.apache.hc")
    assert retries.brief(ValueError("bad\nworse")) == "ValueError: bad"
