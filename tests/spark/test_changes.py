"""Change classification and the last change per key (icesink.batch.changes) on hand-made rows,
and the one-pass tasks' dead letters of changes (tasks/change_rows.change_problems) against it."""

from __future__ import annotations

import json
import random
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from icesink.batch.changes import OP, ChangeSpec, change_order, classify
from icesink.batch.decode import ERROR, ERROR_TYPE, ROW, no_error
from icesink.config import WriteMode
from icesink.tasks.change_rows import change_problems
from icesink.tasks.last_changes import last_per_key

TARGET = StructType([StructField("id", LongType()), StructField("name", StringType()), StructField("op", StringType())])
CHANGELOG = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key")


def parsed(
    spark: SparkSession, records: list[tuple[str | None, dict[str, Any] | None]], target: StructType = TARGET
) -> DataFrame:
    """Decoded records: (the JSON key, the decoded row or None for a tombstone), offsets 0, 1, ..."""
    schema = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("offset", LongType()),
            StructField(ROW, target),
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


def test_the_one_pass_tasks_make_the_same_dead_letters_of_changes_in_the_same_words(spark: SparkSession) -> None:
    """The records classify makes dead letters of (a record key in the key column `__key`), and
    the same records as the tasks hold them (a key column a value lacks filled from the record
    key, a tombstone a row of only its key): the same rows, the same error classes and messages."""
    records: list[tuple[str | None, dict[str, Any] | None]] = [
        ('{"id": 1}', {"id": 1, "name": "a", "op": "c"}),
        ('{"id": 3}', {"id": 3, "name": "x", "op": " X "}),
        ('{"id": 4}', {"id": None, "name": "d", "op": "d"}),  # the key from the record key
        (None, {"id": None, "name": "e", "op": "i"}),
        (None, {"id": None, "name": "f", "op": "nope"}),
        ('{"id": 5}', {"id": 5, "name": "g", "op": None}),
        ('{"id": 2}', None),  # a tombstone: a delete of its record key
        (None, None),
        ('{"other": 1}', None),
    ]
    keys = [None if k is None else {"id": json.loads(k).get("id")} for k, _ in records]
    keyed = [(k, None if r is None else {**r, "__key": key}) for (k, r), key in zip(records, keys, strict=True)]
    target = StructType([*TARGET.fields, StructField("__key", StructType([StructField("id", LongType())]))])
    spec = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key")
    key = F.from_json(F.col("key").cast("string"), "id bigint")
    classified = outcome(classify(parsed(spark, keyed, target), spec, target, key, no_error()))
    theirs = {offset: (error_class, message) for offset, _, _, error_class, message in classified if error_class}

    def held(row: dict[str, Any] | None, key: dict[str, Any] | None) -> dict[str, Any]:
        own, of_key = row or {}, key or {}
        filled = own.get("id") if own.get("id") is not None else of_key.get("id")
        return {"id": filled, "name": own.get("name"), "op": own.get("op"), "__key": key}

    values = pa.Table.from_pylist([held(r, k) for (_, r), k in zip(records, keys, strict=True)])
    tombstones = pa.array([r is None for _, r in records])
    assert change_problems(values, values.column("op"), tombstones, spec, 10) == theirs
    assert sorted(c for c, _ in theirs.values()) == [*["MissingKey"] * 2, "NullValue", *["UnknownOperation"] * 3]


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


def max_by(rows: DataFrame, spec: ChangeSpec, columns: list[str]) -> DataFrame:
    """Each key's last change as Spark's `max_by` over the order columns' struct picks it (what
    icesink's reduction did in Spark before the writer took it over)."""
    payload = [c for c in [*columns, OP] if c not in spec.keys]
    last = F.max_by(F.struct(*[F.col(c) for c in payload]), F.struct(*change_order(spec))).alias("last")
    reduced = rows.groupBy(*spec.keys).agg(last)
    return reduced.select(*[F.col(c) if c in spec.keys else F.col(f"last.{c}") for c in [*columns, OP]])


def test_the_writers_reduction_picks_what_spark_picks(spark: SparkSession) -> None:
    """The writer's last change per key (last_changes.py, pyarrow) against Spark's max_by: the same
    rows, with ties, null order values and keys that arrive on two daily topics."""
    rng = random.Random(5)
    rows = [
        (
            rng.randrange(40),
            f"v{i}",
            rng.choice([None, 1, 2, 3]),
            rng.choice("IUD"),
            rng.choice(["t.20240101", "t.20240102"]),
            rng.randrange(3),
            rng.randrange(5),
        )
        for i in range(500)
    ]
    df = spark.createDataFrame(rows, CHANGES)
    columns = ["id", "v", "ts"]
    for spec in (
        ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key"),
        ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "__key", order_by="ts"),
    ):
        by_spark = {tuple(r) for r in max_by(df, spec, columns).collect()}
        # The writer's input layout: operation, order columns, then the table's columns.
        arrow = df.select(OP, *[c.alias(f"o{i}") for i, c in enumerate(change_order(spec))], *columns).toArrow()
        order = list(range(1, 1 + len(change_order(spec))))
        reduced = last_per_key(arrow, [arrow.num_columns - 3], order).select(["id", "v", "ts", OP])
        by_writer = {tuple(r.values()) for r in reduced.to_pylist()}
        assert len(by_spark) == 40
        assert by_writer == by_spark, spec
