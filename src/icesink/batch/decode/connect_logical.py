"""Connect's and Debezium's logical types in Connect JSON: what from_json parses each as, its column
type and the conversion between them (Debezium's as for Avro, from `semantic.CONVERSIONS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icesink.batch.decode import semantic


@dataclass(frozen=True)
class Logical:
    parse: DataType  # what from_json reads the payload value as
    result: DataType  # the column type
    convert: Callable[[Column], Column]
    checked: bool  # the conversion yields null for a value it cannot take exactly (a dead letter)


# What from_json parses each of Debezium's semantic types as; they convert as for Avro
# (`semantic.CONVERSIONS`), and those that can fail to convert exactly are checked.
DEBEZIUM_PARSE: dict[str, DataType] = {
    "io.debezium.time.Date": IntegerType(),
    "io.debezium.time.Timestamp": LongType(),
    "io.debezium.time.MicroTimestamp": LongType(),
    "io.debezium.time.NanoTimestamp": LongType(),
    semantic.ZONED_TIMESTAMP: StringType(),  # ISO-8601 with an offset, e.g. 2024-01-02T03:04:05.123456Z
    "io.debezium.time.Time": IntegerType(),
    "io.debezium.time.MicroTime": LongType(),
    semantic.VARIABLE_DECIMAL: StructType([StructField("scale", IntegerType()), StructField("value", BinaryType())]),
}
_CHECKED = {semantic.ZONED_TIMESTAMP, semantic.VARIABLE_DECIMAL}

# Logical types whose parse and result types do not depend on parameters.
LOGICAL: dict[str, Logical] = {
    "org.apache.kafka.connect.data.Date": Logical(IntegerType(), DateType(), F.date_from_unix_date, False),
    "org.apache.kafka.connect.data.Time": Logical(IntegerType(), LongType(), lambda c: c.cast("long") * 1000, False),
    "org.apache.kafka.connect.data.Timestamp": Logical(LongType(), TimestampType(), F.timestamp_millis, False),
    # Not among Avro's conversions (there it stays nanoseconds): micros of the day like Time and MicroTime.
    "io.debezium.time.NanoTime": Logical(LongType(), LongType(), lambda c: F.floor(c / 1000).cast("long"), False),
    **{name: Logical(parse, *semantic.CONVERSIONS[name], name in _CHECKED) for name, parse in DEBEZIUM_PARSE.items()},
}
