"""Debezium change events without Connect schemas (the JsonConverter's schemas off), keyed by plain
JSON keys, as a one-pass task's rows take them (tasks/plain_rows.DirectRows): a changelog table's
rows, and the events Spark's path makes dead letters of (or may read otherwise), for the unit tests
and for the test that pins them against Spark's path (tests/spark/test_json_letters.py)."""

from __future__ import annotations

import json

from pyspark.sql.types import LongType, StringType, StructField, StructType

from icesink.schema.envelope import EnvelopeSpec
from icesink.tasks.decode_json import DirectColumn, direct_columns
from icesink.tasks.plain_rows import DirectRows

# The table exists (Spark's path created it).
CHANGES = StructType(
    [
        StructField("id", LongType(), nullable=False),
        StructField("email", StringType()),
        StructField("_op", StringType()),
        StructField("_source_lsn", LongType()),
        StructField("_key", StructType([StructField("id", LongType())])),
    ]
)
KEY = DirectColumn("_key", "struct", fields=(DirectColumn("id", "long"),))


def change_rows() -> DirectRows:
    columns = direct_columns(CHANGES, keys=("id",))
    assert columns is not None
    return DirectRows(columns, True, "_key", EnvelopeSpec(source_columns=("lsn",)), KEY, keys=("id",))


def event(op: str, before: object, after: object, lsn: object = 1, **more: object) -> bytes:
    return json.dumps({"before": before, "after": after, "op": op, "source": {"lsn": lsn, "db": "x"}, **more}).encode()


# Events Spark's path makes dead letters of, and its words (batch/decode/debezium.envelope_error).
LETTERED: list[tuple[bytes, bytes | None, str]] = [
    (event("t", None, None), b'{"id": 1}', "unknown op t"),  # a truncate
    (event("m", None, {"id": 1}), b'{"id": 1}', "unknown op m"),
    (event("", None, {"id": 1}), None, "unknown op "),
    (event("é", None, None), None, "unknown op é"),
    (json.dumps({"after": {"id": 1}, "source": {"lsn": 1}}).encode(), b'{"id": 1}', "no op in the change event"),
    (json.dumps({"op": None, "after": {"id": 1}}).encode(), None, "no op in the change event"),
    (event("c", None, None), b'{"id": 1}', "op c without its row image"),
    (json.dumps({"op": "u", "before": {"id": 1}}).encode(), None, "op u without its row image"),
    (event("d", None, {"id": 1, "email": "a@x"}), b'{"id": 1}', "op d without its row image"),
    (b"\x00\x00\x00\x00\x02" + event("x", None, {"id": 2}), None, "unknown op x"),  # JSONSerializer's frame
]

# Events not taken that Spark's path may read otherwise: their table is declined, Spark's path decides.
UNLETTERED: list[tuple[bytes, bytes | None]] = [
    (event("c", None, {"id": 1}), b'{"id": 1}'),  # a change: taken, never a letter
    (json.dumps({"op": 5, "after": {"id": 1}}).encode(), None),  # Spark reads the op's JSON text
    (event("x", None, {"id": 1, "name": "n"}), None),  # a field the table lacks: Spark's path adds it
    (event("x", {"id": 1, "name": "n"}, None), None),  # in the other image too
    (event("x", None, {"id": "1"}), None),  # a value of another type: Spark's inference widens it
    (event("x", None, {"id": 1, "email": 1.5}), None),
    (event("x", None, {"id": 2**63}), None),  # beyond a long
    (event("t", None, None, lsn="9"), None),  # a source field of another type
    (json.dumps({"op": "t", "source": "pg"}).encode(), None),  # a source that is not an object
    (event("x", None, [1]), None),  # an image that is not an object
    (event("t", None, None), b'{"id": "1"}'),  # a key field of another type
    (event("t", None, None), b'{"id": 1, "tenant": 2}'),  # a key field the key column lacks
    (event("t", None, None), b"nope"),  # a key that is not JSON
    # wrapped without an op: Spark's path unwraps a batch of such events (their payloads are rows)
    (json.dumps({"payload": json.loads(event("c", None, {"id": 1}))}).encode(), None),
    (json.dumps({"schema": None, "payload": json.loads(event("c", None, {"id": 1}))}).encode(), None),
    (b'{"op": "\\ud800", "after": null}', None),  # a lone surrogate: no letter's message holds it
]
