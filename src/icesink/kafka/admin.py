"""Kafka's side of the offsets: earliest and end offsets per topic-partition, and committing the
job's progress to a consumer group, through confluent-kafka (no Spark)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from icesink.config import Config
from icesink.errors import KafkaUnavailableError, TopicNotFoundError
from icesink.model import TopicPartition


def client_config(config: Config, **extra: str) -> dict[str, Any]:
    """librdkafka settings: the bootstrap servers and the job's `kafka.*` source options."""
    out: dict[str, Any] = {"bootstrap.servers": config.kafka.bootstrap_servers}
    for k, v in config.kafka.options.items():
        if k.startswith("kafka."):
            out[k[len("kafka.") :]] = v
    out.update(extra)
    return out


def watermarks(
    config: Config, tps: Iterable[TopicPartition], timeout_s: float = 10
) -> dict[TopicPartition, tuple[int, int]]:
    """(earliest, end) offset of each topic-partition; a topic that is gone is left out."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer(client_config(config, **{"group.id": "icesink-offsets-probe", "enable.auto.commit": "false"}))
    out = {}
    try:
        topics = consumer.list_topics(timeout=timeout_s).topics
        for tp in tps:
            meta = topics.get(tp.topic)
            if meta is None or tp.partition not in meta.partitions:
                continue
            low, high = consumer.get_watermark_offsets(KafkaTP(tp.topic, tp.partition), timeout=timeout_s)
            out[tp] = (low, high)
    except KafkaException as e:
        raise KafkaUnavailableError(
            f"cannot read offsets from Kafka at {config.kafka.bootstrap_servers}: {e}"
        ) from None
    finally:
        consumer.close()
    return out


class GroupProgress:
    """Commits the job's progress (next offsets to read) to a consumer group, so Kafka's lag tools
    see the job. One client for the job's life: a client per batch paid its connection set-up and
    group coordinator lookup every batch. A client whose commit failed is dropped and made anew."""

    def __init__(self, config: Config, group: str) -> None:
        self._config = config
        self.group = group
        self._consumer: Any = None

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTP

        if self._consumer is None:
            settings = client_config(self._config, **{"group.id": self.group, "enable.auto.commit": "false"})
            self._consumer = Consumer(settings)
        try:
            self._consumer.commit(
                offsets=[KafkaTP(tp.topic, tp.partition, o) for tp, o in offsets.items()], asynchronous=False
            )
        except Exception:
            self.close()
            raise

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


def subscribed(
    config: Config, topics: Iterable[str] | None = None, timeout_s: float = 10
) -> dict[TopicPartition, tuple[int, int]]:
    """(earliest, end) of every partition of the topics the job's pattern subscribes to (only
    `topics` if given)."""
    import re

    from confluent_kafka import Consumer, KafkaException

    pattern = re.compile(config.kafka.subscribe_pattern)
    consumer = Consumer(client_config(config, **{"group.id": "icesink-offsets-probe", "enable.auto.commit": "false"}))
    try:
        meta = consumer.list_topics(timeout=timeout_s).topics
    except KafkaException as e:
        raise KafkaUnavailableError(f"cannot list topics at {config.kafka.bootstrap_servers}: {e}") from None
    finally:
        consumer.close()
    wanted = set(topics) if topics else None
    tps = [
        TopicPartition(name, p)
        for name, t in meta.items()
        if pattern.search(name) and not name.startswith("__") and (wanted is None or name in wanted)
        for p in t.partitions
    ]
    if wanted:
        unknown = sorted(wanted - {tp.topic for tp in tps})
        if unknown:
            raise TopicNotFoundError(
                f"no topic {', '.join(unknown)} matching kafka.subscribe_pattern {pattern.pattern!r}"
            )
    return watermarks(config, tps, timeout_s)


def offsets_for_time(
    config: Config, tps: Iterable[TopicPartition], ts_ms: int, timeout_s: float = 10
) -> dict[TopicPartition, int]:
    """The first offset at or after `ts_ms` per topic-partition (left out: none that late)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTP

    consumer = Consumer(client_config(config, **{"group.id": "icesink-offsets-probe", "enable.auto.commit": "false"}))
    try:
        found = consumer.offsets_for_times([KafkaTP(tp.topic, tp.partition, ts_ms) for tp in tps], timeout=timeout_s)
    finally:
        consumer.close()
    return {TopicPartition(f.topic, f.partition): f.offset for f in found if f.offset >= 0}
