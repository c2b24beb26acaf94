from __future__ import annotations

import pytest

from icesink.errors import OffsetsError
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition as TP
from icesink.model import advance


def test_round_trip_is_deterministic() -> None:
    offsets = {TP("b", 1): 7, TP("a", 10): 0, TP("a", 2): 123456789012}
    text = codec.encode(offsets)
    assert text == '{"a":{"10":0,"2":123456789012},"b":{"1":7}}'
    assert codec.decode(text) == offsets


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"a": {"0": -1}}',
        '{"a": {"x": 1}}',
        '{"a": {"0": "5"}}',
        '{"a": 3}',
        '{"a": {"0": true}}',
    ],
)
def test_malformed_offsets_are_refused_with_the_text(text: str) -> None:
    with pytest.raises(OffsetsError, match=r"cannot decode icesink\.offsets"):
        codec.decode(text)


def test_latest_offsets_walks_past_snapshots_without_offsets() -> None:
    newest_first = [
        {"operation": "replace"},  # a compaction carries no offsets
        {codec.OFFSETS_KEY: codec.encode({TP("t", 0): 50})},
        {codec.OFFSETS_KEY: codec.encode({TP("t", 0): 10})},
    ]
    assert codec.latest_offsets(newest_first) == {TP("t", 0): 50}
    assert codec.latest_offsets([{"operation": "append"}]) == {}


def test_advance_never_moves_backwards_and_keeps_other_partitions() -> None:
    committed = {TP("t", 0): 100, TP("t", 1): 5}
    assert advance(committed, {TP("t", 0): 90, TP("u", 0): 3}) == {
        TP("t", 0): 100,
        TP("t", 1): 5,
        TP("u", 0): 3,
    }


def test_summary_properties_carry_query_and_batch() -> None:
    props = codec.summary_properties({TP("t", 0): 1}, "q-1", 42)
    assert props[codec.QUERY_ID_KEY] == "q-1"
    assert props[codec.BATCH_ID_KEY] == "42"
    assert codec.from_summary(props) == {TP("t", 0): 1}
