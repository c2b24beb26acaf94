"""Live rows of a table's current snapshot, read through PyIceberg: its manifests' live entries,
then only the key columns of the data and delete files iceberg/live_rows.py needs (several at a
time), whose deletes it applies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from icesink.iceberg.live_rows import (
    FILE_PATH_ID,
    POS_ID,
    POSITION_DELETES,
    FileEntry,
    UnsupportedFileError,
    columns_to_read,
    live_rows,
)

_POSITION_NAMES = {FILE_PATH_ID: "file_path", POS_ID: "pos"}
_READERS = 8  # files read at once (S3 round trips, not CPU)


def manifest_entries(table: Any) -> list[FileEntry]:
    """The live entries (ADDED and EXISTING) of the current snapshot's manifests."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    io = table.io
    specs = table.specs()
    with ThreadPoolExecutor(_READERS) as pool:
        lists = list(pool.map(lambda m: m.fetch_manifest_entry(io, discard_deleted=True), snapshot.manifests(io)))
    out = []
    for entries in lists:
        for entry in entries:
            f = entry.data_file
            out.append(
                FileEntry(
                    path=f.file_path,
                    content=int(f.content),
                    sequence_number=int(entry.sequence_number or 0),
                    record_count=int(f.record_count),
                    equality_ids=tuple(f.equality_ids or ()),
                    spec_id=int(f.spec_id),
                    partition=tuple(f.partition[i] for i in range(len(f.partition))),
                    unpartitioned=specs[f.spec_id].is_unpartitioned(),
                    file_format=str(f.file_format.value),
                )
            )
    return out


def read_columns(io: Any, path: str, field_ids: Sequence[int], names: Mapping[int, str]) -> Any:
    """Columns of a Parquet file by field id (top level or inside structs; by top-level name,
    `names`, in files written without field ids), named after their field ids; a column the file
    does not have is all nulls. Only these columns are read."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    with io.new_input(path).open() as f:
        pf = pq.ParquetFile(f)
        schema = pf.schema_arrow
        found: dict[int, tuple[int, ...]] = {}

        def walk(fields: list[Any], trail: tuple[int, ...]) -> None:
            for i, field in enumerate(fields):
                fid = (field.metadata or {}).get(b"PARQUET:field_id")
                if fid is not None:
                    found.setdefault(int(fid), (*trail, i))
                if pa.types.is_struct(field.type):
                    walk([field.type.field(j) for j in range(field.type.num_fields)], (*trail, i))

        walk(list(schema), ())
        for fid in field_ids:
            if fid not in found and names.get(fid) in schema.names:
                found[fid] = (schema.get_field_index(names[fid]),)
        tops = sorted({found[fid][0] for fid in field_ids if fid in found})
        read = pf.read(columns=[schema.field(i).name for i in tops])
        rows = pf.metadata.num_rows
    columns: dict[str, Any] = {}
    for fid in field_ids:
        if fid not in found:
            columns[str(fid)] = pa.nulls(rows)
            continue
        top, *inner = found[fid]
        column = read.column(schema.field(top).name)
        columns[str(fid)] = pc.struct_field(column, inner) if inner else column
    return pa.table(columns)


def count_live_rows(table: Any) -> int:
    """Live rows of the table's current snapshot: reads its manifests, then only the key columns
    of the data and delete files `columns_to_read` names (in parallel), and applies the deletes."""
    entries = manifest_entries(table)
    wanted = columns_to_read(entries)
    by_path = {e.path: e for e in entries}
    for path in wanted:
        if by_path[path].file_format != "PARQUET":
            raise UnsupportedFileError(f"{path} is {by_path[path].file_format}; only Parquet files are read")
    names = {field.field_id: field.name for field in table.schema().fields} | _POSITION_NAMES

    def read(path: str) -> tuple[str, Any]:
        columns = read_columns(table.io, path, wanted[path], names)
        if by_path[path].content == POSITION_DELETES:
            columns = columns.rename_columns({str(i): name for i, name in _POSITION_NAMES.items()})
        return path, columns

    with ThreadPoolExecutor(_READERS) as pool:
        tables = dict(pool.map(read, wanted))
    return live_rows(entries, tables)
