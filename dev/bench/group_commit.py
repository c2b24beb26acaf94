"""`python -m dev.bench.group_commit`: what committing the job's progress to a consumer group costs
per batch, a client per batch (icesink before GroupProgress) against one client kept for the job
(`icesink.kafka.admin.GroupProgress`), on the local broker. Medians of N commits, alternated twice."""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTP

from dev.kit.endpoints import KAFKA
from dev.kit.kafka import create_topics
from icesink.config import parse_config
from icesink.kafka.admin import GroupProgress, client_config
from icesink.model import TopicPartition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=30, help="commits per measurement")
    args = parser.parse_args()
    topic = f"bench_group_{uuid.uuid4().hex[:6]}"
    create_topics(topic, partitions=2)
    config = parse_config(
        {
            "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": topic},
            "job": {"checkpoint_location": "/tmp/unused"},
            "catalog": {"uri": "http://unused"},
            "s3": {"endpoint": "http://unused"},
        }
    )
    group = f"bench-{uuid.uuid4().hex[:6]}"

    def per_batch(i: int) -> None:
        consumer = Consumer(client_config(config, **{"group.id": group, "enable.auto.commit": "false"}))
        try:
            consumer.commit(offsets=[KafkaTP(topic, p, i) for p in range(2)], asynchronous=False)
        finally:
            consumer.close()

    progress = GroupProgress(config, group)

    def kept(i: int) -> None:
        progress.commit({TopicPartition(topic, p): i for p in range(2)})

    ways: list[tuple[str, Callable[[int], None]]] = [("client per batch", per_batch), ("one client", kept)]
    try:
        for name, commit in ways * 2:
            times = []
            for i in range(1, args.commits + 1):
                start = time.perf_counter()
                commit(i)
                times.append(time.perf_counter() - start)
            print(f"{name:18s} median {statistics.median(times) * 1000:6.1f} ms  max {max(times) * 1000:6.1f} ms")
    finally:
        progress.close()


if __name__ == "__main__":
    main()
