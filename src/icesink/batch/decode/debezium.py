"""Debezium change-event envelopes -> rows with an operation column.

The row is `after`, or `before` for a delete; `op` c and r become I (insert), u U (update), d D
(delete); `source` fields chosen in the config become `_source_<name>` columns. Envelopes come
decoded from Avro, or from JSON with or without the `schema`/`payload` wrapper. The schema
functions are pure; the Column builders only compose Spark expressions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructField, StructType

from icesink.batch.decode import error, no_error
from icesink.tasks.envelope_rows import OPS

SOURCE_PREFIX = "_source_"


class EnvelopeError(ValueError):
    """A schema that is not a Debezium envelope."""


@dataclass(frozen=True)
class EnvelopeSpec:
    operation_column: str = "_op"
    source_columns: tuple[str, ...] = ()

    def synthetic(self) -> set[str]:
        return {self.operation_column, *(SOURCE_PREFIX + n for n in self.source_columns)}


def payload_type(envelope: StructType) -> StructType:
    """The envelope itself, or its `payload` when JSON carries the schema/payload wrapper."""
    names = set(envelope.fieldNames())
    if "payload" in names and "op" not in names:
        inner = envelope["payload"].dataType
        if isinstance(inner, StructType):
            return inner
    return envelope


def _image_type(env: StructType) -> StructType:
    for name in ("after", "before"):
        if name in env.fieldNames() and isinstance(env[name].dataType, StructType):
            t = env[name].dataType
            assert isinstance(t, StructType)
            return t
    raise EnvelopeError("no struct-typed `after` or `before` field: not a Debezium envelope")


def row_type(envelope: StructType, spec: EnvelopeSpec) -> StructType:
    env = payload_type(envelope)
    if "op" not in env.fieldNames():
        raise EnvelopeError("no `op` field: not a Debezium envelope")
    image = _image_type(env)
    clash = sorted(spec.synthetic() & set(image.fieldNames()))
    if clash:
        raise EnvelopeError(f"row fields {clash} clash with the operation/source columns; rename them in the config")
    fields = [*image.fields, StructField(spec.operation_column, StringType(), True)]
    source = env["source"].dataType if "source" in env.fieldNames() else StructType([])
    if isinstance(source, StructType):
        have = {f.name: f.dataType for f in source.fields}
        fields += [StructField(SOURCE_PREFIX + n, have[n], True) for n in spec.source_columns if n in have]
    return StructType(fields)


def envelope_parse_type(envelope: StructType, target: StructType, spec: EnvelopeSpec) -> StructType:
    """The envelope with `before`/`after` typed as the target's row columns (for from_json)."""
    row = StructType([f for f in target.fields if f.name not in spec.synthetic()])

    def rebuild(env: StructType) -> StructType:
        return StructType([StructField(f.name, row, True) if f.name in ("before", "after") else f for f in env.fields])

    if payload_type(envelope) is not envelope:
        return StructType(
            [
                StructField(f.name, rebuild(payload_type(envelope)), True) if f.name == "payload" else f
                for f in envelope.fields
            ]
        )
    return rebuild(envelope)


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
    image_type = _image_type(env_type)
    image = (
        F.when(env["op"] == "d", env["before"]).otherwise(env["after"])
        if "before" in env_type.fieldNames()
        else env["after"]
    )
    source_type = env_type["source"].dataType if "source" in env_type.fieldNames() else StructType([])
    have = {f.name: f.dataType for f in image_type.fields}
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
        F.when(env["op"].isNull(), error("decode", "DebeziumEnvelopeError", "no op in the change event"))
        .when(
            ~env["op"].isin(list(OPS)),
            error("decode", "DebeziumEnvelopeError", F.concat(F.lit("unknown op "), env["op"])),
        )
        .when(
            image.isNull(),
            error(
                "decode", "DebeziumEnvelopeError", F.concat(F.lit("op "), env["op"], F.lit(" without its row image"))
            ),
        )
        .otherwise(no_error())
    )
