"""Records a one-pass task knows Spark's path would make dead letters of, and why, in the same
words: their table's other records then stay on the one-pass path, and the driver writes these
to the dead-letter table from Kafka's own bytes (batch/direct_letters.py).

Only what leaves no doubt is judged here, for append tables (a table of changes reads a null
value as a tombstone): a null value (`NULL_VALUE`, JSON and Avro); an Avro value that is neither
Confluent-framed nor named by a schema-id header (`NOT_FRAMED`); a plain JSON value that is empty,
not JSON, or JSON but not an object (`json_problem`); and, for a table of changes too, a
Debezium event with no op, an op Debezium does not write or no row image (`ENVELOPE`: Avro's in
tasks/envelope_rows.problems, plain JSON's `event_problem`, Connect JSON's in
tasks/connect_rows.SchemaRows.letter). The wording is Spark's path's (batch/decode/json_rows.py,
batch/decode/avro.py, batch/decode/debezium.py; pinned in tests/unit/test_direct_letters.py,
and `json_problem` and `event_problem` against Spark's path in tests/spark/test_json_letters.py).
Any other doubtful record still declines its table. Pure: no Spark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from icesink.kafka import wire
from icesink.schema.envelope import envelope_problem
from icesink.tasks import header_frames
from icesink.tasks.avro_bodies import undecodable


class Letter(NamedTuple):
    """A record a task did not write, and why."""

    topic: str
    partition: int
    offset: int
    stage: str
    error_class: str
    message: str


# A table's dead letters in one batch beyond which its share takes Spark's path instead: the driver
# reads each letter's topic-partition again from its first letter to its last, a scan that many bad
# records (a topic of another format, a wrong decoder) make as long as the batch's own; and a task
# holds its letters until it ends.
MAX_LETTERS = 1_000

# (stage, error class, message), as Spark's path words them for the record's `value` column.
NULL_VALUE = ("decode", "NullValue", "null value (tombstone) for an append-only table")
NOT_FRAMED = ("header", "NotConfluentFramed", "no 0x00 magic byte and schema id")
EMPTY_VALUE = ("decode", "EmptyValue", "empty value")
NOT_JSON = ("decode", "JsonParseError", "not valid JSON")
NOT_AN_OBJECT = ("decode", "JsonTypeError", "a JSON value that is not an object")
# (stage, error class) of a Debezium change event Spark's path refuses; the message says why
# (tasks/envelope_rows.problems, in batch/decode/debezium.envelope_error's words).
ENVELOPE = ("decode", "DebeziumEnvelopeError")

_JSON_SPACE = " \t\r\n"
# The characters a JSON value can start with (strict JSON, which Spark's `try_parse_json` reads).
_VALUE_STARTS = frozenset('{["-0123456789tfn')
_LONG = range(-(2**63), 2**63)


def json_problem(value: bytes) -> tuple[str, str, str] | None:
    """Spark's path's (stage, error class, message) for a plain JSON value the one-pass decoder
    did not take, when it is beyond doubt a dead letter there; None when it may be a row (an
    object with a new key, single quotes, trailing text: Jackson with Spark's options reads more
    than strict JSON) or Spark's verdict is not certain here.

    Spark's path (json_rows._reason) reads the value, unframed, as text (invalid UTF-8 becoming
    U+FFFD), parses it leniently as an object (from_json), and words a failure by whether the text
    is strict JSON (try_parse_json). Certain here: nothing but whitespace (`EMPTY_VALUE`); text no
    strict JSON value starts like (a root that is not an object fails the parse as an object), or
    that ends inside its first value (`NOT_JSON`: no parser reads it);
    strict JSON that is a scalar or an array without objects at any depth (`NOT_AN_OBJECT`; an
    array of objects is left: Spark's inference takes their fields)."""
    value = wire.json_text(value)
    text = value.decode("utf-8", errors="replace").strip(_JSON_SPACE)
    if not text:
        return EMPTY_VALUE
    if text[0] not in _VALUE_STARTS or _no_strict_value(text):
        return NOT_JSON
    try:
        found = orjson.loads(value)
    except orjson.JSONDecodeError:
        return NOT_JSON if _ends_inside(text) else None
    return NOT_AN_OBJECT if type(found) is not dict and _plain(found) else None


def event_problem(event: dict[str, Any]) -> str | None:
    """Spark's path's words (`ENVELOPE`'s message) for a Debezium event in plain JSON that is not a
    change (schema/envelope.envelope_problem), where its reading is beyond doubt: an op that is a
    string (else it reads the op's JSON text) that UTF-8 holds (a letter is stored so), and beside
    a missing op no `payload` or `schema` (a wrapped event: Spark's path unwraps a batch of them).
    None otherwise, and for a change."""
    op = event.get("op")
    if op is None and ("payload" in event or "schema" in event):
        return None
    if op is not None and (type(op) is not str or not _utf8(op)):
        return None
    return envelope_problem(op, event.get("before" if op == "d" else "after") is not None)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False  # a lone surrogate, which Python's JSON reader takes
    return True


def _no_strict_value(text: str) -> bool:
    """Whether `text`, not an object or an array, starts with no strict JSON value: Spark's parse
    as an object fails on any such text, and strict JSON on this one (`-Infinity`, `nope`)."""
    if text[0] == "-":
        return len(text) == 1 or not text[1].isascii() or not text[1].isdigit()
    if text[0] in "tfn":
        return not text.startswith(("true", "false", "null"))
    return False


def _ends_inside(text: str) -> bool:
    """Whether Python's reader (stricter than Jackson's with Spark's options) read `text` to its
    end and wanted more (a string or a value cut short): every parser reads that far and fails."""
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        # Python says a string is unterminated only at the text's end (a control character or a
        # bad escape before it is another error).
        return e.pos == len(text) or e.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):
        return False
    return False


def _plain(value: Any) -> bool:
    """A JSON value without objects (at any depth) that strict parsers read alike."""
    kind = type(value)
    if kind is list:
        return all(_plain(v) for v in value)
    if kind is int:
        return value in _LONG
    if kind is float:
        return math.isfinite(value)
    return kind in (str, bool, type(None))


def encoded(letters: Sequence[Letter]) -> bytes:
    """A task's letters of one table as one value of its result row."""
    return orjson.dumps([list(x) for x in letters])


def decoded(blob: bytes) -> list[Letter]:
    return [Letter(*x) for x in orjson.loads(blob)]


def avro_letters(batch: pa.RecordBatch, named: str, nulls: bool = True) -> tuple[pa.RecordBatch, list[Letter]]:
    """An Avro table's records of `batch` split into those to decode and the letters of the
    others: a null value (an append table's; `nulls` false for a table of changes, where it is a
    tombstone), or one without the 5-byte frame that names no schema in a header (`named`: the
    column of each record's schema-id header; tasks/header_frames.py)."""
    values = batch.column("value")
    null = pc.is_null(values) if nulls else pa.array([False] * len(values), pa.bool_())
    framed = pc.and_(
        pc.greater_equal(pc.binary_length(values), 5),
        pc.equal(pc.binary_slice(values, 0, 1), pa.scalar(b"\x00", pa.binary())),
    )
    unframed = pc.invert(framed)
    if named in batch.schema.names:
        unframed = pc.and_kleene(unframed, pc.invert(header_frames.named(batch.column(named))))
    bad = pc.or_(null, pc.fill_null(unframed, False))
    if not pc.any(bad).as_py():
        return batch, []
    letters = []
    for name, reason in ((null, NULL_VALUE), (pc.and_(bad, pc.invert(null)), NOT_FRAMED)):
        mine = batch.filter(name)
        coordinates = zip(*(mine.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True)
        letters += [Letter(t, p, o, *reason) for t, p, o in coordinates]
    return batch.filter(pc.invert(bad)), letters


def undecodable_letters(
    batch: pa.RecordBatch, schemas: Mapping[bytes, Any], named: str
) -> tuple[pa.RecordBatch, list[Letter]]:  # fmt: skip
    """An Avro append table's framed records of `batch` split into the letters of those whose
    bodies Avro's Java reader cannot decode with their writer schema (`schemas`, by frame: Spark's
    path's `AvroDecodeError`), and the others: a record named by id in a header (`named`) by the
    schema of that id, its whole value the body; one named by GUID is not judged."""
    values = batch.column("value")
    headers = batch.column(named) if named in batch.schema.names else pa.nulls(len(values), pa.binary())
    ids, guids = header_frames.by_id(headers).to_pylist(), header_frames.by_guid(headers).to_pylist()
    bad, frames = [], []
    for value, header, by_id, by_guid in zip(values.to_pylist(), headers.to_pylist(), ids, guids, strict=True):
        frame, body = _frame_and_body(value, header if by_id else None, by_guid)
        schema = schemas.get(frame) if frame is not None else None
        bad.append(schema is not None and undecodable(schema, body))
        frames.append(frame)
    if not any(bad):
        return batch, []
    mask = pa.array(bad, pa.bool_())
    mine = batch.filter(mask)
    theirs = [f for f, b in zip(frames, bad, strict=True) if b]
    coordinates = zip(*(mine.column(c).to_pylist() for c in ("topic", "partition", "offset")), theirs, strict=True)
    letters = [
        Letter(t, p, o, "decode", "AvroDecodeError", f"body does not decode with writer schema {_schema_id(f)}")
        for t, p, o, f in coordinates
    ]
    return batch.filter(pc.invert(mask)), letters


def _frame_and_body(value: bytes | None, id_header: bytes | None, by_guid: bool) -> tuple[bytes | None, bytes]:
    """A record's frame (None: none the tasks know) and body: the header's and the whole value
    when a header names its schema by id, else the value's first 5 bytes and the rest."""
    if value is None or by_guid:
        return None, b""
    return (id_header, value) if id_header is not None else (value[:5], value[5:])


def _schema_id(frame: bytes) -> int:
    return int.from_bytes(frame[1:5], "big")
