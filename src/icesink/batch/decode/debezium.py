"""Debezium change-event envelopes -> rows with an operation column.

The row is `after`, or `before` for a delete; `op` c and r become I (insert), u U (update), d D
(delete); `source` fields chosen in the config become `_source_<name>` columns. Envelopes come
decoded from Avro, or from JSON with or without the `schema`/`payload` wrapper. The row types
are schema/envelope.py's; here the Column builders, which only compose Spark expressions.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from icesink.batch.decode import error, no_error
from icesink.schema.envelope import (
    NO_IMAGE,
    NO_OP,
    OPS,
    SOURCE_PREFIX,
    UNKNOWN_OP,
    EnvelopeError,
    EnvelopeSpec,
    envelope_parse_type,
    image_type,
    payload_type,
    row_type,
)

# The schema functions stay importable from here, beside the Column builders.
__all__ = [
    "SOURCE_PREFIX", "EnvelopeError", "EnvelopeSpec", "envelope_error", "envelope_parse_type", "payload_type", "row",
    "row_type",
]  # fmt: skip


def _payload(col: Column, envelope: StructType) -> Column:
    return col["payload"] if payload_type(envelope) is not envelope else col


def row(
    col: Column,
    envelope: StructType,
    target: StructType,
    spec: EnvelopeSpec,
    fit: Callable[[Column, DataType, DataType], Column],
) -> Column:
    """The row struct (in the target's column order) of the envelope in `col`."""
    env_type = payload_type(envelope)
    env = _payload(col, envelope)
    image_fields = image_type(env_type)
    image = (
        F.when(env["op"] == "d", env["before"]).otherwise(env["after"])
        if "before" in env_type.fieldNames()
        else env["after"]
    )
    source_type = env_type["source"].dataType if "source" in env_type.fieldNames() else StructType([])
    have = {f.name: f.dataType for f in image_fields.fields}
    op = F.coalesce(*[F.when(env["op"] == k, F.lit(v)) for k, v in OPS.items()])
    fields = []
    for f in target.fields:
        if f.name == spec.operation_column:
            expr = op
        elif (
            f.name.startswith(SOURCE_PREFIX)
            and isinstance(source_type, StructType)
            and f.name[len(SOURCE_PREFIX) :] in source_type.fieldNames()
        ):
            name = f.name[len(SOURCE_PREFIX) :]
            expr = fit(env["source"][name], source_type[name].dataType, f.dataType)
        elif f.name in have:
            expr = fit(image[f.name], have[f.name], f.dataType)
        else:
            expr = F.lit(None).cast(f.dataType)
        fields.append(expr.alias(f.name))
    return F.struct(*fields)


def envelope_error(col: Column, envelope: StructType) -> Column:
    env_type = payload_type(envelope)
    env = _payload(col, envelope)
    deleted = env["before"] if "before" in env_type.fieldNames() else F.lit(None)
    image = F.when(env["op"] == "d", deleted).otherwise(env["after"])
    return (
        F.when(env["op"].isNull(), error("decode", "DebeziumEnvelopeError", NO_OP))
        .when(
            ~env["op"].isin(list(OPS)),
            error("decode", "DebeziumEnvelopeError", F.concat(F.lit(UNKNOWN_OP), env["op"])),
        )
        .when(
            image.isNull(),
            error("decode", "DebeziumEnvelopeError", F.concat(F.lit("op "), env["op"], F.lit(NO_IMAGE))),
        )
        .otherwise(no_error())
    )
