"""Debezium change-event envelopes' schemas (pure, over pyspark's type objects): the row type an
envelope gives (its image, `after` or `before`, then the operation column and the chosen `source`
fields as `_source_<name>` columns), for both decoders: Spark's path (batch/decode/debezium.py
builds the rows in Spark expressions) and the one-pass tasks (tasks/envelope_rows.py,
tasks/decode_connect.py build them in Arrow)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import StringType, StructField, StructType

SOURCE_PREFIX = "_source_"
# Debezium's op -> the operation column (both decoders')
OPS = {"c": "I", "r": "I", "u": "U", "d": "D"}
# Why an event is a dead letter (`DebeziumEnvelopeError`), in the words of every decoder: no op,
# NO_OP; an op Debezium does not write, UNKNOWN_OP + op; no row image, "op " + op + NO_IMAGE.
NO_OP = "no op in the change event"
UNKNOWN_OP = "unknown op "
NO_IMAGE = " without its row image"


def envelope_problem(op: str | None, image: bool) -> str | None:
    """Why an event of op `op` (None: no op) is a dead letter, `image` saying whether it has its
    row image (`after`, or `before` for a delete); None when it is a change."""
    if op is None:
        return NO_OP
    if op not in OPS:
        return UNKNOWN_OP + op
    return None if image else f"op {op}{NO_IMAGE}"


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


def image_type(env: StructType) -> StructType:
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
    image = image_type(env)
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
