"""The one-pass job's own Kafka reads (kafka/reader.py): how ranges are shared among tasks, when
librdkafka cannot read them (Spark's source does), and the Arrow arrays its records become."""

from __future__ import annotations

from typing import Any

import pytest

from icesink.config import parse_config
from icesink.kafka import reader
from icesink.model import PartitionRange
from icesink.model import TopicPartition as TP


def r(topic: str, p: int, first: int, last: int) -> PartitionRange:
    return PartitionRange(TP(topic, p), first, last, last - first + 1)


def offsets(shares: list[list[PartitionRange]]) -> list[set[tuple[str, int, int]]]:
    """Each share's (topic-partition, offset) pairs, offsets spelled out."""
    return [
        {(p.tp.topic, p.tp.partition, o) for p in s for o in range(p.first_offset, p.last_offset + 1)} for s in shares
    ]


def test_shares_cover_every_offset_once_and_about_evenly() -> None:
    ranges = [r("a", 0, 10, 109), r("a", 1, 0, 9), r("b", 0, 5, 54)]
    for tasks in (1, 2, 3, 8):
        shares = reader.split(ranges, tasks)
        assert 1 <= len(shares) <= tasks
        found = offsets(shares)
        every = offsets([ranges])[0]
        assert set().union(*found) == every, "no offset left out"
        assert sum(len(s) for s in found) == len(every), "none read twice"
        sizes = [sum(p.records for p in s) for s in shares]
        assert max(sizes) <= -(-160 // len(shares)) + 10, sizes


def test_one_long_range_is_cut_in_consecutive_pieces_for_the_cores() -> None:
    shares = reader.split([r("a", 0, 100, 399)], 2)
    assert shares == [[r("a", 0, 100, 249)], [r("a", 0, 250, 399)]]


def test_whole_topic_partitions_are_never_cut() -> None:
    """A table of changes reduces each key in one task: each topic-partition stays in one share."""
    ranges = [r("a", 0, 100, 399), r("a", 1, 0, 9), r("b", 0, 0, 99)]
    shares = reader.split(ranges, 2, whole=True)
    assert len(shares) == 2
    assert sorted(map(str, (p for share in shares for p in share))) == sorted(map(str, ranges))
    assert [r("a", 0, 100, 399)] in shares, "the long one alone, whole"


def test_nothing_to_read_makes_no_share() -> None:
    assert reader.split([], 2) == []


def config(**options: str) -> Any:
    raw = {
        "job": {"checkpoint_location": "/tmp/cp"},
        "kafka": {"bootstrap_servers": "k:9092", "subscribe_pattern": "a.*", "options": options},
        "catalog": {"uri": "http://c"},
        "tables": {"namespace": "ns"},
    }
    return parse_config(raw, environ={})


def test_librdkafka_reads_with_the_jobs_settings_and_never_commits() -> None:
    found = reader.settings(config(**{"kafka.security.protocol": "PLAINTEXT", "kafka.client.id": "me"}))
    assert found is not None
    assert found["bootstrap.servers"] == "k:9092"
    assert found["security.protocol"] == "PLAINTEXT"
    assert found["isolation.level"] == "read_committed"
    assert found["enable.auto.commit"] == "false"
    assert found["auto.offset.reset"] == "error", "an offset out of range is an error, never a jump"


def test_options_librdkafka_does_not_take_leave_the_reads_to_sparks_source() -> None:
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username='u' password='p';"
    assert reader.settings(config(**{"kafka.sasl.jaas.config": jaas})) is None
    assert reader.settings(config(**{"kafka.ssl.truststore.location": "/etc/truststore.jks"})) is None


def test_a_consumer_takes_two_pieces_of_one_partition_one_after_the_other() -> None:
    found = reader._rounds([r("a", 0, 0, 9), r("a", 1, 0, 9), r("a", 0, 20, 29)])
    assert found == [[r("a", 0, 0, 9), r("a", 1, 0, 9)], [r("a", 0, 20, 29)]]


def test_values_become_the_binary_array_arrows_builder_makes_large_or_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """reader.binary_array, copying values into one buffer or through pa.array's builder (each way
    forced, then by the values' size): the array pa.array makes, with its nulls (tombstones), empty
    values, and a slice of it."""
    import random

    import pyarrow as pa

    rng = random.Random(7)
    cases: list[list[bytes | None]] = [[], [None, None], [b"", b"abc", None], [b"x" * 5000] * 3, [b"y" * 1024] * 4]
    for _ in range(100):
        size = rng.choice([10, 500, 3600])
        cases.append(
            [None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 2 * size)) for _ in range(rng.randint(1, 60))]
        )
    for threshold in (0, 2**40, reader._LARGE_VALUES):
        monkeypatch.setattr(reader, "_LARGE_VALUES", threshold)
        for values in cases:
            got = reader.binary_array(values)
            got.validate(full=True)
            assert got.equals(pa.array(values, pa.binary())), (threshold, values[:3])
            assert got.null_count == values.count(None)
            assert got.slice(1).to_pylist() == values[1:]


def test_a_batch_holds_the_first_header_of_each_key_asked_for_and_null_where_there_is_none() -> None:
    """As Spark's path takes the schema-id header (batch/decode/avro.py): the first of its key."""
    headed = [
        (0, [("__value_schema_id", b"\x00\x00\x00\x00\x07"), ("__value_schema_id", b"\x00\x00\x00\x00\x09")]),
        (2, [("traceparent", b"t"), ("__key_schema_id", b"\x00\x00\x00\x00\x08"), ("__value_schema_id", None)]),
        (1, [("__key_schema_id", None), ("__key_schema_id", b"\x00\x00\x00\x00\x08")]),  # the first: null
    ]
    columns = (["t"] * 3, [0] * 3, [5, 6, 7], [b"a", b"b", b"c"], [b"k", None, b"m"], headed)
    batch = reader._batch(columns, {"v": "__value_schema_id", "k": "__key_schema_id"}, keys=True)
    assert batch.schema.names == ["topic", "partition", "offset", "value", "key", "v", "k"]
    assert batch.column("v").to_pylist() == [b"\x00\x00\x00\x00\x07", None, None]
    assert batch.column("k").to_pylist() == [None, None, b"\x00\x00\x00\x00\x08"]
    plain = reader._batch(columns, {}, keys=False)
    assert plain.schema.names == ["topic", "partition", "offset", "value"]


class _Message:
    def __init__(self, topic: str, partition: int, offset: int, headers: list[tuple[str, bytes]] | None) -> None:
        self._at, self._headers = (topic, partition, offset), headers

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._at[0]

    def partition(self) -> int:
        return self._at[1]

    def offset(self) -> int:
        return self._at[2]

    def value(self) -> bytes:
        return b"v%d" % self._at[2]

    def key(self) -> bytes:
        return b"k"

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers


def test_headers_stay_with_their_record_when_others_are_skipped_out_of_range() -> None:
    """A message past its range's end is skipped: the headers of those kept are at their rows."""
    h = [("__value_schema_id", b"\x00\x00\x00\x00\x07")]
    messages = [_Message("a", 0, 5, None), _Message("b", 0, 9, h), _Message("a", 0, 6, h), _Message("a", 0, 7, h),
                _Message("a", 0, 8, None)]  # fmt: skip
    nexts, ends = {("a", 0): 5, ("b", 0): 3}, {("a", 0): 7, ("b", 0): 3}
    columns: tuple[list[Any], ...] = ([], [], [], [], [], [])
    reader._take(messages, nexts, ends, columns, True, keys=True)
    batch = reader._batch(columns, {"v": "__value_schema_id"}, keys=True)
    assert batch.column("offset").to_pylist() == [5, 6, 7]
    assert batch.column("v").to_pylist() == [None, h[0][1], h[0][1]]
    assert ends == {}, "both ranges done: b's message was past its end, a's last offset was read"
