"""A new JSON table's columns inferred in Python (schema/json_inference.py) against Spark's own
inference of the same sample (JsonDecoder, the options the job reads JSON with): equal wherever
Python infers, and left to Spark (None) wherever Spark would decide otherwise or the record is not
one Python's parser is sure Jackson reads alike."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from icesink.batch.decode.json import JsonDecoder
from icesink.schema.json_inference import inferred
from tests.support.frames import kafka_records

# Samples Python infers: each must come out exactly as Spark's inference does.
INFERRED: dict[str, list[bytes | None]] = {
    "flat, every type": [b'{"id": 1, "amount": 2.5, "name": "a", "ok": true, "ts": "2024-01-02T03:04:05Z"}'],
    # Java orders names by UTF-16 code units: an emoji (a surrogate pair, D83D...) before a
    # fullwidth letter (FF21), which code point order puts after it.
    "fields sorted as Java sorts names": [
        b'{"b": 1, "a": 2, "B": 3, "_x": 4, "\\u00e9": 5, "\\ud83d\\ude00": 6, "\\uff21": 7}'
    ],
    "long widened to double across records": [b'{"v": 1}', b'{"v": 2.5}', b'{"v": -0}', b'{"v": 1e3}'],
    "nulls: a column once a value comes": [b'{"a": null, "b": 1}', b'{"a": "x", "b": null}', None],
    "all-null field, empty array, empty struct: no column": [
        b'{"id": 1, "n": null, "e": [], "s": {}, "t": {"u": null}, "w": [null, null]}',
        b'{"id": 2, "n": null, "e": []}',
    ],
    "nested structs merge their fields at any depth": [
        b'{"device": {"os": "ios", "hw": {"cpu": 2}}, "items": [{"sku": "a", "qty": 1}]}',
        b'{"device": {"model": "x", "hw": {"ram": 1.5}}, "items": [{"sku": "b", "price": 2.5}, null]}',
        b'{"device": null, "items": null}',
    ],
    "arrays of arrays, of nulls then values": [b'{"m": [[1, 2], [], null], "t": [null, "x"]}', b'{"m": [[3.5]]}'],
    "Confluent-framed JSON": [b'\x00\x00\x00\x00\x07{"id": 7, "name": "n"}', b'{"id": 8}'],
    "whitespace around": [b'  {"id": 8}\n', b'\t{"id": 9}'],
    "long bounds": [b'{"a": 9223372036854775807, "b": -9223372036854775808}'],
    "no value at all": [None, b'{"a": null}'],
    # Dead letters in Spark's path: no column (tasks/dead_letters.json_problem).
    "beside records that are not JSON objects": [b'{"id": 1}', b"3", b"", b"not json", b'{"id": 2, "n', b"[1]"],
}

# Samples left to Spark: a type Spark would settle otherwise, or text Python's parser is unsure of.
LEFT_TO_SPARK: dict[str, list[bytes | None]] = {
    "a conflict Spark makes a string": [b'{"v": 1}', b'{"v": "x"}'],
    "a struct and a scalar": [b'{"v": {"a": 1}}', b'{"v": 2}'],
    "an array and a scalar": [b'{"v": [1]}', b'{"v": true}'],
    "an integer beyond 64 bits (Spark: a decimal)": [b'{"v": 18446744073709551616}'],
    "a double beyond range": [b'{"v": 1e400}'],
    "NaN": [b'{"v": NaN}'],
    "single quotes": [b"{'v': 1}"],
    "a key twice": [b'{"v": 1, "v": 2}'],
    "an empty key": [b'{"": 1, "v": 2}'],
    "a top-level array": [b'[{"v": 1}]'],
    "trailing text": [b'{"v": 1} x'],
    "not UTF-8": [b'{"v": "\xff"}'],
    "not JSON": [b"{v: 1}"],
}


def _spark_columns(spark: SparkSession, values: list[bytes | None]) -> StructType | None:
    return JsonDecoder(spark).plain_columns(kafka_records(spark, values), nested=True)


@pytest.mark.parametrize("name", sorted(INFERRED))
def test_python_infers_what_spark_infers(spark: SparkSession, name: str) -> None:
    values = INFERRED[name]
    mine = inferred(values)
    assert mine is not None, name
    columns = JsonDecoder(spark).plain_columns(mine, nested=True)
    assert columns == _spark_columns(spark, values), name


def test_what_python_is_not_sure_of_is_left_to_spark() -> None:
    decided = {name: inferred(values) for name, values in LEFT_TO_SPARK.items()}
    assert {name: got for name, got in decided.items() if got is not None} == {}
