"""Exact offset ranges read from Kafka by librdkafka (confluent-kafka) in a Python task: the
one-pass job's records (batch/direct.py) without Spark's Kafka source.

Spark's source reads the records in the JVM, one row object each, and hands them to the Python
task through Arrow: on two cores, a 300,000-record batch spent ~1.4 s there before any record was
decoded, against ~0.2 s per 150,000 records for librdkafka's fetcher and one Python object per
record. The ranges are still Spark's (the micro-batch it planned, from its offset log), so the
task reads exactly the records the batch holds.

What the task gets is what Spark's source gives for the same range with the same
`isolation.level`: the records from the first offset to the last, aborted transactions and
control markers left out, compacted-away offsets simply absent. Anything this module is not sure
of (an offset out of range, a broker error, a range that does not end) raises `RangeReadError`,
and the caller leaves the batch to Spark's source, which knows `failOnDataLoss` and the rest.

`split` is pure; `settings` and `RangeReader` talk to Kafka.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from icesink.model import PartitionRange

if TYPE_CHECKING:  # not at run time: the Python tasks import this module (the config is pydantic)
    from icesink.config import Config

log = logging.getLogger(__name__)

# Records per Arrow batch handed to the decoders (as Spark's arrow.maxRecordsPerBatch).
CHUNK = 10_000
# A range whose next record does not come for this long is left to Spark's source.
_STALL_S = 30.0


# The consumers of this process by thread and settings. A Python worker runs one task at a time;
# the driver reads new tables' samples from several threads (job.table_parallelism), and a consumer
# shared between them had one thread's assign replace another's: ranges that stalled for
# `_STALL_S` each (a first batch of 200 new tables planned for 200 s), records taken by the wrong reader.
_CONSUMERS: dict[tuple[int, tuple[tuple[str, str], ...]], Any] = {}


class RangeReadError(Exception):
    """A range librdkafka did not read to its end as Spark's source would have."""


# The driver's own reads (samples), one topic after the other: librdkafka fetched the metadata of a
# topic newly assigned to a consumer at its next periodic refresh, a second later (each sample of a
# first batch of 200 new tables took 1.0 s, 0.1 s with this).
DRIVER_READS = {"topic.metadata.refresh.interval.ms": "100"}


def settings(config: Config) -> dict[str, Any] | None:
    """librdkafka's settings for reading ranges: the job's `kafka.*` options with the job's
    isolation level, never a group commit. None, with the reason logged, when librdkafka does not
    take the options (Java-only settings such as `kafka.sasl.jaas.config`): then Spark's source
    reads the records."""
    from confluent_kafka import Consumer, KafkaException

    from icesink.kafka.admin import client_config

    found = client_config(
        config,
        **{
            "group.id": "icesink-range-reader",  # librdkafka wants one; nothing is committed to it
            "enable.auto.commit": "false",
            "enable.auto.offset.store": "false",
            "isolation.level": config.kafka.isolation_level,
            "auto.offset.reset": "error",  # an offset out of range is an error, never a jump
            "enable.partition.eof": "true",  # the end of the log ends a range whose last offsets are markers
            "fetch.wait.max.ms": "10",  # the records are in the log already
            # With 100,000 records fetched ahead (queued.min.messages), the fetcher paused 1 s
            # (its default) before fetching again: a stall of up to a second per range.
            "fetch.queue.backoff.ms": "10",
            # A task reads its ranges one after the other: librdkafka's default prefetch of up to
            # 64 MB per partition was held in each Python worker beside the rows it decodes. At
            # 8 MB, a 300,000-record batch's workers peaked 737 MB against 812, a 1M-record
            # Debezium catch-up's 1,797 against 1,927, at the same records/s.
            "queued.max.messages.kbytes": "8192",
        },
    )
    try:
        Consumer(found).close()
    except (KafkaException, ValueError, TypeError) as e:
        log.warning("the one-pass job reads Kafka through Spark's source: librdkafka refuses the kafka options: %s", e)
        return None
    return found


def split(ranges: Sequence[PartitionRange], tasks: int, whole: bool = False) -> list[list[PartitionRange]]:
    """`ranges` in at most `tasks` shares of about as many records each: whole topic-partitions
    where there are enough of them (or `whole`: always), a long one cut in consecutive pieces
    where there are not."""
    total = sum(r.records for r in ranges)
    if total == 0 or tasks <= 1:
        return [list(ranges)] if ranges else []
    share = -(-total // tasks)
    pieces: list[PartitionRange] = []
    for r in ranges:
        first = r.first_offset
        while not whole and r.last_offset - first + 1 > share:
            pieces.append(PartitionRange(r.tp, first, first + share - 1, share))
            first += share
        pieces.append(PartitionRange(r.tp, first, r.last_offset, r.last_offset - first + 1))
    shares: list[list[PartitionRange]] = [[] for _ in range(tasks)]
    sizes = [0] * tasks
    for p in sorted(pieces, key=lambda p: -p.records):
        i = sizes.index(min(sizes))
        shares[i].append(p)
        sizes[i] += p.records
    return [s for s in shares if s]


class RangeReader:
    """Reads ranges with one consumer per thread, kept for the life of the process (a consumer per
    task paid its connection set-up every micro-batch). Made and used in one thread."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self._key = (threading.get_ident(), tuple(sorted((k, str(v)) for k, v in settings.items())))
        self._settings = settings

    def _consumer(self) -> Any:
        from confluent_kafka import Consumer

        found = _CONSUMERS.get(self._key)
        if found is None:
            found = _CONSUMERS[self._key] = Consumer(self._settings)
        return found

    def _drop(self) -> None:
        consumer = _CONSUMERS.pop(self._key, None)
        if consumer is not None:
            consumer.close()

    def batches(
        self, ranges: Sequence[PartitionRange], headers: Mapping[str, str] | None = None, keys: bool = False
    ) -> Iterator[pa.RecordBatch]:
        """The records of `ranges` as Arrow batches of topic, partition, offset and value (with
        `keys`, the record key as `key`; with `headers`, column -> header key, a binary column of
        the value of the record's first header of that key, null for none)."""
        from confluent_kafka import TopicPartition as KafkaTP

        headers = headers or {}

        consumer = self._consumer()
        for assigned in _rounds(ranges):
            ends = {(r.tp.topic, r.tp.partition): r.last_offset for r in assigned}
            starts = {(r.tp.topic, r.tp.partition): r.first_offset for r in assigned}
            try:
                consumer.assign([KafkaTP(r.tp.topic, r.tp.partition, r.first_offset) for r in assigned])
                for batch in self._read(consumer, starts, ends, bool(headers), keys):
                    yield _batch(batch, headers, keys)
            except BaseException:
                self._drop()  # whatever it fetched or holds is not trusted again
                raise
            consumer.unassign()  # stops the fetcher reading ahead past the ranges

    def _read(
        self, consumer: Any, nexts: dict[tuple[str, int], int], ends: dict[tuple[str, int], int],
        headers: bool, keys: bool,
    ) -> Iterator[tuple[list[Any], ...]]:  # fmt: skip
        columns: tuple[list[Any], ...] = ([], [], [], [], [], [])
        offsets = columns[2]
        last_seen = time.monotonic()
        while ends:
            # consume() waits for as many messages as asked, or its timeout: never ask for more
            # than the ranges can still hold (it waited a whole timeout at each range's end).
            left = sum(end - nexts[key] + 1 for key, end in ends.items())
            messages = consumer.consume(max(1, min(CHUNK, left)), timeout=0.2)
            if messages:
                last_seen = time.monotonic()
            elif time.monotonic() - last_seen > _STALL_S:
                raise RangeReadError(f"no record for {_STALL_S:.0f} s; still to read: {sorted(ends)}")
            _take(messages, nexts, ends, columns, headers, keys)
            if len(offsets) >= CHUNK or (not ends and offsets):
                yield columns
                columns = ([], [], [], [], [], [])
                offsets = columns[2]


def _take(
    messages: list[Any], nexts: dict[tuple[str, int], int], ends: dict[tuple[str, int], int],
    columns: tuple[list[Any], ...], headers: bool, keys: bool,
) -> None:  # fmt: skip
    """The consumer's messages into `columns` (topic, partition, offset, value, key, and with
    `headers` each record's headers where it has any: (its row, them)), each when it is within its
    range; a range is done at its last message. One loop for all of them, its lookups bound once:
    it runs for every record of the batch."""
    topics, partitions, offsets, values, record_keys, headed = columns
    for m in messages:
        error = m.error()
        if error is not None:
            _error(m, error, ends)
            continue
        key = (m.topic(), m.partition())
        end = ends.get(key)
        offset = m.offset()
        if end is None or offset > end:
            ends.pop(key, None)
            continue
        nexts[key] = offset + 1
        topics.append(key[0])
        partitions.append(key[1])
        offsets.append(offset)
        values.append(m.value())
        if keys:
            record_keys.append(m.key())
        if headers:
            found = m.headers()
            if found:  # most records have none: nothing more to do for them
                headed.append((len(offsets) - 1, found))
        if offset == end:
            del ends[key]


def _error(m: Any, error: Any, ends: dict[tuple[str, int], int]) -> None:
    """A message that is an error: the end of a partition's log ends its range (its last offsets
    were markers or aborted records) unless the range reaches beyond it; anything else raises."""
    from confluent_kafka import KafkaError

    key = (m.topic(), m.partition())
    end = ends.get(key)
    if error.code() == KafkaError._PARTITION_EOF:
        if end is not None and m.offset() <= end:
            raise RangeReadError(f"{key[0]}-{key[1]}: the log ends at {m.offset()}, before {end + 1}")
        ends.pop(key, None)
        return
    raise RangeReadError(f"{key[0]}-{key[1]}: {error}")


def _rounds(ranges: Sequence[PartitionRange]) -> list[list[PartitionRange]]:
    """`ranges` in rounds of one range per topic-partition at most (a consumer is assigned a
    topic-partition once at a time)."""
    rounds: list[list[PartitionRange]] = []
    for r in ranges:
        free = next((found for found in rounds if all(x.tp != r.tp for x in found)), None)
        if free is None:
            rounds.append([r])
        else:
            free.append(r)
    return rounds


def _batch(columns: tuple[list[Any], ...], headers: Mapping[str, str], keys: bool) -> pa.RecordBatch:
    """The columns read as a batch: topic, partition, offset, value, then `key` (with `keys`) and
    for each of `headers` (column -> header key) the value of each record's first header of that
    key (null: none)."""
    topics, partitions, offsets, values, record_keys, headed = columns
    arrays = [
        pa.array(topics, pa.string()),
        pa.array(partitions, pa.int32()),
        pa.array(offsets, pa.int64()),
        binary_array(values),
    ]
    names = ["topic", "partition", "offset", "value"]
    if keys:
        arrays.append(binary_array(record_keys))
        names.append("key")
    wanted = {header: at for at, header in enumerate(headers.values())}
    found: list[list[bytes | None]] = [[None] * len(offsets) for _ in wanted]
    for row, pairs in headed:
        for k, v in reversed(pairs):  # the first header of a key is written last: it wins
            at = wanted.get(k)
            if at is not None:
                found[at][row] = v
    arrays += [pa.array(column, pa.binary()) for column in found]
    names += list(headers)
    return pa.RecordBatch.from_arrays(arrays, names=names)


# Values of at least this many bytes on average are copied into one buffer of their total size.
_LARGE_VALUES = 1024


def binary_array(values: list[bytes | None]) -> pa.Array:
    """`values` (None: null) as a binary array. pa.array's builder grows its data buffer as it
    appends, each growth a new allocation and a copy of what it holds: for a chunk of 10,000
    Kafka Connect JSON values (~3.6 KB each) 7.6 ms with pyarrow's mimalloc and 50 ms with jemalloc
    (the workers' pool, job/session.py: it hands back the pages of a freed buffer, so each growth
    touches fresh ones), against 4.9 and 26 ms copied once into a buffer of their total size.
    Smaller values are cheaper through the builder (0.3 ms against 1.3 for 200-byte values)."""
    n = len(values)
    nulls = values.count(None)
    lengths = np.fromiter((0 if v is None else len(v) for v in values), np.int64, n)
    total = int(lengths.sum())
    if total < _LARGE_VALUES * max(n - nulls, 1) or total >= 2**31:  # 2**31: more than int32 offsets hold
        return pa.array(values, pa.binary())
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:], dtype=np.int32)
    data = pa.allocate_buffer(total)
    view = memoryview(data).cast("B")
    at = 0
    for v in values:
        if v is not None:
            end = at + len(v)
            view[at:end] = v
            at = end
    validity = pa.array([v is not None for v in values], pa.bool_()).buffers()[1] if nulls else None
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), data], null_count=nulls)
