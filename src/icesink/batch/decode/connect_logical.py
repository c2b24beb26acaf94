"""Connect's and Debezium's logical types in Connect JSON, converted in Spark expressions: from
what the payload holds (schema/connect.py `LOGICAL`: from_json parses it so) to the column type;
Debezium's as for Avro (`semantic.CONVERSIONS`). The tasks' conversions of the same values, in
Arrow: tasks/decode_connect.py."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DecimalType

from icesink.batch.decode import semantic
from icesink.schema.connect import DECIMAL, Node

_CONVERSIONS: dict[str, Callable[[Column], Column]] = {
    "org.apache.kafka.connect.data.Date": F.date_from_unix_date,
    "org.apache.kafka.connect.data.Time": lambda c: c.cast("long") * 1000,
    "org.apache.kafka.connect.data.Timestamp": F.timestamp_millis,
    "io.debezium.time.NanoTime": lambda c: F.floor(c / 1000).cast("long"),
    **{name: convert for name, (_, convert) in semantic.CONVERSIONS.items()},
}


def conversion(n: Node) -> Callable[[Column], Column]:
    """How a value of logical type `n` (parsed as `n.parse`) becomes its column type."""
    assert n.logical is not None
    if n.logical == DECIMAL:
        target = n.result
        assert isinstance(target, DecimalType)
        return lambda c: semantic.exact_decimal(c, F.lit(n.scale), target)
    return _CONVERSIONS[n.logical]
