"""One table's share of a micro-batch as it goes through the steps: decoded (step 2), made ready
(step 3), written (step 4) and committed (step 5)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from icesink.batch.changes import ChangeSpec
from icesink.batch.plan import TablePlan
from icesink.config import TableSettings
from icesink.iceberg.jvm import JavaObject
from icesink.schema import partitioning
from icesink.schema.partitioning import PartitionField


@dataclass(frozen=True)
class Planned:
    """What a table's records are decoded with in one pass, per side (value, key), from the
    decoder's `guess`: None for a side whose decoder looks at the records first (a scan). A record
    a guess does not cover is left pending for a second pass."""

    values: Any = None
    keys: Any = None

    @property
    def guessed(self) -> bool:
        return self.values is not None or self.keys is not None


@dataclass
class TableWork:
    """One table's share of the batch, decoded: what the later steps create, write and commit."""

    plan: TablePlan
    table: JavaObject | None  # None until the prepare step creates it
    target: StructType  # the table's schema once this batch's new columns are added
    parsed: DataFrame | None  # the records with ROW and ERROR; None when the direct job wrote them (direct.py)
    settings: TableSettings
    changes: ChangeSpec | None = None  # upsert/changelog tables only
    records: DataFrame | None = None  # the batch's records the table takes, as read (for a second pass)
    planned: Planned = field(default_factory=Planned)

    @property
    def decoded(self) -> DataFrame:
        """`parsed`, of a table Spark decoded (any but the direct job's)."""
        assert self.parsed is not None, f"table {self.plan.table} was written by the direct job, not decoded"
        return self.parsed

    @property
    def keys(self) -> tuple[str, ...]:
        """The equality-delete key columns (upsert/changelog tables), else none."""
        return self.changes.keys if self.changes is not None else ()


def partition_fields(settings: TableSettings) -> list[PartitionField]:
    """The partition fields a table's settings ask for (`tables.partition_by`)."""
    return [partitioning.parse_partition_field(p) for p in settings.partition_by]
