"""The maintenance section: which tables the job keeps fast to read while it runs, and when."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, field_validator

from icesink.config.base import Section

AGE = re.compile(r"^(\d+)([mhd])$")  # 90m, 12h, 3d: as `icesink maintain --expire-after` takes it


class MaintainedTables(StrEnum):
    CHANGES = "changes"
    ALL = "all"
    NONE = "none"


class MaintenanceConfig(Section):
    tables: MaintainedTables = Field(
        MaintainedTables.CHANGES,
        description="tables the job maintains after its commits: changes (upsert and changelog tables, which "
        "gather an equality-delete file per batch), all (append tables too), none; tables.per_table.<t>.maintain "
        "overrides it per table",
    )
    delete_files: int = Field(
        10,
        ge=1,
        description="compact a table (and remove the delete files that then dangle) once it has this many live "
        "delete files per partition (counted over the most partitions one of its commits changed): a read applies "
        "each of its partition's",
    )
    commits: int = Field(
        300,
        ge=1,
        description="a full run after this many commits since the last one: compaction, the manifests rewritten, "
        "snapshots older than expire_after expired (each commit adds a manifest or two and a snapshot)",
    )
    min_interval_s: int = Field(10, ge=0, description="at least this long between two maintenance runs of one table")
    max_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="the most of the job's time its maintenance runs take: after a run of T seconds, none for "
        "T x (1 - max_share) / max_share (a 20 s run at 0.25: 60 s); 1 lets runs follow each other",
    )
    concurrent_groups: int = Field(
        1,
        ge=1,
        description="file groups (a partition's files) a compaction by the job rewrites at once (Iceberg's "
        "max-concurrent-file-group-rewrites), each a Spark job: at 1, its tasks (one for a small partition's files) "
        "leave the batches a task slot; more on a cluster with cores to spare",
    )
    expire_after: str = Field(
        "1h",
        description="snapshots older than this (90m, 12h, 3d) are expired by a full run; the newest snapshot "
        "holding offsets and all after it are always kept",
    )

    @field_validator("expire_after")
    @classmethod
    def _age(cls, v: str) -> str:
        if not AGE.match(v):
            raise ValueError(f"{v!r} is not an age such as 90m, 12h or 3d")
        return v
