"""Records a one-pass task knows Spark's path would make dead letters of, and why, in the same
words: their table's other records then stay on the one-pass path, and the driver writes these
to the dead-letter table from Kafka's own bytes (batch/direct_letters.py).

Only what leaves no doubt is judged here, for append tables (a table of changes reads a null
value as a tombstone): a null value (`NULL_VALUE`, JSON and Avro) and an Avro value that is
neither Confluent-framed nor named by a schema-id header (`NOT_FRAMED`). The wording is Spark's
path's (batch/decode/json_rows.py, batch/decode/avro.py; pinned in tests/unit/test_direct_letters.py).
Any other doubtful record still declines its table. Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import orjson
import pyarrow as pa
import pyarrow.compute as pc


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


def encoded(letters: Sequence[Letter]) -> bytes:
    """A task's letters of one table as one value of its result row."""
    return orjson.dumps([list(x) for x in letters])


def decoded(blob: bytes) -> list[Letter]:
    return [Letter(*x) for x in orjson.loads(blob)]


def avro_letters(batch: pa.RecordBatch, named: str) -> tuple[pa.RecordBatch, list[Letter]]:
    """An Avro append table's records of `batch` split into those to decode and the letters of
    the others: a null value, or one without the 5-byte frame that names no schema in a header
    (`named`: the column saying whether a header names it; such a record is decoded, and declined)."""
    values = batch.column("value")
    null = pc.is_null(values)
    framed = pc.and_(
        pc.greater_equal(pc.binary_length(values), 5),
        pc.equal(pc.binary_slice(values, 0, 1), pa.scalar(b"\x00", pa.binary())),
    )
    unframed = pc.invert(framed)
    if named in batch.schema.names:
        unframed = pc.and_kleene(unframed, pc.invert(pc.fill_null(batch.column(named), False)))
    bad = pc.or_(null, pc.fill_null(unframed, False))
    if not pc.any(bad).as_py():
        return batch, []
    letters = []
    for name, reason in ((null, NULL_VALUE), (pc.and_(bad, pc.invert(null)), NOT_FRAMED)):
        mine = batch.filter(name)
        coordinates = zip(*(mine.column(c).to_pylist() for c in ("topic", "partition", "offset")), strict=True)
        letters += [Letter(t, p, o, *reason) for t, p, o in coordinates]
    return batch.filter(pc.invert(bad)), letters
