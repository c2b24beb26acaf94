from __future__ import annotations

import json

from pyspark.sql.types import DateType, IntegerType, LongType, StringType, StructField, StructType, TimestampNTZType

from icesink.batch.decode.semantic import converted_type, semantic_paths

VALUE = {
    "type": "record",
    "name": "Value",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "born", "type": {"type": "int", "connect.name": "io.debezium.time.Date"}},
        {"name": "seen", "type": ["null", {"type": "long", "connect.name": "io.debezium.time.MicroTimestamp"}]},
        {"name": "other", "type": {"type": "string", "connect.name": "io.debezium.data.Json"}},
    ],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "fields": [
        {"name": "before", "type": ["null", VALUE]},
        {"name": "after", "type": ["null", "Value"]},  # a reference to the named type above
        {"name": "op", "type": "string"},
    ],
}


def test_paths_follow_unions_and_named_type_references() -> None:
    assert semantic_paths(json.dumps(ENVELOPE)) == {
        ("before", "born"): "io.debezium.time.Date",
        ("before", "seen"): "io.debezium.time.MicroTimestamp",
        ("after", "born"): "io.debezium.time.Date",
        ("after", "seen"): "io.debezium.time.MicroTimestamp",
    }


def test_converted_types() -> None:
    row = StructType(
        [StructField("id", IntegerType()), StructField("born", IntegerType()), StructField("seen", LongType()),
         StructField("other", StringType())]
    )  # fmt: skip
    env = StructType([StructField("before", row), StructField("after", row), StructField("op", StringType())])
    out = converted_type(env, semantic_paths(json.dumps(ENVELOPE)))
    assert isinstance(out, StructType)
    after = out["after"].dataType
    assert isinstance(after, StructType)
    assert [f.dataType for f in after.fields] == [IntegerType(), DateType(), TimestampNTZType(), StringType()]
