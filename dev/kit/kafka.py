"""Kafka and schema-registry clients of the local stack: topics, producers, end offsets."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy

from dev.kit.endpoints import KAFKA, REGISTRY_URL
from icesink.model import TopicPartition


def registry_client() -> SchemaRegistryClient:
    """The test producers' registry client. A timeout, so a lost response is retried instead of
    hanging the run (the client has none by default)."""
    return SchemaRegistryClient({"url": REGISTRY_URL, "timeout": 10})


# The subject is {topic}-value, as producers have it; confluent-kafka 2.16's default strategy
# first asks the registry for associations, an API Apicurio does not have.
SERDE_CONF = {"subject.name.strategy": topic_subject_name_strategy}


def create_topics(*topics: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": KAFKA})
    futures = admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics])
    for f in futures.values():
        f.result(timeout=30)


def produce(topic: str, values: Iterable[bytes | str | Mapping[str, Any] | None], partition: int | None = None) -> None:
    producer = Producer({"bootstrap.servers": KAFKA, "enable.idempotence": True})
    for i, v in enumerate(values):
        if isinstance(v, Mapping):
            payload: bytes | None = json.dumps(v).encode()
        elif isinstance(v, str):
            payload = v.encode()
        else:
            payload = v
        kwargs: dict[str, Any] = {"key": str(i).encode(), "value": payload}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(topic, **kwargs)
    assert producer.flush(30) == 0, f"records to {topic} not delivered"


def produce_keyed(topic: str, records: Iterable[tuple[bytes | None, bytes | None, int]]) -> None:
    """(key, value, partition) records, in order; a None value is a tombstone."""
    producer = Producer({"bootstrap.servers": KAFKA, "enable.idempotence": True, "linger.ms": 20})
    for key, value, partition in records:
        while True:
            try:
                producer.produce(topic, key=key, value=value, partition=partition)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.5)
    assert producer.flush(60) == 0, f"records to {topic} not delivered"


def end_offsets(*topics: str) -> dict[TopicPartition, int]:
    consumer = Consumer({"bootstrap.servers": KAFKA, "group.id": f"probe-{uuid.uuid4().hex}"})
    try:
        out = {}
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            for p in meta.partitions:
                _, high = consumer.get_watermark_offsets(KafkaTP(topic, p), timeout=10)
                out[TopicPartition(topic, p)] = high
        return out
    finally:
        consumer.close()
