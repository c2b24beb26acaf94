"""The exactly-once core: Kafka positions stored in Iceberg snapshot summaries, and the one rule
that reads a table's offsets back. Pure.

A table's offset-bearing snapshot carries, for every topic-partition ever routed to it, the next
offset NOT yet in the table. Kafka offsets are positions, not counts: transactional topics leave
gaps (commit markers), so nothing here ever counts records.

The table's offsets are those of the newest offset-bearing snapshot on the current snapshot's
ancestry (the current snapshot, its parent, its parent's parent...): a compaction or other
maintenance commit carries no offsets and is walked past; a deliberate rewind is an offset-bearing
snapshot with lowered offsets, so once it is the newest, it wins. Every reader (the job and its
commit fence through Iceberg's Java API, the CLI through PyIceberg, maintenance) walks its own
snapshot objects newest first through `newest_offsets`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from icesink.errors import OffsetsError
from icesink.model import Offsets, TopicPartition

OFFSETS_KEY = "icesink.offsets"
QUERY_ID_KEY = "icesink.query-id"
BATCH_ID_KEY = "icesink.batch-id"
FORMAT_KEY = "icesink.offsets-format"
FORMAT_VERSION = "1"

S = TypeVar("S")


def encode(offsets: Mapping[TopicPartition, int]) -> str:
    """Compact, deterministic JSON: {"topic": {"partition": next_offset}}."""
    nested: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        nested.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return json.dumps(nested, separators=(",", ":"), sort_keys=True)


def decode(text: str) -> Offsets:
    try:
        nested = json.loads(text)
        out: Offsets = {}
        for topic, parts in nested.items():
            for part, off in parts.items():
                if not isinstance(off, int) or isinstance(off, bool) or off < 0:
                    raise ValueError(f"offset {off!r} of {topic}[{part}] is not a non-negative integer")
                out[TopicPartition(str(topic), int(part))] = off
        return out
    except (ValueError, AttributeError, TypeError) as e:
        raise OffsetsError(f"cannot decode {OFFSETS_KEY}={text[:200]!r}: {e}") from e


def summary_properties(offsets: Mapping[TopicPartition, int], query_id: str, batch_id: int) -> dict[str, str]:
    return {
        OFFSETS_KEY: encode(offsets),
        FORMAT_KEY: FORMAT_VERSION,
        QUERY_ID_KEY: query_id,
        BATCH_ID_KEY: str(batch_id),
    }


def from_summary(summary: Mapping[str, str]) -> Offsets | None:
    """The offsets of one snapshot summary, or None when the snapshot carries none (e.g. compaction)."""
    text = summary.get(OFFSETS_KEY)
    return None if text is None else decode(text)


@dataclass(frozen=True)
class OffsetsFound(Generic[S]):
    """The newest offset-bearing snapshot: the caller's own snapshot object (for its id and commit
    time), its summary and the offsets decoded from it."""

    snapshot: S
    summary: Mapping[str, str]
    offsets: Offsets

    @property
    def query_id(self) -> str | None:
        return self.summary.get(QUERY_ID_KEY)

    @property
    def batch_id(self) -> int | None:
        text = self.summary.get(BATCH_ID_KEY)
        return None if text is None else int(text)


@overload
def newest_offsets(snapshots: Iterable[Mapping[str, str]]) -> OffsetsFound[Mapping[str, str]] | None: ...


@overload
def newest_offsets(snapshots: Iterable[S], summary_of: Callable[[S], Mapping[str, str]]) -> OffsetsFound[S] | None: ...


def newest_offsets(
    snapshots: Iterable[Any], summary_of: Callable[[Any], Mapping[str, str]] | None = None
) -> OffsetsFound[Any] | None:
    """The first snapshot that carries offsets, walking `snapshots` in the order given, which must be
    newest first along the current snapshot's ancestry; None when none does (a new table).
    `summary_of` gives a snapshot's summary (the snapshots are summaries when it is omitted).
    Stops at the first offset-bearing snapshot: older ones are never read."""
    for snapshot in snapshots:
        summary = snapshot if summary_of is None else summary_of(snapshot)
        offsets = from_summary(summary)
        if offsets is not None:
            return OffsetsFound(snapshot, summary, offsets)
    return None


def is_our_commit(summary: Mapping[str, str] | None, query_id: str, batch_id: int, offsets: Offsets) -> bool:
    """Whether `summary` is this very batch's commit: same query, same batch, same offsets. Used
    when a commit's outcome was unknown (lost response, retried request) to learn that it landed."""
    if summary is None:
        return False
    return (
        summary.get(QUERY_ID_KEY) == query_id
        and summary.get(BATCH_ID_KEY) == str(batch_id)
        and from_summary(summary) == offsets
    )
