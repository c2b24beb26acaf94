"""The exactly-once oracle of the fault-injection tests (and `dev/soak.py`).

A `Ledger` produces records and remembers where each one landed (topic, partition, offset) and
what it should become: a row with a unique `id`, or a dead letter. `check` then compares a table
and the dead-letter table with it, after whatever fault a test injected:
  - the table's ids are exactly the good records' ids, none twice;
  - the dead-letter table holds exactly the poison records' offsets, none twice;
  - the table's newest offsets are the topics' end offsets (every offset is in the table or in
    the dead letters), and Spark's checkpoint does not lag behind the table by more than a batch;
  - every file the table's current snapshot references exists in S3.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from confluent_kafka import Producer
from pyarrow import fs as pafs
from pyspark.sql import SparkSession

from dev.kit.endpoints import KAFKA, S3_ENDPOINT
from dev.kit.kafka import SERDE_CONF, end_offsets, registry_client
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition

AVRO_SCHEMA = {
    "type": "record",
    "name": "Row",
    "namespace": "icesink.test",
    "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}],
}


@dataclass(frozen=True)
class Sent:
    topic: str
    partition: int
    offset: int
    id: int | None  # None: a poison record, expected in the dead-letter table


@dataclass
class Ledger:
    """Produces JSON records {"id": n, "v": ...} (ids unique across the ledger) and poison records,
    and records the offset of each from the delivery report."""

    sent: list[Sent] = field(default_factory=list)
    next_id: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _producer(self) -> Producer:
        return Producer({"bootstrap.servers": KAFKA, "enable.idempotence": True, "linger.ms": 5})

    def _send(self, producer: Producer, topic: str, payload: bytes, rid: int | None, partition: int | None) -> None:
        def delivered(err: Any, msg: Any) -> None:
            assert err is None, f"record {rid} to {topic} not delivered: {err}"
            with self._lock:
                self.sent.append(Sent(msg.topic(), msg.partition(), msg.offset(), rid))

        kwargs: dict[str, Any] = {"key": str(rid).encode(), "value": payload, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                return
            except BufferError:
                producer.poll(0.2)

    def good(self, topic: str, n: int, partition: int | None = None) -> list[int]:
        producer = self._producer()
        ids = []
        for _ in range(n):
            with self._lock:
                rid, self.next_id = self.next_id, self.next_id + 1
            self._send(producer, topic, json.dumps({"id": rid, "v": f"r{rid}"}).encode(), rid, partition)
            ids.append(rid)
        assert producer.flush(120) == 0, f"records to {topic} not delivered"
        return ids

    def good_avro(self, topic: str, n: int) -> list[int]:
        """Like `good`, as Confluent-framed Avro (the schema registered as {topic}-value)."""
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        serialize = AvroSerializer(registry_client(), json.dumps(AVRO_SCHEMA), conf=SERDE_CONF)
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer = self._producer()
        ids = []
        for _ in range(n):
            with self._lock:
                rid, self.next_id = self.next_id, self.next_id + 1
            self._send(producer, topic, serialize({"id": rid, "v": f"r{rid}"}, ctx), rid, None)
            ids.append(rid)
        assert producer.flush(120) == 0, f"records to {topic} not delivered"
        return ids

    def poison(self, topic: str, payloads: Iterable[bytes], partition: int | None = None) -> None:
        producer = self._producer()
        for p in payloads:
            self._send(producer, topic, p, None, partition)
        assert producer.flush(120) == 0, f"records to {topic} not delivered"

    def ids(self, topics: Iterable[str]) -> set[int]:
        wanted = set(topics)
        return {s.id for s in self.sent if s.id is not None and s.topic in wanted}

    def poisoned(self, topics: Iterable[str]) -> set[tuple[str, int, int]]:
        wanted = set(topics)
        return {(s.topic, s.partition, s.offset) for s in self.sent if s.id is None and s.topic in wanted}

    def forget(self, keep: Any) -> None:
        """Drops what `keep(sent)` rejects (records Kafka no longer has: retention, a deleted topic)."""
        self.sent = [s for s in self.sent if keep(s)]


# JSON poison of every kind a JSON topic can carry; each becomes one dead letter.
JSON_POISON: tuple[bytes, ...] = (
    b"not json {",
    b'{"id": 1, "v": ',  # truncated
    b"[1, 2, 3]",  # not an object
    b'"just a string"',
    b"42",
    b"",  # empty value
    b"\xff\xfe\x00garbage",  # not UTF-8
)


def s3_filesystem() -> pafs.S3FileSystem:
    url = urlparse(S3_ENDPOINT)
    return pafs.S3FileSystem(
        endpoint_override=url.netloc,
        scheme=url.scheme,
        access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
        secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
        region=os.environ.get("AWS_REGION", "us-east-1"),
        allow_bucket_creation=False,
    )


def referenced_files(spark: SparkSession, table: str) -> list[str]:
    """Data, delete and manifest files of the current snapshot, and its manifest list."""
    files = [r.file_path for r in spark.sql(f"SELECT file_path FROM {table}.files").collect()]
    files += [r.path for r in spark.sql(f"SELECT path FROM {table}.manifests").collect()]
    current = spark.sql(f"SELECT manifest_list FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    files += [r.manifest_list for r in current]
    return files


def missing_files(spark: SparkSession, table: str) -> list[str]:
    paths = referenced_files(spark, table)
    infos = s3_filesystem().get_file_info([p.split("://", 1)[1] for p in paths])
    return [p for p, info in zip(paths, infos, strict=True) if info.type != pafs.FileType.File]


def data_files_in_storage(spark: SparkSession, table: str) -> set[str]:
    """Every Parquet file under the table's data folder, referenced or not."""
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'").first()
    assert location is not None
    root = location.data_type.split("://", 1)[1].rstrip("/") + "/data"
    listed = s3_filesystem().get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return {f"s3://{i.path}" for i in listed if i.type == pafs.FileType.File and i.path.endswith(".parquet")}


def checkpoint_end_offsets(checkpoint: Path) -> tuple[int, dict[TopicPartition, int], bool]:
    """Spark's newest planned batch: its id, its end offsets, and whether its commit log exists."""
    batches = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    assert batches, f"no batch in {checkpoint}"
    last = batches[-1]
    source = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[-1])
    ends = {TopicPartition(t, int(p)): o for t, parts in source.items() for p, o in parts.items()}
    return last, ends, (checkpoint / "commits" / str(last)).exists()


def check(
    spark: SparkSession,
    ledger: Ledger,
    table: str,
    topics: Sequence[str],
    dead_letters: str | None = None,
    checkpoint: Path | None = None,
    extra_ids: Iterable[int] = (),
) -> None:
    """Asserts the oracle for `table` (fed by `topics`); see the module docstring."""
    spark.sql(f"REFRESH TABLE {table}")
    ids = [r.id for r in spark.sql(f"SELECT id FROM {table}").collect()]
    twice = sorted(i for i, c in Counter(ids).items() if c > 1)
    assert not twice, f"{table}: {len(twice)} id(s) twice, e.g. {twice[:10]}"
    expected = ledger.ids(topics) | set(extra_ids)
    missing, unexpected = sorted(expected - set(ids)), sorted(set(ids) - expected)
    assert not missing, f"{table}: {len(missing)} record(s) lost, e.g. ids {missing[:10]}"
    assert not unexpected, f"{table}: {len(unexpected)} row(s) never produced, e.g. ids {unexpected[:10]}"

    if dead_letters is not None:
        letters = []
        if spark.catalog.tableExists(dead_letters):  # created with the first dead letter
            spark.sql(f"REFRESH TABLE {dead_letters}")
            listed = ", ".join(f"'{t}'" for t in topics)
            query = f"SELECT topic, partition, offset FROM {dead_letters} WHERE topic IN ({listed})"
            letters = [(r.topic, r.partition, r.offset) for r in spark.sql(query).collect()]
        twice_dl = sorted(k for k, c in Counter(letters).items() if c > 1)
        assert not twice_dl, f"dead letters twice: {twice_dl[:10]}"
        assert set(letters) == ledger.poisoned(topics), (
            f"dead letters {sorted(set(letters))[:10]} != poison {sorted(ledger.poisoned(topics))[:10]}"
        )

    query = f"SELECT summary FROM {table}.snapshots ORDER BY committed_at"
    summaries = [r.summary for r in spark.sql(query).collect() if codec.OFFSETS_KEY in r.summary]
    assert summaries, f"{table}: no offset-bearing snapshot"
    held = codec.decode(summaries[-1][codec.OFFSETS_KEY])
    ends = end_offsets(*topics)
    assert {tp: held.get(tp, 0) for tp in ends} == ends, f"{table}: offsets {held} != end offsets {ends}"

    if checkpoint is not None:
        batch, planned, committed = checkpoint_end_offsets(checkpoint)
        spark_ends = {tp: planned.get(tp, 0) for tp in ends}
        # Equal, or the table one batch ahead when the job died between the two commits.
        assert spark_ends == ends or not committed, (
            f"Spark's batch {batch} ends at {spark_ends}, the table at {ends}, and that batch is committed"
        )

    lost = missing_files(spark, table)
    assert not lost, f"{table} references {len(lost)} file(s) that do not exist: {lost[:5]}"
