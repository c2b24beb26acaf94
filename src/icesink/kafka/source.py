"""Spark's Kafka source options: the stream's (subscribePattern, from where, how much per batch),
and a batch read of exact offset ranges (one table's share of a micro-batch)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from icesink.config import Config
from icesink.model import PartitionRange

# Options that say which records a streaming query reads; a read of exact ranges sets its own.
_STREAM_ONLY = frozenset(
    {
        "startingOffsets", "startingOffsetsByTimestamp", "startingTimestamp", "startingOffsetsByTimestampStrategy",
        "endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp",
        "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    }
)  # fmt: skip


def common_options(config: Config) -> dict[str, str]:
    """How to reach Kafka and read its records, the same for the stream and a read of ranges."""
    k = config.kafka
    opts = {
        "kafka.bootstrap.servers": k.bootstrap_servers,
        "failOnDataLoss": str(k.fail_on_data_loss).lower(),
        "includeHeaders": "true",
        "kafka.isolation.level": k.isolation_level,
        # New daily topics are found on a metadata refresh; Kafka's default waits 5 minutes.
        "kafka.metadata.max.age.ms": str(k.metadata_max_age_ms),
        # A task reads a known range of records that are already in the log, then stops; with
        # Kafka's default (500 ms) each task waits that long on a fetch for records past its range.
        "kafka.fetch.max.wait.ms": "10",
    }
    opts.update(k.options)
    return opts


def stream_options(config: Config, starting_offsets: str, default_max_per_trigger: int | None = None) -> dict[str, str]:
    """The streaming query's source: every topic of the pattern, from `starting_offsets`, at most
    `kafka.max_offsets_per_trigger` records a batch, else `default_max_per_trigger` (the job's own
    options win over the defaults, as in `common_options`)."""
    k = config.kafka
    opts = {"subscribePattern": k.subscribe_pattern, "startingOffsets": starting_offsets}
    cap = k.max_offsets_per_trigger or default_max_per_trigger
    if cap:
        opts["maxOffsetsPerTrigger"] = str(cap)
    return {**opts, **common_options(config)}


def range_options(config: Config, ranges: Iterable[PartitionRange]) -> dict[str, str]:
    """A batch read of exactly `ranges` (first to last offset, inclusive): the same records a
    micro-batch holds for those topic-partitions, markers and compacted-away offsets included."""
    assign: dict[str, list[int]] = {}
    start: dict[str, dict[str, int]] = {}
    end: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r.tp.topic, []).append(r.tp.partition)
        start.setdefault(r.tp.topic, {})[str(r.tp.partition)] = r.first_offset
        end.setdefault(r.tp.topic, {})[str(r.tp.partition)] = r.last_offset + 1
    if not assign:
        raise ValueError("a read of offset ranges needs at least one range")
    opts = {n: v for n, v in common_options(config).items() if n not in _STREAM_ONLY}
    opts.update(
        {
            "assign": json.dumps(assign, sort_keys=True),
            "startingOffsets": json.dumps(start, sort_keys=True),
            "endingOffsets": json.dumps(end, sort_keys=True),
        }
    )
    return opts
