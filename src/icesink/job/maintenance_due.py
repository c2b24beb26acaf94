"""Whether the job maintains a table now (job/maintainer.py runs it). Pure: the figures of its
commits in, the run due (a compaction or a full run, and why in words) or None out."""

from __future__ import annotations

from dataclasses import dataclass

from icesink.config import MaintainedTables, MaintenanceConfig, TableSettings


@dataclass
class TableHealth:
    """What the job saw of one table since it last maintained it."""

    commits: int = 0  # commits since its last full maintenance (or since the job started)
    live_delete_files: int | None = None  # after its newest commit (the snapshot summary's total)
    partitions: int = 1  # the most partitions one of its commits changed (the summary's count)
    last_run: float | None = None  # monotonic time the last maintenance run of it ended


def maintained(settings: TableSettings, policy: MaintainedTables) -> bool:
    """Whether the job maintains a table: its own `maintain` setting, else by its mode."""
    if settings.maintain is not None:
        return settings.maintain
    return policy is MaintainedTables.ALL or (policy is MaintainedTables.CHANGES and settings.is_cdc)


@dataclass(frozen=True)
class Due:
    """A maintenance run to do now: why, and whether in full (manifests and snapshots too)."""

    reason: str
    full: bool


def rest_after(seconds: float, max_share: float) -> float:
    """How long the job's maintenance rests after a run of `seconds`, so that its runs take at most
    `max_share` of the job's time. A compaction of a table of changes rewrites every partition its
    deletes touch; once a run takes longer than the delete files it clears take to gather again
    (~22 s against 10 at a 1 s trigger, 16 partitions), runs would follow each other and take a
    core from the batches for good."""
    return seconds * (1 - max_share) / max_share


def turn(health: TableHealth | None, name: str) -> tuple[float, str]:
    """The order of the tables waiting for the maintenance: never maintained first, then the
    longest since their last run, so that one table due after every rest keeps no other waiting."""
    last = health.last_run if health is not None else None
    return (float("-inf") if last is None else last, name)


def due(health: TableHealth, config: MaintenanceConfig, now: float) -> Due | None:
    """The run the table needs now, or None. A table's delete files ask for a compaction (which
    also removes the deletes it leaves dangling), its commits for a full run: the compaction, then
    its manifests rewritten and its old snapshots expired (each commit adds a manifest or two and a
    snapshot, which every reader plans and every commit rewrites). Never a run within
    `min_interval_s` of the last one."""
    if health.last_run is not None and now - health.last_run < config.min_interval_s:
        return None
    if health.commits >= config.commits:
        return Due(f"{health.commits} commits since its last full maintenance (maintenance.commits: "
                   f"{config.commits})", full=True)  # fmt: skip
    # A read applies the deletes of a data file's own partition: the threshold is per partition,
    # over as many as the table's commits change.
    deletes, limit = health.live_delete_files, config.delete_files * max(1, health.partitions)
    if deletes is not None and deletes >= limit:
        per = "" if limit == config.delete_files else f" per partition, {health.partitions} partitions"
        return Due(f"{deletes} live delete files (maintenance.delete_files: {config.delete_files}{per})", full=False)
    return None
