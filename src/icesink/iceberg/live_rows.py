"""Live rows of a table without Spark: a snapshot's `total-records` counts data rows before deletes,
so for upsert/changelog tables (and any table with delete files) it overcounts. PyIceberg 0.12 does
not scan tables with equality deletes, so `live_rows` applies the deletes itself, as the Iceberg
spec has it, over arrow tables of only the key columns (`columns_to_read` says which files and
columns); iceberg/live_count.py is the thin part that reads the manifests and those columns.
Pure: Arrow only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Live rows: Iceberg's delete semantics over arrow tables of key columns ----------------------------

DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2  # a file's content, as manifests have it
FILE_PATH_ID, POS_ID = 2147483546, 2147483545  # reserved field ids of a position delete file's columns


class UnsupportedFileError(Exception):
    """A file whose rows live rows cannot be counted from (iceberg/live_count.py reads only Parquet)."""


@dataclass(frozen=True)
class FileEntry:
    """A live manifest entry (ADDED or EXISTING) of a snapshot: what counting live rows needs."""

    path: str
    content: int  # DATA, POSITION_DELETES or EQUALITY_DELETES
    sequence_number: int  # the entry's data sequence number
    record_count: int
    equality_ids: tuple[int, ...] = ()  # equality delete files: the field ids they compare
    spec_id: int = 0
    partition: tuple[Any, ...] = ()  # partition values
    unpartitioned: bool = True  # its spec has no fields: an equality delete then applies in every partition
    file_format: str = "PARQUET"

    @property
    def group(self) -> tuple[Any, ...]:
        return (self.spec_id, *self.partition)


_Index = dict[tuple[int, ...], dict[tuple[Any, ...] | None, int]]


def _equality_index(entries: Sequence[FileEntry]) -> _Index:
    """Per equality-id set: the highest data sequence number of its delete files per partition
    (None: delete files of an unpartitioned spec, which apply to every partition)."""
    index: _Index = {}
    for e in entries:
        if e.content == EQUALITY_DELETES:
            if not e.equality_ids:
                raise UnsupportedFileError(f"equality delete file {e.path} has no equality ids")
            seqs = index.setdefault(e.equality_ids, {})
            where = None if e.unpartitioned else e.group
            seqs[where] = max(seqs.get(where, e.sequence_number), e.sequence_number)
    return index


def _equality_sets(data: FileEntry, index: _Index) -> list[tuple[int, ...]]:
    """The equality-id sets with a delete file that applies to `data`: same partition (or an
    unpartitioned delete) and a strictly higher data sequence number."""
    return [
        ids for ids, seqs in index.items() if max(seqs.get(data.group, -1), seqs.get(None, -1)) > data.sequence_number
    ]


def columns_to_read(entries: Sequence[FileEntry]) -> dict[str, tuple[int, ...]]:
    """The files whose rows counting needs, and their columns by field id: data files the
    equality columns of the delete files that apply to them (a data file no equality delete
    applies to is not read: position deletes name rows by position), equality delete files their
    equality ids, position delete files (FILE_PATH_ID, POS_ID). Delete files that apply to no
    live data file are not read either."""
    index = _equality_index(entries)
    data = [e for e in entries if e.content == DATA]
    wanted: dict[str, tuple[int, ...]] = {}
    oldest: dict[tuple[Any, ...], int] = {}  # lowest data sequence number per partition
    for d in data:
        oldest[d.group] = min(oldest.get(d.group, d.sequence_number), d.sequence_number)
        sets = _equality_sets(d, index)
        if sets:
            wanted[d.path] = tuple(sorted({i for ids in sets for i in ids}))
    oldest_any = min(oldest.values(), default=None)
    for e in entries:
        if e.content == EQUALITY_DELETES:
            lowest = oldest_any if e.unpartitioned else oldest.get(e.group)
            if lowest is not None and lowest < e.sequence_number:
                wanted[e.path] = e.equality_ids
        elif e.content == POSITION_DELETES and oldest_any is not None and oldest_any <= e.sequence_number:
            wanted[e.path] = (FILE_PATH_ID, POS_ID)
    return wanted


def _comparable(left: Any, right: Any, columns: list[str]) -> tuple[Any, Any, list[str]]:
    """Both sides with one type per key column, and the join keys: Iceberg's equality matches a
    null with a null, arrow's joins never do, so a column with nulls is compared as (validity,
    value with nulls filled)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = pa.unify_schemas([left.select(columns).schema, right.select(columns).schema], promote_options="permissive")
    keys = []
    for field in schema:
        name = field.name
        lcol, rcol = left.column(name).cast(field.type), right.column(name).cast(field.type)
        if lcol.null_count or rcol.null_count:
            valid = f"{name}.valid"
            left = left.append_column(valid, pc.is_valid(lcol))
            right = right.append_column(valid, pc.is_valid(rcol))
            keys.append(valid)
            some = pc.drop_null(pa.chunked_array([*lcol.chunks, *rcol.chunks], type=field.type))
            if len(some) == 0:  # null on both sides: the validity says it all
                left, right = left.drop_columns([name]), right.drop_columns([name])
                continue
            lcol, rcol = pc.fill_null(lcol, some[0]), pc.fill_null(rcol, some[0])
        left = left.set_column(left.schema.get_field_index(name), name, lcol)
        right = right.set_column(right.schema.get_field_index(name), name, rcol)
        keys.append(name)
    return left, right, keys


def live_rows(entries: Sequence[FileEntry], tables: Mapping[str, Any]) -> int:
    """The rows of the live data files that no delete removes, by the Iceberg spec: an equality
    delete removes a row whose values of its equality columns are equal (null equals null) when
    its data sequence number is strictly higher than the data file's and it is in the same
    partition or unpartitioned; a position delete removes (file_path, pos) when its sequence
    number is higher than or equal to the data file's.

    Pure: `tables` holds an arrow table per file of `columns_to_read(entries)`, columns named
    after their field ids (str), position deletes `file_path` and `pos`; a data file's table has
    all its rows, in file order (its row positions)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    data = [e for e in entries if e.content == DATA]
    total = sum(d.record_count for d in data)
    # Every data row gets an id, its file's base plus its position, so a row deleted twice counts once.
    bases = np.cumsum([0, *(d.record_count for d in data)])[:-1].astype(np.int64)
    wanted = columns_to_read(entries)
    deleted = [
        *_equality_deleted(entries, data, bases, tables, wanted),
        *_position_deleted(entries, data, bases, tables, wanted),
    ]
    chunks = [chunk.cast(pa.int64()) for column in deleted for chunk in column.chunks]
    if not chunks:
        return total
    return total - int(pc.count_distinct(pa.chunked_array(chunks, pa.int64())).as_py())


def _same(n: int, value: int) -> Any:
    import numpy as np
    import pyarrow as pa

    return pa.array(np.full(n, value, dtype=np.int64))


def _equality_deleted(
    entries: Sequence[FileEntry],
    data: Sequence[FileEntry],
    bases: Any,
    tables: Mapping[str, Any],
    wanted: Mapping[str, tuple[int, ...]],
) -> list[Any]:
    """The ids of the data rows equality deletes remove (columns of row ids, maybe overlapping)."""
    codes: dict[tuple[Any, ...], int] = {}  # a partition's number: the join key of "same partition"

    def code(group: tuple[Any, ...]) -> int:
        return codes.setdefault(group, len(codes))

    index = _equality_index(entries)
    deleted: list[Any] = []
    for ids in index:
        columns = [str(i) for i in ids]
        left = []
        for base, d in zip(bases, data, strict=True):
            if ids in _equality_sets(d, index):
                left.append(_data_keys(d, int(base), tables[d.path], columns, code(d.group)))
        right = []
        for e in entries:
            if e.content == EQUALITY_DELETES and e.equality_ids == ids and e.path in wanted:
                right.append(_delete_keys(e, tables[e.path], columns, -1 if e.unpartitioned else code(e.group)))
        if left and right:
            deleted.extend(_equality_hits(left, right, columns))
    return deleted


def _data_keys(d: FileEntry, base: int, t: Any, columns: list[str], group: int) -> Any:
    """A data file's key columns with each row's sequence number, partition and row id."""
    import numpy as np
    import pyarrow as pa

    if t.num_rows != d.record_count:
        raise ValueError(f"data file {d.path} has {t.num_rows} rows, its manifest entry {d.record_count}")
    n = t.num_rows
    keys = {c: t.column(c) for c in columns}
    row = pa.array(np.arange(base, base + n, dtype=np.int64))
    return pa.table({**keys, "_seq": _same(n, d.sequence_number), "_group": _same(n, group), "_row": row})


def _delete_keys(e: FileEntry, t: Any, columns: list[str], group: int) -> Any:
    """An equality delete file's key columns with each row's sequence number and partition (-1: all)."""
    import pyarrow as pa

    n = t.num_rows
    keys = {c: t.column(c) for c in columns}
    return pa.table({**keys, "_dseq": _same(n, e.sequence_number), "_group": _same(n, group)})


def _equality_hits(left: list[Any], right: list[Any], columns: list[str]) -> list[Any]:
    """The row ids of `left` (data keys) that a newer row of `right` (delete keys) removes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lhs, rhs, keys = _comparable(
        pa.concat_tables(left, promote_options="permissive"),
        pa.concat_tables(right, promote_options="permissive"),
        columns,
    )
    # Only the newest delete of a key matters: at most one delete row per key and partition.
    rhs = rhs.group_by([*keys, "_group"]).aggregate([("_dseq", "max")])
    scoped = rhs.filter(pc.field("_group") != -1)
    everywhere = rhs.filter(pc.field("_group") == -1).drop_columns(["_group"])
    hits = []
    for deletes, on in ((scoped, [*keys, "_group"]), (everywhere, keys)):
        if deletes.num_rows:
            joined = lhs.join(deletes, keys=on, join_type="inner")
            hits.append(joined.filter(pc.field("_dseq_max") > pc.field("_seq")).column("_row"))
    return hits


def _position_deleted(
    entries: Sequence[FileEntry],
    data: Sequence[FileEntry],
    bases: Any,
    tables: Mapping[str, Any],
    wanted: Mapping[str, tuple[int, ...]],
) -> list[Any]:
    """The ids of the data rows position deletes remove."""
    import pyarrow as pa
    import pyarrow.compute as pc

    positions = [e for e in entries if e.content == POSITION_DELETES and e.path in wanted]
    if not positions or not data:
        return []
    parts = []
    for e in positions:
        t = tables[e.path]
        parts.append(
            pa.table(
                {
                    "file_path": t.column("file_path").cast(pa.string()),
                    "pos": t.column("pos").cast(pa.int64()),
                    "_dseq": _same(t.num_rows, e.sequence_number),
                }
            )
        )
    files = pa.table(
        {
            "file_path": pa.array([d.path for d in data], pa.string()),
            "_seq": pa.array([d.sequence_number for d in data], pa.int64()),
            "_base": pa.array(bases),
            "_count": pa.array([d.record_count for d in data], pa.int64()),
        }
    )
    hits = pa.concat_tables(parts).join(files, keys="file_path", join_type="inner")
    hits = hits.filter(
        (pc.field("_dseq") >= pc.field("_seq")) & (pc.field("pos") >= 0) & (pc.field("pos") < pc.field("_count"))
    )
    return [pc.add(hits.column("_base"), hits.column("pos"))]
