from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.batch.decode.debezium import EnvelopeError, EnvelopeSpec, envelope_parse_type, payload_type, row_type


def s(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t, True) for n, t in fields])  # type: ignore[arg-type]


ROW = s(("id", LongType()), ("name", StringType()))
SOURCE = s(("ts_ms", LongType()), ("lsn", LongType()), ("db", StringType()), ("table", StringType()))
ENVELOPE = s(("before", ROW), ("after", ROW), ("source", SOURCE), ("op", StringType()), ("ts_ms", LongType()))
SPEC = EnvelopeSpec("_op", ("ts_ms", "lsn", "missing"))


def test_row_type_is_the_image_plus_operation_and_chosen_source_fields() -> None:
    t = row_type(ENVELOPE, SPEC)
    assert [(f.name, f.dataType.simpleString()) for f in t.fields] == [
        ("id", "bigint"), ("name", "string"), ("_op", "string"), ("_source_ts_ms", "bigint"), ("_source_lsn", "bigint"),
    ]  # fmt: skip


def test_json_schema_payload_wrapper_is_unwrapped() -> None:
    wrapped = s(("schema", s(("type", StringType()))), ("payload", ENVELOPE))
    assert payload_type(wrapped) == ENVELOPE
    assert row_type(wrapped, SPEC) == row_type(ENVELOPE, SPEC)


def test_inserts_only_batch_takes_the_row_from_after() -> None:
    # JSON inference types an always-null `before` as string.
    env = s(("before", StringType()), ("after", ROW), ("op", StringType()))
    assert row_type(env, EnvelopeSpec()).fieldNames() == ["id", "name", "_op"]


def test_not_an_envelope() -> None:
    with pytest.raises(EnvelopeError, match="no `op` field"):
        row_type(ROW, SPEC)
    with pytest.raises(EnvelopeError, match="clash"):
        row_type(s(("after", s(("_op", StringType()))), ("op", StringType())), SPEC)


def test_parse_type_types_both_images_as_the_target_row() -> None:
    target = s(("id", LongType()), ("name", StringType()), ("_op", StringType()), ("email", StringType()))
    wrapped = s(
        ("schema", StringType()), ("payload", s(("before", StringType()), ("after", ROW), ("op", StringType())))
    )
    parsed = envelope_parse_type(wrapped, target, EnvelopeSpec())
    env = payload_type(parsed)
    row = s(("id", LongType()), ("name", StringType()), ("email", StringType()))
    assert env["before"].dataType == row
    assert env["after"].dataType == row
