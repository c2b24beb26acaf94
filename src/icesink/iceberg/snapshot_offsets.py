"""The offsets codec: Kafka positions stored in Iceberg snapshot summary properties. Pure.

A table's offset-bearing snapshot carries, for every topic-partition ever routed to it, the next
offset NOT yet in the table. Kafka offsets are positions, not counts: transactional topics leave
gaps (commit markers), so nothing here ever counts records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from icesink.errors import OffsetsError
from icesink.model import Offsets, TopicPartition

OFFSETS_KEY = "icesink.offsets"
QUERY_ID_KEY = "icesink.query-id"
BATCH_ID_KEY = "icesink.batch-id"
FORMAT_KEY = "icesink.offsets-format"
FORMAT_VERSION = "1"


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


def latest_offsets(summaries: Iterable[Mapping[str, str]]) -> Offsets:
    """Walks summaries newest first (current snapshot, then its ancestors) to the first that has offsets."""
    for summary in summaries:
        found = from_summary(summary)
        if found is not None:
            return found
    return {}
