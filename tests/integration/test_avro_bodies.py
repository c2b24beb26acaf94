"""Which Avro bodies a one-pass task makes dead letters of (tasks/avro_bodies.undecodable), against
Spark's `from_avro` as Spark's path calls it (PERMISSIVE, the writer schema read with a sentinel
field: batch/decode/avro.py): every body judged undecodable is one Spark cannot decode, and over
good bodies cut short, bodies with a byte changed and hand-made malformations of every type,
the two agree body for body. (An integration test only for the session: from_avro needs the
spark-avro jar, which the spark tier's plain session does not load.)"""

from __future__ import annotations

import io
import json
import random
from typing import Any

import fastavro
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from icesink.schema.avro import SENTINEL, reader_with_sentinel
from icesink.tasks.avro_bodies import undecodable

ITEM = {"type": "record", "name": "Item", "fields": [{"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}
SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "n", "type": "int"},
        {"name": "ok", "type": "boolean"},
        {"name": "x", "type": "double"},
        {"name": "f", "type": "float"},
        {"name": "s", "type": ["null", "string"]},
        {"name": "raw", "type": "bytes"},
        {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B", "C"]}},
        {"name": "items", "type": {"type": "array", "items": ITEM}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {
            "name": "where",
            "type": ["null", {"type": "record", "name": "Where", "fields": [{"name": "zip", "type": "string"}]}],
        },
    ],
}


def body(**changes: Any) -> bytes:
    record = {
        "id": 7, "n": -3, "ok": True, "x": 1.5, "f": 2.5, "s": "hello", "raw": b"\x01\x02", "code": b"abc",
        "kind": "B", "items": [{"sku": "a", "qty": 1}, {"sku": "bb", "qty": 2}], "attrs": {"k": 5, "j": -1},
        "where": {"zip": "12345"}, **changes,
    }  # fmt: skip
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
    return out.getvalue()


GOOD = body()
X = b"\x00\x00\x00\x00\x00\x00\xf8?"  # x: 1.5, after the boolean
ONE_ITEM = body(items=[{"sku": "a", "qty": 1}])


def made() -> dict[bytes, str]:
    """Bodies made bad (or not) on purpose, each with what it is."""
    head = body(items=[], attrs={}, where=None)  # fields up to `s` are at the same place in both
    s_at = GOOD.index(b"\x02\x0ahello")  # the union index of `s`, then its length and bytes
    return {
        GOOD: "good",
        GOOD + b"\x00\x01": "trailing bytes (Java ignores them)",
        head: "good, empty array and map, null union",
        GOOD[:s_at] + b"\x04" + GOOD[s_at + 1 :]: "union index 2 of 2 branches",
        GOOD[:s_at] + b"\x01" + GOOD[s_at + 1 :]: "union index -1",
        GOOD[:s_at] + b"\x80\x80\x80\x80\x80\x01" + GOOD[s_at + 1 :]: "an int varint of 6 bytes",
        GOOD[: s_at + 1] + b"\x09" + GOOD[s_at + 2 :]: "a negative string length",
        GOOD[: s_at + 1] + b"\x7e" + GOOD[s_at + 2 :]: "a string longer than the body",
        GOOD.replace(b"hello", b"h\xffllo"): "a string that is not UTF-8 (Java does not check)",
        body(kind="C").replace(b"abc\x04", b"abc\x06"): "enum index 3 of 3 symbols",
        GOOD.replace(b"\x01" + X, b"\x02" + X): "a boolean byte of 2",
        ONE_ITEM.replace(b"abc\x02\x02", b"abc\x02\x01\x06"): "array count -1 and its byte size",
    }  # fmt: skip


def corpus() -> dict[bytes, str]:
    found = made()
    for cut in range(len(GOOD)):
        found.setdefault(GOOD[:cut], f"cut to {cut} bytes")
    rng = random.Random(11)
    for k in range(300):
        at = rng.randrange(len(GOOD))
        changed = GOOD[:at] + bytes([rng.randrange(256)]) + GOOD[at + 1 :]
        found.setdefault(changed, f"byte {at} changed ({k})")
    return found


def spark_fails(spark: SparkSession, bodies: list[bytes]) -> list[bool]:
    writer = json.dumps(SCHEMA)
    df = spark.createDataFrame(list(enumerate(bodies)), "i int, b binary")
    decoded = from_avro(F.col("b"), writer, {"mode": "PERMISSIVE", "avroSchema": reader_with_sentinel(writer)})
    rows = df.select("i", decoded[SENTINEL].isNull().alias("failed")).orderBy("i").collect()
    return [r.failed for r in rows]


def test_undecodable_bodies_are_those_spark_cannot_decode(spark: SparkSession) -> None:
    bodies = corpus()
    spark_says = dict(zip(bodies, spark_fails(spark, list(bodies)), strict=True))
    task_says = {b: undecodable(SCHEMA, b) for b in bodies}
    assert [bodies[b] for b in bodies if task_says[b] and not spark_says[b]] == [], "letters Spark reads as rows"
    assert [bodies[b] for b in bodies if spark_says[b] and not task_says[b]] == [], "Spark's failures not judged"
    judged = {why for b, why in bodies.items() if task_says[b]}
    assert {"union index 2 of 2 branches", "union index -1", "an int varint of 6 bytes", "a negative string length",
            "a string longer than the body", "enum index 3 of 3 symbols", "cut to 0 bytes"} <= judged  # fmt: skip
    rows = {why for b, why in bodies.items() if not spark_says[b]}
    assert {"good", "trailing bytes (Java ignores them)", "a string that is not UTF-8 (Java does not check)",
            "a boolean byte of 2", "array count -1 and its byte size"} <= rows  # fmt: skip
