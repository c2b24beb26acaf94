"""Debezium change events in Avro decoded by the one-pass tasks (batch/direct_avro.py,
tasks/decode_avro.py, tasks/envelope_rows.py, tasks/semantic_values.py): the row type is Spark's
path's, the rows are its rows, and every event that path makes a dead letter is declined, or a
letter in that path's words where the caller takes them."""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_type

from icesink.batch.avro_types import avro_type, inlined
from icesink.batch.decode import semantic
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.direct_avro import direct_avro, row_struct
from icesink.batch.direct_shape import Shaping
from icesink.kafka import wire
from icesink.tasks import semantic_values
from icesink.tasks.decode_avro import AvroRows
from tests.support.debezium import AVRO_ENVELOPE, avro_event, avro_row, spelled, variable_decimal

SPEC = EnvelopeSpec("_op", ("ts_ms", "lsn"))
FRAME = wire.id_key(3)
TEXT = json.dumps(AVRO_ENVELOPE)
UTC = dt.UTC


def framed(event: dict[str, Any], schema: dict[str, Any] = AVRO_ENVELOPE) -> bytes:
    buf = io.BytesIO()
    buf.write(FRAME)
    fastavro.schemaless_writer(buf, fastavro.parse_schema(copy.deepcopy(schema)), event)
    return buf.getvalue()


def decode(values: list[bytes]) -> pa.Table | None:
    struct = row_struct(TEXT, SPEC)
    assert struct is not None
    direct = direct_avro({FRAME: TEXT}, struct, SPEC)
    assert direct is not None
    arrow = pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in struct.fields])
    return AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))


def test_the_row_type_is_the_image_with_its_semantic_types_the_operation_and_the_source_columns() -> None:
    struct = row_struct(TEXT, SPEC)
    assert struct is not None
    assert [(f.name, f.dataType.simpleString()) for f in struct.fields] == [
        ("id", "bigint"), ("v", "bigint"), ("name", "string"), ("seen", "timestamp_ntz"), ("born", "date"),
        ("updated", "timestamp"), ("balance", "decimal(38,18)"), ("price", "decimal(10,2)"), ("_op", "string"),
        ("_source_ts_ms", "bigint"), ("_source_lsn", "bigint"),
    ]  # fmt: skip
    assert row_struct(TEXT) is not None, "the same schema read as a plain record"
    assert row_struct(json.dumps(AVRO_ENVELOPE["fields"][0]["type"][1]), SPEC) is None, "a row is no envelope"


def test_events_become_the_rows_sparks_path_makes() -> None:
    events = [avro_event("I", 1, 10, 100), avro_event("U", 1, 11, 101), avro_event("D", 2, 12, 102)]
    events.append({**avro_event("I", 3, 13, 103), "op": "r"})  # a snapshot read
    rows = decode([framed(e) for e in events])
    assert rows is not None
    got = rows.to_pylist()
    assert [(r["id"], r["v"], r["_op"], r["_source_lsn"], r["_source_ts_ms"]) for r in got] == [
        (1, 10, "I", 100, 1_700_000_000_100), (1, 11, "U", 101, 1_700_000_000_101),
        (2, 12, "D", 102, 1_700_000_000_102), (3, 13, "I", 103, 1_700_000_000_103),
    ]  # fmt: skip
    update = got[1]  # seq 11: every semantic value set
    assert update["seen"] == dt.datetime(2023, 11, 14, 22, 13, 20, 11_011)
    assert update["born"] == dt.date(1970, 1, 1) + dt.timedelta(days=11 - 5_000)
    assert update["updated"] == dt.datetime(2024, 1, 2, 1, 4, 11, 11_000, tzinfo=UTC)
    assert update["balance"] == Decimal("11.11")
    assert update["price"] == Decimal("11.11")
    assert got[0]["born"] is None, "a null semantic value stays null"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"op": "t"}, "a truncate: no row"),
        ({"op": "x"}, "an op Debezium does not write"),
        ({"after": None}, "an insert without its image"),
    ],
)
def test_events_sparks_path_makes_dead_letters_are_declined(change: dict[str, Any], why: str) -> None:
    good = avro_event("I", 1, 10, 100)
    assert decode([framed(good)]) is not None
    assert decode([framed(good), framed({**good, **change})]) is None, why


def test_events_sparks_path_makes_dead_letters_are_letters_in_its_words_where_the_caller_takes_them() -> None:
    good = [avro_event("I", 1, 10, 100), avro_event("U", 1, 11, 101), avro_event("D", 2, 12, 102)]
    events = [good[0], {**good[0], "op": "x"}, good[1], {**good[1], "after": None}, {**good[2], "before": None},
              {**good[0], "op": "t"}, good[2]]  # fmt: skip
    struct = row_struct(TEXT, SPEC)
    assert struct is not None
    direct = direct_avro({FRAME: TEXT}, struct, SPEC)
    assert direct is not None
    arrow = pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in struct.fields])
    offsets = list(range(40, 40 + len(events)))
    carry = pa.table({"topic": ["t.a"] * len(events), "partition": [2] * len(events), "offset": offsets})
    letters: list[tuple[str, int, int, str]] = []
    rows = AvroRows(direct, arrow).decode(pa.array([framed(e) for e in events], pa.binary()), None, carry, letters)
    assert rows is not None
    assert [(r["offset"], r["id"], r["v"], r["_op"]) for r in rows.to_pylist()] == [
        (40, 1, 10, "I"), (42, 1, 11, "U"), (46, 2, 12, "D"),
    ]  # fmt: skip
    assert rows.column_names == [*carry.column_names, *arrow.names], "no column of its own left"
    assert letters == [
        ("t.a", 2, 41, "unknown op x"), ("t.a", 2, 43, "op u without its row image"),
        ("t.a", 2, 44, "op d without its row image"), ("t.a", 2, 45, "unknown op t"),
    ]  # fmt: skip
    no_coordinates = carry.select(["offset"])
    assert AvroRows(direct, arrow).decode(pa.array([framed(e) for e in events]), None, no_coordinates, []) is None


def test_a_case_insensitive_table_takes_events_whose_fields_are_spelled_otherwise() -> None:
    """The table's columns as the lower-case events made them; events of a writer schema spelling
    `v` and `name` upper-case fill the same columns."""
    upper, rename = spelled({"v": "V", "name": "NAME"})
    struct = row_struct(TEXT, SPEC)
    assert struct is not None
    frame = wire.id_key(4)
    assert direct_avro({frame: json.dumps(upper)}, struct, SPEC) is None, "matched exactly: another table's fields"
    direct = direct_avro({frame: json.dumps(upper)}, struct, SPEC, Shaping(case_insensitive=True))
    assert direct is not None
    arrow = pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in struct.fields])
    events = [avro_event("I", 1, 10, 100), avro_event("D", 2, 12, 102)]
    values = []
    for e in events:
        buf = io.BytesIO(frame)
        buf.seek(len(frame))
        image = {k: rename(v) if isinstance(v, dict) and "id" in v else v for k, v in e.items()}
        fastavro.schemaless_writer(buf, fastavro.parse_schema(copy.deepcopy(upper)), image)
        values.append(buf.getvalue())
    rows = AvroRows(direct, arrow).decode(pa.array(values, pa.binary()))
    assert rows is not None
    assert [(r["id"], r["v"], r["name"], r["_op"], r["_source_lsn"]) for r in rows.to_pylist()] == [
        (1, 10, avro_row(1, 10)["name"], "I", 100), (2, 12, avro_row(2, 12)["name"], "D", 102),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("balance", variable_decimal("1." + "1" * 25)),  # would round in decimal(38, 18)
        ("balance", variable_decimal("1" * 21)),  # beyond it
        ("updated", "yesterday"),
        ("updated", "2024-02-30T00:00:00Z"),
        ("updated", "2024-01-02 03:04:05Z"),  # Spark parses it; this spelling is left to it
    ],
)
def test_values_that_do_not_convert_exactly_are_declined(field: str, value: Any) -> None:
    event = avro_event("I", 1, 10, 100)
    event["after"][field] = value
    assert decode([framed(avro_event("I", 2, 11, 101)), framed(event)]) is None


def test_a_nested_union_index_beyond_its_union_is_declined() -> None:
    """after.name is the union ["null", "string"]: index 1 is the string; 3 (zig-zag 0x06) is no
    branch, which Avro refuses and polars would read as the string."""
    event = avro_event("I", 1, 1, 100)  # v = 1, then name "k1-1" at union index 1 (0x02)
    good = framed(event)
    at = good.index(b"\x02\x08k1-1")
    bad = good[:at] + b"\x06" + good[at + 1 :]
    assert decode([good]) is not None
    assert decode([good, bad]) is None


def test_named_types_are_written_out_apart() -> None:
    schema = inlined(copy.deepcopy(AVRO_ENVELOPE))
    before, after = schema["fields"][0]["type"][1], schema["fields"][1]["type"][1]
    assert [f["name"] for f in before["fields"]] == [f["name"] for f in after["fields"]]
    assert before["name"] != after["name"], "each copy its own name"
    decimals = [f["type"][1]["name"] for image in (before, after) for f in image["fields"] if f["name"] == "balance"]
    assert len(set(decimals)) == 2, "nested named types too"


def test_connect_annotations_are_read_by_their_avro_type() -> None:
    assert avro_type({"type": "int", "connect.type": "int16"}) == (avro_type("int")[0], False)  # type: ignore[index]
    assert avro_type({"type": "string", "connect.name": "io.debezium.data.Json"}) == avro_type("string")


def test_every_semantic_type_of_sparks_path_converts_in_the_tasks() -> None:
    assert set(semantic_values.CONVERSIONS) == set(semantic.CONVERSIONS)
    convert = semantic_values.CONVERSIONS
    nanos = pa.array([1_000, 1_999, -1, -1_000, -1_001, None], pa.int64())
    assert convert["io.debezium.time.NanoTimestamp"](nanos).cast(pa.int64()).to_pylist() == [1, 1, -1, -1, -2, None]
    assert convert["io.debezium.time.Time"](pa.array([1_500], pa.int32())).to_pylist() == [1_500_000]
    millis = convert["io.debezium.time.Timestamp"](pa.array([-1], pa.int64()))
    assert millis.to_pylist() == [dt.datetime(1969, 12, 31, 23, 59, 59, 999_000)]
    negative = convert["io.debezium.data.VariableScaleDecimal"](
        pa.array([{"scale": -2, "value": b"\x05"}], pa.struct([("scale", pa.int32()), ("value", pa.binary())]))
    )
    assert negative.to_pylist() == [Decimal(500)], "a negative scale appends zeros"
