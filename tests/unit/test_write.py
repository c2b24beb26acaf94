"""The error a failed table write ends its batch with (pure: no SparkSession)."""

from __future__ import annotations

from icesink.batch.plan import plan_table
from icesink.batch.write import CHANGES_PER_TASK, write_failed, writer_tasks
from icesink.errors import WriteError
from icesink.model import PartitionRange, TableRef
from icesink.model import TopicPartition as TP

T = TableRef("ns", "accounts")

# What str() of the exception a failed mapInArrow action raises on the driver looks like: the JVM's
# job failure wrapping the Python worker's traceback, twice (task failure and driver stack trace).
SPARK_TRACE = """An error occurred while calling o231.collectToPython.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 12.0 failed 1 times, \
most recent failure: Lost task 0.0 in stage 12.0 (TID 17) (10.0.0.5 executor driver): \
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main
    process()
  File "/opt/icesink/icesink/writer.py", line 231, in write_files
    writer.write(pa.Table.from_batches(pending))
  File "pyarrow/table.pxi", line 4563, in pyarrow.lib.Table.cast
ValueError: Casting field 'id' with null values to non-nullable

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.sql.execution.python.PythonArrowOutput$$anon$1.read(PythonArrowOutput.scala:118)
\tat java.base/java.lang.Thread.run(Thread.java:840)

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2856)
\tat org.apache.spark.rdd.RDD.collect(RDD.scala:1048)
Caused by: org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main
    process()
  File "pyarrow/table.pxi", line 4563, in pyarrow.lib.Table.cast
ValueError: Casting field 'id' with null values to non-nullable

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\t... 1 more
"""


class Py4JJavaError(Exception):
    """Stands in for py4j's: only its str() matters here."""


def ranges() -> list[PartitionRange]:
    return [PartitionRange(TP("db.accounts", 0), 100, 149, 50), PartitionRange(TP("db.accounts", 2), 7, 7, 1)]


def test_a_spark_failure_names_the_table_offsets_and_the_python_cause() -> None:
    plan = plan_table(T, ranges(), {})
    err = write_failed(plan, ranges(), 42, Py4JJavaError(SPARK_TRACE))
    assert isinstance(err, WriteError)
    msg = str(err)
    assert msg.startswith("batch 42: writing table ns.accounts failed (")
    assert "db.accounts[0] offsets 100-149, db.accounts[2] offsets 7-7" in msg
    assert "ValueError: Casting field 'id' with null values to non-nullable." in msg
    assert "Nothing of this batch was committed" in msg
    assert "run it again" in msg or "runs it again" in msg
    # One line of cause, no JVM trace.
    assert "\n" not in msg
    assert "PythonException" not in msg
    assert "DAGScheduler" not in msg
    assert "Traceback" not in msg


def test_a_plain_exception_gives_its_type_and_first_line() -> None:
    plan = plan_table(T, ranges(), {})
    msg = str(write_failed(plan, ranges(), 3, RuntimeError("boom")))
    assert "writing table ns.accounts failed (db.accounts[0] offsets 100-149, db.accounts[2] offsets 7-7)" in msg
    assert "): RuntimeError: boom. Nothing of this batch was committed" in msg
    multi = str(write_failed(plan, ranges(), 3, OSError("disk full\nmore detail")))
    assert "OSError: disk full. Nothing" in multi
    empty = str(write_failed(plan, ranges(), 3, RuntimeError()))
    assert "): RuntimeError: . Nothing" in empty


def test_only_the_tables_own_topic_partitions_are_named() -> None:
    other = PartitionRange(TP("db.orders", 0), 5, 9, 5)
    plan = plan_table(T, ranges(), {})  # the table's topics only
    msg = str(write_failed(plan, [*ranges(), other], 1, RuntimeError("boom")))
    assert "db.orders" not in msg
    assert "db.accounts[0] offsets 100-149" in msg
    none = plan_table(T, [], {})
    assert "(no records)" in str(write_failed(none, ranges(), 1, RuntimeError("boom")))


# PySpark 4 turns the JVM's failure into pyspark.errors.exceptions.captured.PythonException, whose
# str() is the worker's traceback (the JVM stack trace follows only with
# spark.sql.pyspark.jvmStacktrace.enabled).
CAPTURED = """
  An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 3184, in main
    process()
  File "/opt/icesink/icesink/writer.py", line 200, in write
    self._data.write(_cast(data, self._task.arrow_schema, self._task.table), partition)
  File "/opt/icesink/icesink/writer.py", line 94, in _cast
    raise RequiredColumnError(
icesink.writer.RequiredColumnError: table ns.accounts: 1 row(s) have no value for required column id (a key column)
"""


class PythonException(Exception):  # noqa: N818 (named as PySpark names it)
    """Stands in for pyspark.errors.exceptions.captured.PythonException."""


def test_pyspark_4s_captured_python_exception() -> None:
    msg = str(write_failed(plan_table(T, ranges(), {}), ranges(), 5, PythonException(CAPTURED)))
    assert "failed (db.accounts[0] offsets 100-149, db.accounts[2] offsets 7-7): RequiredColumnError: table ns" in msg
    assert "required column id (a key column). Nothing of this batch was committed" in msg
    with_jvm = CAPTURED + "\n\nJVM stacktrace:\norg.apache.spark.SparkException: Job aborted\n" + SPARK_TRACE
    assert "ValueError: Casting field 'id'" in str(
        write_failed(plan_table(T, ranges(), {}), ranges(), 5, PythonException(with_jvm))
    )


def test_the_last_python_exception_line_is_the_cause() -> None:
    text = (
        "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\nKeyError: 'id'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "x.py", line 3, in f\n'
        "OSError: When uploading part for key 'ns/accounts/data/x.parquet': AWS Error SLOW_DOWN\n"
    )
    msg = str(write_failed(plan_table(T, ranges(), {}), ranges(), 1, PythonException(text)))
    assert "): OSError: When uploading part for key 'ns/accounts/data/x.parquet': AWS Error SLOW_DOWN. Nothing" in msg


def test_a_pyarrow_arrow_invalid_is_the_cause() -> None:
    last = CAPTURED.strip().splitlines()[-1]
    text = CAPTURED.replace(last, "pyarrow.lib.ArrowInvalid: Rescaling Decimal value would cause data loss")
    msg = str(write_failed(plan_table(T, ranges(), {}), ranges(), 1, PythonException(text)))
    assert "ArrowInvalid: Rescaling Decimal value would cause data loss" in msg


def test_a_long_cause_is_cut_to_500_characters() -> None:
    msg = str(write_failed(plan_table(T, ranges(), {}), ranges(), 1, RuntimeError("x" * 5000)))
    assert "RuntimeError: " + "x" * 486 + ". Nothing" in msg  # 500 characters of cause


def test_a_large_batch_of_changes_gets_enough_writer_tasks_to_bound_each() -> None:
    # Up to Spark's shuffle partitions' worth: its own partitioning, which it may coalesce.
    assert writer_tasks(1_000, 4) is None
    assert writer_tasks(4 * CHANGES_PER_TASK, 4) is None
    assert writer_tasks(4 * CHANGES_PER_TASK + 1, 4) == 5
    assert (writer_tasks(10_000_000, 4) or 0) * CHANGES_PER_TASK >= 10_000_000
    assert writer_tasks(CHANGES_PER_TASK + 1, 0) == 2
