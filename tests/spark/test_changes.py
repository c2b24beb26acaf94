"""Change classification and the last change per key (icesink.batch.changes) on hand-made rows."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from icesink.batch.changes import HELD, OP, ChangeSpec, classify, last_change_per_key, skip_older
from icesink.batch.decode import ERROR, ERROR_TYPE, ROW, no_error
from icesink.config import WriteMode

TARGET = StructType([StructField("id", LongType()), StructField("name", StringType()), StructField("op", StringType())])
CHANGELOG = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key")


def parsed(spark: SparkSession, records: list[tuple[str | None, dict[str, Any] | None]]) -> DataFrame:
    """Decoded records: (the JSON key, the decoded row or None for a tombstone), offsets 0, 1, ..."""
    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("offset", LongType()),
            StructField(ROW, TARGET),
            StructField(ERROR, ERROR_TYPE),
        ]
    )
    rows = [
        (None if k is None else k.encode(), None if r is None else b"{}", i, r, None)
        for i, (k, r) in enumerate(records)
    ]
    return spark.createDataFrame(rows, schema)


def outcome(df: DataFrame) -> list[tuple[Any, ...]]:
    """(offset, operation, row, error class, message) per record, in offset order."""
    rows = df.orderBy("offset").collect()
    return [
        (
            r.offset,
            r[OP],
            None if r[ROW] is None else tuple(r[ROW]),
            None if r[ERROR] is None else r[ERROR].error_class,
            None if r[ERROR] is None else r[ERROR].message,
        )
        for r in rows
    ]


def test_classify_operations_tombstones_and_missing_keys(spark: SparkSession) -> None:
    df = parsed(
        spark,
        [
            ('{"id": 1}', {"id": 1, "name": "a", "op": "c"}),
            ('{"id": 1}', {"id": 1, "name": "b", "op": " Update "}),
            ('{"id": 2}', None),  # a tombstone: a delete of its record key
            ('{"id": 3}', {"id": 3, "name": "x", "op": "x"}),
            ('{"id": 4}', {"id": None, "name": "d", "op": "d"}),  # the key comes from the record key
            (None, {"id": None, "name": "e", "op": "i"}),
            (None, None),
        ],
    )
    key = F.from_json(F.col("key").cast("string"), "id bigint")
    out = outcome(classify(df, CHANGELOG, TARGET, key, no_error()))
    assert out == [
        (0, "I", (1, "a", "c"), None, None),
        (1, "U", (1, "b", " Update "), None, None),
        (2, "D", (2, None, None), None, None),
        (3, None, (3, "x", "x"), "UnknownOperation", "operation column op holds 'x', not I, U or D"),
        (4, "D", (4, "d", "d"), None, None),
        (5, "I", (None, "e", "i"), "MissingKey", "no value for key column(s) id"),
        (6, "D", (None, None, None), "NullValue", "null value and null key: no row to delete"),
    ]


def test_upsert_rows_are_updates_whatever_their_columns_say(spark: SparkSession) -> None:
    df = parsed(spark, [('{"id": 1}', {"id": 1, "name": "a", "op": "nonsense"}), ('{"id": 1}', None)])
    upsert = ChangeSpec(WriteMode.UPSERT, ("id",), "op", "__key")
    key = F.from_json(F.col("key").cast("string"), "id bigint")
    assert [(o, op, err) for o, op, _, err, _ in outcome(classify(df, upsert, TARGET, key, no_error()))] == [
        (0, "U", None),
        (1, "D", None),
    ]


CHANGES = StructType(
    [
        StructField("id", LongType()),
        StructField("v", StringType()),
        StructField("ts", LongType()),
        StructField(OP, StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
    ]
)


def test_last_change_per_key_by_offset_or_by_the_order_column_then_skip_older(spark: SparkSession) -> None:
    rows = spark.createDataFrame(
        [
            (1, "a", 5, "I", "t", 0, 0),
            (1, "b", 3, "U", "t", 0, 1),  # last by offset, older by ts
            (2, "c", 1, "I", "t", 1, 0),
            (2, None, 2, "D", "t", 1, 1),
            (3, "d", 9, "I", "t.20240102", 0, 0),
            (3, "e", 9, "U", "t.20240101", 0, 5),  # the earlier daily topic sorts first
        ],
        CHANGES,
    )
    columns = ["id", "v", "ts"]
    by_offset = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key")
    last = last_change_per_key(rows, by_offset, columns)
    assert last.columns == [*columns, OP]
    assert sorted(tuple(r) for r in last.collect()) == [(1, "b", 3, "U"), (2, None, 2, "D"), (3, "d", 9, "I")]

    by_ts = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key", order_by="ts")
    last = last_change_per_key(rows, by_ts, columns)
    assert sorted(tuple(r) for r in last.collect()) == [(1, "a", 5, "I"), (2, None, 2, "D"), (3, "d", 9, "I")]

    held = spark.createDataFrame([(1, 6), (2, 1), (3, None)], f"id bigint, {HELD} bigint")
    kept = skip_older(last, held, by_ts)
    # Key 1's change (ts 5) is older than the held row (ts 6); a held row without ts says nothing.
    assert sorted(tuple(r) for r in kept.collect()) == [(2, None, 2, "D"), (3, "d", 9, "I")]
