"""Write tasks of the unit tests: a table's files in a local folder (tasks/files.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from icesink.tasks.files import WriteTask
from icesink.tasks.storage import StorageSettings


def local_task(folder: Path, arrow_schema: pa.Schema, target: int = 128 * 1024 * 1024) -> WriteTask:
    """A task writing table ns.t's files to `folder`."""
    return WriteTask(
        table="ns.t",
        arrow_schema=arrow_schema,
        data_location=f"file://{folder}/",
        file_prefix="q-00000001",
        storage=StorageSettings(),
        target_file_size=target,
    )
