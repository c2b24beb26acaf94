"""Test-side helpers: a Kafka producer and admin, job configs, running the job, reading tables."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTP
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
from pyspark.sql import SparkSession

from icesink.config import Config, parse_config
from icesink.model import TopicPartition
from tests.conftest import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT

REPO = Path(__file__).resolve().parents[2]
CATALOG = "icesink"


@dataclass
class Scenario:
    """One test's private topics, namespace and checkpoint, so tests never see each other's data."""

    prefix: str
    namespace: str
    checkpoint: Path

    @classmethod
    def new(cls, tmp_path: Path) -> Scenario:
        tag = uuid.uuid4().hex[:8]
        return cls(prefix=f"it{tag}", namespace=f"it_{tag}", checkpoint=tmp_path / "checkpoint")

    def topic(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    @property
    def pattern(self) -> str:
        return re.escape(self.prefix) + "_.*"

    def table(self, name: str) -> str:
        """The table of topics `topic(name)` (with the daily suffix stripped from `name`)."""
        return f"{CATALOG}.{self.namespace}.{self.prefix}_{name}"

    def raw_config(self, **overrides: Any) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "job": {
                "name": f"test-{self.prefix}",
                "checkpoint_location": str(self.checkpoint),
                "trigger": {"mode": "available-now"},
            },
            "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": self.pattern},
            "catalog": {"name": CATALOG, "uri": CATALOG_URI},
            "s3": {"endpoint": S3_ENDPOINT},
            "tables": {"namespace": self.namespace},
            "spark": {
                "master": "local[2]",
                "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
            },
        }
        for path, value in overrides.items():
            node = raw
            *parents, leaf = path.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        return raw

    def config(self, **overrides: Any) -> Config:
        return parse_config(self.raw_config(**overrides), environ={})

    def write_config(self, path: Path, **overrides: Any) -> Path:
        path.write_text(yaml.safe_dump(self.raw_config(**overrides)))
        return path


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


def snapshots(spark: SparkSession, table: str) -> list[dict[str, Any]]:
    """The table's snapshots, oldest first, with their summaries."""
    rows = spark.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {table}.snapshots ORDER BY committed_at"
    ).collect()
    return [r.asDict() for r in rows]


def table_exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def run_cli(
    config_path: Path, env: Mapping[str, str] | None = None, timeout: int = 300
) -> subprocess.CompletedProcess[str]:
    """`icesink run` in its own process (and its own Spark driver), as a user runs it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "icesink", "run", "--config", str(config_path)],
        env=full_env, capture_output=True, text=True, timeout=timeout, cwd=REPO,
    )  # fmt: skip


def start_cli(config_path: Path, log_path: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """`icesink run` started in the background; its output goes to `log_path`."""
    out = log_path.open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "icesink", "run", "--config", str(config_path)],
        env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT, text=True, cwd=REPO,
    )  # fmt: skip


def stack(*args: str) -> None:
    """`scripts/stack ...` (stop or start one service)."""
    subprocess.run([str(REPO / "scripts" / "stack"), *args], check=True, timeout=300, capture_output=True)
