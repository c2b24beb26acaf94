"""The changes of an upsert or changelog table in the one-pass job (tasks/one_pass.py): each task
reduces its own records to the last change per key, so a key must not have changes in two tasks.

Spark's path shuffles the changes by key so that a task holds every change of its keys. The
one-pass job does not shuffle: a task reads whole topic-partitions, and a producer that keys its
records by the table's key (Debezium does) puts every change of a key in one partition. Nothing
here trusts that. Each task returns a fingerprint of every key it wrote (`key_fingerprints`), and
the driver declines the table when a fingerprint comes from two tasks (`shared_keys`), before
anything is committed: a second one-pass job of one task then writes it (batch/direct_rounds.py).
Two keys with the same fingerprint only cost that detour.

A record is taken only when Spark's path would apply it (`operation_codes`): its operation one of
OP_CODES as Spark reads it (lowered, trimmed of spaces), its key columns all set. Anything else
is a dead letter there: a change with an operation not in OP_CODES or without a key column's
value, and a tombstone without a record key or whose key lacks a key column, become the same
dead letters here (`change_problems`, in batch/changes.classify's words); an operation that is
not ASCII declines the table.

Pure: pyarrow, numpy and polars.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.modes import WriteMode

OP = "__icesink_op"
INSERT, UPDATE, DELETE = "I", "U", "D"
# Accepted spellings of the operation column (the Tabular sink's I/U/D, Debezium's letters, words).
OP_CODES = {
    "i": INSERT, "c": INSERT, "r": INSERT, "insert": INSERT, "create": INSERT,
    "u": UPDATE, "update": UPDATE,
    "d": DELETE, "delete": DELETE,
}  # fmt: skip


@dataclass(frozen=True)
class ChangeSpec:
    mode: WriteMode
    keys: tuple[str, ...]
    operation_column: str
    key_column: str  # the column holding the decoded Kafka key, if keys are decoded
    order_by: str | None = None


_SPELLINGS = pa.array(sorted(OP_CODES))
_CODES = pa.array([OP_CODES[k] for k in sorted(OP_CODES)])


def operation_codes(raw: pa.ChunkedArray | pa.Array | None, rows: int) -> pa.Array | None:
    """Each record's I/U/D code from the operation column's values (`raw`; None for an upsert
    table, whose every change is an update), or None when one would not be taken: a null, a
    spelling not in OP_CODES, or one that is not ASCII (whose lower case this does not vouch
    matches the JVM's)."""
    if raw is None:
        return pa.array([UPDATE] * rows, pa.string())
    if isinstance(raw, pa.ChunkedArray):
        raw = raw.combine_chunks()
    if raw.null_count or not pc.all(pc.string_is_ascii(raw)).as_py():
        return None
    # Spark's trim removes spaces only, not other whitespace.
    spelled = pc.utf8_lower(pc.utf8_trim(raw, " "))
    found = pc.index_in(spelled, value_set=_SPELLINGS)
    if found.null_count:
        return None
    return _CODES.take(found)


def change_problems(
    values: pa.Table, raw: pa.ChunkedArray | pa.Array | None, tombstones: pa.Array, spec: ChangeSpec,
    limit: int = 0,
) -> dict[int, tuple[str, str]] | None:  # fmt: skip
    """The changes Spark's path makes dead letters of, by row: (error class, message) in its words
    (batch/changes.classify): a tombstone without a record key (its key column, `spec.key_column`,
    null) or whose key lacks a key column's value; an operation (`raw`, None for an upsert table)
    not in OP_CODES, then a key column without a value. None (the table is declined) for more than
    `limit` of them (the letters it may still take), or when one is in doubt: an operation not
    ASCII, a tombstone without its key where no key column says why."""
    n = values.num_rows
    live = pc.invert(tombstones)
    missing = {k: pc.is_null(values.column(k)) for k in spec.keys}
    no_key = _none(n)
    for m in missing.values():
        no_key = pc.or_(no_key, m)
    keyless = _keyless(values, tombstones, no_key, spec.key_column)
    if keyless is None:
        return None
    unknown = _none(n)
    if raw is not None:
        raw = raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw
        if not pc.all(pc.or_(tombstones, pc.fill_null(pc.string_is_ascii(raw), True))).as_py():
            return None
        found = pc.index_in(pc.utf8_lower(pc.utf8_trim(raw, " ")), value_set=_SPELLINGS)
        unknown = pc.and_(live, pc.is_null(found))
    bad = pc.or_(pc.or_(unknown, keyless), no_key)
    count = pc.sum(bad).as_py() or 0
    if count > limit:
        return None
    if not count:
        return {}
    return {
        j: _worded(j, keyless, tombstones, unknown, raw, missing, spec) for j in pc.indices_nonzero(bad).to_pylist()
    }


def _worded(
    j: int, keyless: pa.Array, tombstones: pa.Array, unknown: pa.Array, raw: pa.Array | None,
    missing: dict[str, pa.Array], spec: ChangeSpec,
) -> tuple[str, str]:  # fmt: skip
    """Row `j`'s dead letter, as classify words it (its first error of those `change_problems` finds)."""
    names = ", ".join(k for k in spec.keys if missing[k][j].as_py())
    if keyless[j].as_py():
        return "NullValue", "null value and null key: no row to delete"
    if tombstones[j].as_py():
        return "MissingKey", f"a tombstone whose record key has no value for key column(s) {names}"
    if unknown[j].as_py():
        assert raw is not None
        held = raw[j].as_py()
        spelled = "null" if held is None else f"'{held}'"
        return "UnknownOperation", f"operation column {spec.operation_column} holds {spelled}, not I, U or D"
    return "MissingKey", f"no value for key column(s) {names}"


def _none(n: int) -> pa.Array:
    """`n` falses, made in Arrow: a Python list of them cost ~2 ms per 10,000 rows of every chunk."""
    return pa.repeat(pa.scalar(False), n)


def _keyless(values: pa.Table, tombstones: pa.Array, no_key: pa.Array, key_column: str) -> pa.Array | None:
    """Which tombstones had no record key (their key column null), or None when a tombstone lacks
    a key column's value and the table has no key column to say whether its record key was null."""
    if key_column in values.column_names:
        return pc.and_(tombstones, pc.is_null(values.column(key_column)))
    if pc.any(pc.and_(tombstones, no_key)).as_py():
        return None
    return _none(values.num_rows)


def key_fingerprints(keys: pa.Table) -> bytes:
    """A 64-bit hash of each row of `keys` (the key columns, in the table's types), as bytes:
    the same key gives the same hash in every task (polars' row hash with a fixed seed)."""
    import polars as pl

    hashes = pl.from_arrow(keys).hash_rows(seed=0).to_numpy()  # type: ignore[union-attr]
    return hashes.astype(np.uint64).tobytes()


def shared_keys(fingerprints: Sequence[bytes]) -> bool:
    """Whether any fingerprint is in more than one of the tasks' `fingerprints` (each task's keys
    are distinct already: it wrote one change per key)."""
    if len(fingerprints) <= 1:
        return False
    found = np.concatenate([np.frombuffer(f, dtype=np.uint64) for f in fingerprints])
    return bool(np.unique(found).size < found.size)
