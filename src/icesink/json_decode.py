"""JSON values -> rows. Types are inferred by Spark's JSON reader in the JVM over the whole batch
(so `1` and `2.5` unify to double), then every value is parsed with the table's schema.

A record that is not a JSON object, or whose fields do not fit the table's types, is never
written as nulls: it is reported with its topic, partition and offset.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from icesink.jvm import jsession, jvm
from icesink.schema_diff import CORRUPT_COLUMN, parse_schema

ROW = "__icesink_row"
_PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}


@dataclass(frozen=True)
class BadRecord:
    topic: str
    partition: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"topic {self.topic} partition {self.partition} offset {self.offset}: {self.reason}"


def infer_schema(spark: SparkSession, records: DataFrame) -> StructType:
    """The unified schema of the batch's JSON values (records with a null value are ignored)."""
    strings = records.where(F.col("value").isNotNull()).select(F.col("value").cast("string"))._jdf
    dataset = getattr(strings, "as")(jvm(spark).org.apache.spark.sql.Encoders.STRING())
    reader = jsession(spark).read()
    for k, v in _PARSE_OPTIONS.items():
        reader = reader.option(k, v)
    inferred = StructType.fromJson(json.loads(reader.json(dataset).schema().json()))
    return StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN])


def parse(records: DataFrame, table_schema: StructType) -> DataFrame:
    """Kafka records -> (topic, partition, offset, ROW struct) with ROW parsed by `table_schema`."""
    row = F.from_json(F.col("value").cast("string"), parse_schema(table_schema), _PARSE_OPTIONS)
    return records.select("topic", "partition", "offset", row.alias(ROW))


def bad_condition() -> Column:
    return F.col(ROW).isNull() | F.col(f"{ROW}.{CORRUPT_COLUMN}").isNotNull()


def good_rows(parsed: DataFrame, table_schema: StructType) -> DataFrame:
    """The parsed rows that decoded cleanly, as the table's columns in the table's order."""
    return parsed.where(~bad_condition()).select(
        *[F.col(f"{ROW}.`{f.name}`").alias(f.name) for f in table_schema.fields]
    )


def find_bad(parsed: DataFrame, limit: int = 5) -> tuple[int, list[BadRecord]]:
    """How many records failed and the first few of them (a small collect)."""
    bad = parsed.where(bad_condition())
    count = bad.count()
    if count == 0:
        return 0, []
    rows = (
        bad.select("topic", "partition", "offset", F.col(f"{ROW}.{CORRUPT_COLUMN}").alias("raw"))
        .orderBy("topic", "partition", "offset")
        .limit(limit)
        .collect()
    )
    return count, [BadRecord(r.topic, r.partition, r.offset, classify(r.raw)) for r in rows]


def classify(raw: str | None) -> str:
    """Why a value did not parse, without echoing its content (payloads may carry personal data)."""
    if raw is None or raw == "":
        return "null or empty value"
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return f"not valid JSON ({e.msg} at char {e.pos})"
    if not isinstance(value, dict):
        return f"JSON {type(value).__name__} where an object was expected"
    return "a field's value does not fit the table's column type"
