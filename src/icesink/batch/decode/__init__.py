"""Kafka record -> table row decoders. Each one turns the batch's records into the same shape:
the record's Kafka metadata, ROW (a struct with the target table's columns) and ERROR (null when
the record decoded; else the stage that failed, an error class and a message).

A decoder never turns a bad record into nulls: ROW is ignored wherever ERROR is set, and such
records go to the dead-letter table or fail the batch, by policy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

ROW = "__icesink_row"
ERROR = "__icesink_error"

_T = TypeVar("_T")


class ExpressionMemo(Generic[_T]):
    """Decode expressions by what they depend on (writer schemas, the table's schema), the least
    recently used dropped first. Building one takes tens to hundreds of JVM calls, and a batch of a
    whole database's capture builds one per table: the memo holds a few hundred tables' worth (an
    expression is a small JVM object tree)."""

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._items: OrderedDict[Hashable, _T] = OrderedDict()
        self._lock = threading.Lock()  # tables are decoded side by side

    def get(self, key: Hashable, build: Callable[[], _T]) -> _T:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found
        built = build()  # outside the lock: another table's build need not wait for this one
        with self._lock:
            self._items[key] = built
            self._items.move_to_end(key)
            if len(self._items) > self._capacity:
                self._items.popitem(last=False)
        return built


_FIXED: ExpressionMemo[Column] = ExpressionMemo(capacity=4096)


def fixed(key: Hashable, build: Callable[[], Column]) -> Column:
    """The expression `build` makes, which depends on nothing but `key`, built once per Spark
    context: each build is several JVM calls, and a batch of a few hundred tables asks for the
    same few (an error struct, a pending check) thousands of times. An expression is an immutable
    JVM object, shared by every DataFrame and thread that uses it. (The key holds the context
    itself, not its id, which a later context could reuse.)"""
    return _FIXED.get((SparkContext._active_spark_context, key), build)


@dataclass(frozen=True)
class Source:
    """Which part of a Kafka record a decoder reads: the value, or the key."""

    column: str
    schema_id_header: str  # where newer Confluent serializers put the schema id instead of the frame


VALUE = Source("value", "__value_schema_id")
KEY = Source("key", "__key_schema_id")

ERROR_TYPE = StructType(
    [
        StructField("stage", StringType()),
        StructField("error_class", StringType()),
        StructField("message", StringType()),
    ]
)


class Inspected(Protocol):
    # The union of the row schemas the batch's records carry.
    schema: StructType

    def parse(self, target: StructType) -> DataFrame:
        """The records' columns + ROW (shaped as `target`: the table's schema after evolution) + ERROR,
        `fenced`: every pass filters on ERROR (good rows, dead letters), and unfenced the filter
        is pushed below the decode, which then runs again inside it for each record."""
        ...


class Decoder(Protocol):
    # Whether `inspect` reads the records themselves (JSON's type inference) even when given the
    # schemas: then a batch read by it and by the write is cached first.
    scans: bool

    def plan_column(self) -> Column | None:
        """The per-record value naming the record's writer schema (Avro: its frame key), or None
        when the decoder has no such thing."""
        ...

    def guess(self, seen: list[Any] | None, shape: DataType | None, topics: Sequence[str]) -> Any | None:
        """What to decode a table's records of `topics` with in one pass, without looking at them:
        from `seen`, the `plan_column` values the topics carried last time (Avro; else the
        registry's latest schemas), or from `shape`, the table's type of what this decoder reads
        (JSON; None for a new table); None when the decoder must look at the records first."""
        ...

    def pending(self, planned: Any) -> Column:
        """The records (as read from Kafka) that a guessed inspect with `planned` leaves pending."""
        ...

    def inspect(self, records: DataFrame, planned: Any = None, guessed: bool = False) -> Inspected:
        """Looks at the batch so rows can be parsed. `planned`: the `plan_column` values of the
        records (None: the decoder finds them, a scan). With `guessed`, `planned` comes from
        `guess`, and a record it does not cover is left PENDING for a second pass instead of being
        an error."""
        ...


# The stage of a record a guessed pass could not decode because its schema was not among the guessed
# ones: neither a row nor a dead letter, it is decoded in a second pass (see batch/new_schemas.py).
PENDING = "pending"


def pending() -> Column:
    return error(PENDING, "NewSchema", "a writer schema this pass did not know")


def is_pending(err: Column | str = ERROR) -> Column:
    """Whether `err` (a record's ERROR, or the column of that name) marks it pending; false for a
    null (a decoded record)."""
    if isinstance(err, str):
        return fixed(("is_pending", err), lambda: is_pending(F.col(err)))
    return F.coalesce(err["stage"] == PENDING, F.lit(False))


def error(stage: str, error_class: str, message: Column | str) -> Column:
    if isinstance(message, str):
        return fixed(("error", stage, error_class, message), lambda: _error(stage, error_class, F.lit(message)))
    return _error(stage, error_class, message)


def _error(stage: str, error_class: str, message: Column) -> Column:
    kind = fixed(("error kind", stage), lambda: F.lit(stage).alias("stage"))
    cls = fixed(("error class", error_class), lambda: F.lit(error_class).alias("error_class"))
    return F.struct(kind, cls, message.alias("message"))


def no_error() -> Column:
    return fixed("no_error", lambda: F.lit(None).cast(ERROR_TYPE))


def fenced(err: Column) -> Column:
    """`err` (a record's ERROR) as the optimizer cannot see through: the filters that split good rows
    from bad records stay above it instead of being pushed down with every alias inlined, which
    for a deep decode (a Connect envelope, then change classification) multiplies the plan until
    the driver runs out of memory. Costs one partition-id read per record."""
    return F.when(fixed("fence", lambda: F.spark_partition_id() >= 0), err)


def good_rows(parsed: DataFrame, target: StructType) -> DataFrame:
    """The rows that decoded, as the target's columns in the target's order."""
    good = parsed.where(F.col(ERROR).isNull())
    row = parsed.schema[ROW].dataType
    names, want = (row.fieldNames(), target.fieldNames()) if isinstance(row, StructType) else ([], [])
    if want and names[: len(want)] == want:
        # One expression instead of two per column: each is a few py4j calls, which a table of a
        # few dozen columns pays on every batch (~0.05 s). A parse's row can end in its corrupt-record
        # column, which is dropped.
        rows = good.select(fixed("row.*", lambda: F.col(f"{ROW}.*")))
        return rows.drop(*names[len(want) :]) if len(names) > len(want) else rows
    return good.select(*[F.col(f"{ROW}.`{f.name}`").alias(f.name) for f in target.fields])


def is_bad() -> Column:
    """Whether a record failed to decode (not one left pending for a second pass)."""
    return fixed("is_bad", lambda: F.col(ERROR).isNotNull() & ~is_pending())


def bad_records(parsed: DataFrame) -> DataFrame:
    """The records that failed to decode (not those left pending for a second pass)."""
    return parsed.where(is_bad())
