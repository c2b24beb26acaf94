"""Avro records decoded once for all that decode them alike, in a task: the tables of a field-routed
topic each decode the same records whole and keep their own (TableOut.routed), and a guessed
batch's routing judge reads the field from those rows (tasks/route_judges.py). The last batch only.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable

import pyarrow as pa

from icesink.tasks.decode_avro import DirectAvro

# The batch last decoded, and per decoding (`decode_key`) its writer schemas' frames and rows.
_last: tuple[pa.RecordBatch | None, dict[bytes, tuple[frozenset[bytes], pa.Table | None]]] = (None, {})


def decode_key(direct: DirectAvro, schema: pa.Schema) -> bytes:
    """What decoding a record depends on: the writer schemas, the table's columns (field ids too)."""
    return hashlib.sha256(pickle.dumps(direct) + schema.serialize().to_pybytes()).digest()


def decoded_once(
    batch: pa.RecordBatch, key: bytes, frames: frozenset[bytes], decode: Callable[[], pa.Table | None]
) -> pa.Table | None:  # fmt: skip
    """`decode()` of `batch`'s records, or the rows an earlier call decoded of the same batch alike."""
    global _last
    if _last[0] is not batch:
        _last = (batch, {})
    found = _last[1]
    if key not in found:
        found[key] = (frames, decode())
    return found[key][1]


def decoded_of(batch: pa.RecordBatch, frames: frozenset[bytes]) -> list[pa.Table]:
    """The rows of every record of `batch` decoded already with the writer schemas `frames`."""
    if _last[0] is not batch:
        return []
    return [rows for f, rows in _last[1].values() if f == frames and rows is not None]


def forget() -> None:
    """At a task's end: the Python worker may run another."""
    global _last
    _last = (None, {})
