"""`python -m dev.bench.read [--records N] [--repeat R] [--value-bytes B]`: how fast a one-pass
task reads a range from Kafka (kafka/reader.py's RangeReader: librdkafka, and one Python loop over
its messages), against librdkafka's consume() alone on the same range (the floor: the messages
fetched and made Python objects, nothing kept).

Needs the local stack (`eval "$(dev/stack env)"`). Produces a fresh one-partition topic of N
records (B-byte values, 8-byte keys), then reads its whole range R times each way in this process,
warm (the first read of each way is left out: the connection and the topic's metadata); prints
the median seconds and records/s, with and without the keys.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, TopicPartition

from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics
from icesink.batch.direct_avro import header_columns
from icesink.kafka import reader
from icesink.model import PartitionRange
from icesink.model import TopicPartition as Tp

SETTINGS = {
    "bootstrap.servers": KAFKA,
    "group.id": "icesink-bench-read",
    "enable.auto.commit": "false",
    "enable.auto.offset.store": "false",
    "isolation.level": "read_committed",
    "auto.offset.reset": "error",
    "enable.partition.eof": "true",
    "fetch.wait.max.ms": "10",
    "fetch.queue.backoff.ms": "10",
    "queued.max.messages.kbytes": "8192",
}


def produce(topic: str, records: int, value_bytes: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": KAFKA, "linger.ms": 50, "batch.size": 1_000_000})
    value = b"x" * value_bytes
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, key=i.to_bytes(8, "big"), partition=0)
                break
            except BufferError:
                p.poll(0.1)
    p.flush()


def by_reader(r: PartitionRange, keys: bool, headers: dict[str, str] | None = None) -> Callable[[], int]:
    rr = reader.RangeReader(SETTINGS)
    return lambda: sum(b.num_rows for b in rr.batches([r], headers, keys))


def by_consume(r: PartitionRange) -> Callable[[], int]:
    consumer = Consumer(SETTINGS)

    def read() -> int:
        consumer.assign([TopicPartition(r.tp.topic, r.tp.partition, r.first_offset)])
        n = 0
        while n < r.records:
            n += len([m for m in consumer.consume(10_000, timeout=1.0) if m.error() is None])
        consumer.unassign()
        return n

    return read


def timed(read: Callable[[], int], repeat: int) -> float:
    read()  # warm: the connection, the topic's metadata
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dev.bench.read", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=150_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--value-bytes", type=int, default=200)
    args = parser.parse_args()
    topic = f"bench_read_{uuid.uuid4().hex[:6]}"
    create_topics(topic, partitions=1)
    produce(topic, args.records, args.value_bytes)
    r = PartitionRange(Tp(topic, 0), 0, args.records - 1, args.records)
    ways = {
        "consume() alone (floor)": by_consume(r),
        "RangeReader": by_reader(r, keys=False),
        "RangeReader, with keys": by_reader(r, keys=True),
        # What an Avro table of Avro keys reads: the values' and keys' schema-id headers too.
        "RangeReader, keys, headers": by_reader(r, keys=True, headers=header_columns(True, True)),
    }
    print(f"{args.records:,} records of {args.value_bytes} B, one partition; median of {args.repeat} warm reads")
    floor = None
    for name, read in ways.items():
        s = timed(read, args.repeat)
        floor = floor or s
        print(f"  {name:<26} {s:.3f} s  {args.records / s:>12,.0f} records/s  {s / floor:.2f}x the floor")


if __name__ == "__main__":
    main()
