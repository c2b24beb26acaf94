"""What a task says of each file it wrote: one small row (a `WrittenFile`, field for field:
`DESCRIPTOR_DDL`), which the driver collects and commits (`written_file`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from icesink.model import WrittenFile

# A descriptor row's column types, one per field of WrittenFile (a new field fails here, at import).
_DESCRIPTOR_TYPES = {
    "path": ("string", pa.string()),
    "record_count": ("long", pa.int64()),
    "file_size": ("long", pa.int64()),
    "content": ("string", pa.string()),
    "partition": ("array<string>", pa.list_(pa.string())),
    "footer": ("binary", pa.binary()),
}
DESCRIPTOR_FIELDS = list(WrittenFile.__annotations__)  # its fields, in order
DESCRIPTOR_DDL = ", ".join(f"{name} {_DESCRIPTOR_TYPES[name][0]}" for name in DESCRIPTOR_FIELDS)


def written_file(row: Any) -> WrittenFile:
    """The WrittenFile of a descriptor row (a Spark Row of `DESCRIPTOR_DDL`) collected on the driver."""
    footer = bytes(row.footer) if row.footer is not None else b""
    return WrittenFile(row.path, row.record_count, row.file_size, row.content, tuple(row.partition or ()), footer)


def descriptor_batches(files: list[WrittenFile]) -> Iterator[pa.RecordBatch]:
    """The files as descriptor rows (`DESCRIPTOR_DDL`), one Arrow batch."""
    if files:
        yield pa.RecordBatch.from_arrays(descriptor_columns(files), names=DESCRIPTOR_FIELDS)


def descriptor_columns(files: Sequence[WrittenFile | None]) -> list[pa.Array]:
    """The descriptor columns of `files`, in `DESCRIPTOR_DDL` order (all nulls for a None)."""
    return [
        pa.array([_descriptor_value(getattr(f, n)) if f is not None else None for f in files], _DESCRIPTOR_TYPES[n][1])
        for n in DESCRIPTOR_FIELDS
    ]


def _descriptor_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
