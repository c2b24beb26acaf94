"""What a batch's Avro decode executes, in the job's own session (its jars and JVM options): the
plan runs as generated code, compiled by the JIT, and decodes each record once. A decode that ran
interpreted was half as fast, and nothing else would notice."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace
from typing import Any, cast

import fastavro
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.batch.decode import ERROR, bad_records, good_rows, is_pending
from icesink.batch.decode.avro import AvroDecoder
from icesink.batch.decode.json import JsonDecoder
from icesink.job.session import JIT_OPTIONS
from icesink.kafka import wire

EVENT = {
    "type": "record",
    "name": "Event",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"], "default": None}],
}
RECORDS = "value binary, headers array<struct<key:string,value:binary>>, topic string, partition int, offset long"


def _body(item: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(EVENT), item)
    return out.getvalue()


class _OneSchemaRegistry:
    """Stands in for the registry, which this test is not about: every schema id is EVENT."""

    def schema(self, schema_id: Any) -> Any:
        return SimpleNamespace(schema_type="AVRO", schema=json.dumps(EVENT))


def test_the_avro_decode_runs_as_generated_code_and_decodes_each_record_once(spark: SparkSession) -> None:
    seven, nine = wire.id_key(7), wire.id_key(9)
    rows = [
        (seven + _body({"id": 1, "name": "framed"}), None),
        (_body({"id": 2, "name": "header"}), [("trace", b"x"), ("__value_schema_id", seven)]),
        # Two headers of the name: the first one names the schema.
        (_body({"id": 3, "name": "first"}), [("__value_schema_id", seven), ("__value_schema_id", nine)]),
        # Headers, none of them naming a schema (tracing headers): the frame names it.
        (seven + _body({"id": 4, "name": "traced"}), [("traceparent", b"00-4bf92f-00f067-01")]),
        (b"neither framed nor named", []),
    ]
    records = spark.createDataFrame([(v, h, "t", 0, i) for i, (v, h) in enumerate(rows)], RECORDS)
    target = StructType([StructField("id", LongType()), StructField("name", StringType())])
    parsed = AvroDecoder(cast(Any, _OneSchemaRegistry())).inspect(records, [seven], guessed=True).parse(target)

    good = good_rows(parsed, target)
    assert sorted(tuple(r) for r in good.collect()) == [(1, "framed"), (2, "header"), (3, "first"), (4, "traced")]
    assert [r[ERROR].error_class for r in bad_records(parsed).collect()] == ["NotConfluentFramed"]
    # Every operator in whole-stage generated code (one lambda, e.g. a `filter` over the headers,
    # makes Spark interpret the whole stage, from_avro included), and from_avro once: the
    # good-rows filter is not pushed below the decode with the error's expressions inlined.
    plan = str(good._jdf.queryExecution().executedPlan().toString())
    operators = [line.lstrip(" +-:") for line in plan.splitlines() if line.strip()]
    assert all(op.startswith("*(") for op in operators), plan
    assert plan.count("from_avro(") == 1, plan


def test_the_json_decode_parses_each_record_once(spark: SparkSession) -> None:
    values = ['{"id": 1, "name": "a"}', '{"id": "not a number"}', "not json", '{"id": 2, "name": "b"}']
    records = spark.createDataFrame([(v.encode(), None, "t", 0, i) for i, v in enumerate(values)], RECORDS)
    target = StructType([StructField("id", LongType()), StructField("name", StringType())])
    parsed = JsonDecoder(spark).inspect(records, target, guessed=True).parse(target)

    good = good_rows(parsed, target)
    assert sorted(tuple(r) for r in good.collect()) == [(1, "a"), (2, "b")]
    assert [r[ERROR].error_class for r in bad_records(parsed).collect()] == ["JsonParseError"]
    # A value the table's type does not take waits for the second pass (its types inferred).
    assert [r.offset for r in parsed.where(is_pending(F.col(ERROR))).collect()] == [1]
    plan = str(good._jdf.queryExecution().executedPlan().toString())
    assert plan.count("from_json(") == 1, plan


def test_the_driver_jvm_compiles_huge_methods(spark: SparkSession) -> None:
    # The generated code of a decode is over HotSpot's 8,000-byte limit for compiling a method.
    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()  # type: ignore[attr-defined]
    assert JIT_OPTIONS in list(bean.getInputArguments())
