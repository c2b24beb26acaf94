"""The exactly-once core: the offsets codec and the one rule that reads a table's offsets back
from its snapshots (newest first along the current snapshot's ancestry)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import SimpleNamespace

import pytest

from icesink.errors import OffsetsError
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition as TP
from icesink.model import advance

T0, T1, U0 = TP("t", 0), TP("t", 1), TP("u", 0)


def batch(offsets: Mapping[TP, int], batch_id: int = 1, query: str = "q-1") -> dict[str, str]:
    """The summary of a job's commit."""
    return {"operation": "append", **codec.summary_properties(offsets, query, batch_id)}


COMPACTION = {"operation": "replace", "added-data-files": "1", "deleted-data-files": "4"}
EXPIRY_OR_DELETE = {"operation": "delete"}


def rewind(offsets: Mapping[TP, int]) -> dict[str, str]:
    """The summary of `offsets reset --rewind`'s audit snapshot (pyiceberg.commit_rewind)."""
    return {
        "operation": "append",
        **codec.summary_properties(offsets, "icesink-offsets-reset", -1),
        "icesink.rewind": '{"from": {"t[0]": 90}, "to": {"t[0]": 10}}',
    }


# The codec ---------------------------------------------------------------------------------------


def test_round_trip_is_deterministic() -> None:
    offsets = {TP("b", 1): 7, TP("a", 10): 0, TP("a", 2): 123456789012}
    text = codec.encode(offsets)
    assert text == '{"a":{"10":0,"2":123456789012},"b":{"1":7}}'
    assert codec.decode(text) == offsets
    assert codec.encode({}) == "{}"
    assert codec.decode("{}") == {}


def test_topics_with_dots_and_underscores_round_trip() -> None:
    offsets = {TP("events.2024_01", 0): 5, TP("events.2024_01", 11): 6, TP("dbz.public.users", 3): 0}
    assert codec.decode(codec.encode(offsets)) == offsets


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "",
        "[]",
        '{"a": {"0": -1}}',
        '{"a": {"x": 1}}',
        '{"a": {"0": "5"}}',
        '{"a": {"0": 1.5}}',
        '{"a": {"0": null}}',
        '{"a": 3}',
        '{"a": {"0": true}}',
    ],
)
def test_malformed_offsets_are_refused_with_the_text(text: str) -> None:
    with pytest.raises(OffsetsError, match=r"cannot decode icesink\.offsets"):
        codec.decode(text)


def test_summary_properties_carry_offsets_format_query_and_batch() -> None:
    props = codec.summary_properties({T0: 1}, "q-1", 42)
    assert props == {
        codec.OFFSETS_KEY: '{"t":{"0":1}}',
        codec.FORMAT_KEY: codec.FORMAT_VERSION,
        codec.QUERY_ID_KEY: "q-1",
        codec.BATCH_ID_KEY: "42",
    }
    assert codec.from_summary(props) == {T0: 1}
    assert codec.from_summary(COMPACTION) is None


def test_advance_never_moves_backwards_and_keeps_other_partitions() -> None:
    committed = {T0: 100, T1: 5}
    assert advance(committed, {T0: 90, U0: 3}) == {T0: 100, T1: 5, U0: 3}


# The reader: newest offset-bearing snapshot, newest first ----------------------------------------


def test_the_newest_commit_holds_the_offsets() -> None:
    found = codec.newest_offsets([batch({T0: 50}, 2), batch({T0: 10}, 1)])
    assert found is not None
    assert (found.offsets, found.batch_id, found.query_id) == ({T0: 50}, 2, "q-1")
    assert found.summary == batch({T0: 50}, 2)


def test_compactions_and_other_maintenance_snapshots_are_walked_past() -> None:
    newest_first = [COMPACTION, EXPIRY_OR_DELETE, COMPACTION, batch({T0: 50}, 2), batch({T0: 10}, 1)]
    found = codec.newest_offsets(newest_first)
    assert found is not None
    assert (found.offsets, found.batch_id) == ({T0: 50}, 2)


def test_a_table_without_offsets_has_none() -> None:
    assert codec.newest_offsets([]) is None
    assert codec.newest_offsets([COMPACTION, {"operation": "append"}]) is None


def test_offsets_are_positions_gaps_are_kept_as_they_are() -> None:
    # A transactional topic: the commit markers leave gaps; nothing counts records.
    found = codec.newest_offsets([batch({T0: 1_003, T1: 7}, 2), batch({T0: 501}, 1)])
    assert found is not None
    assert found.offsets == {T0: 1_003, T1: 7}


def test_a_rewind_is_the_newest_offsets_even_though_they_are_lower() -> None:
    found = codec.newest_offsets([rewind({T0: 10, T1: 4}), batch({T0: 90, T1: 4}, 7)])
    assert found is not None
    assert found.offsets == {T0: 10, T1: 4}, "lowered: the job re-ingests from 10"
    assert (found.batch_id, found.query_id) == (-1, "icesink-offsets-reset")
    assert "icesink.rewind" in found.summary


def test_commits_after_a_rewind_win_over_it() -> None:
    newest_first = [batch({T0: 30, T1: 4}, 1, "q-2"), COMPACTION, rewind({T0: 10, T1: 4}), batch({T0: 90, T1: 4}, 7)]
    found = codec.newest_offsets(newest_first)
    assert found is not None
    assert (found.offsets, found.batch_id, found.query_id) == ({T0: 30, T1: 4}, 1, "q-2")


def test_only_the_newest_offset_bearing_snapshot_is_decoded() -> None:
    # Older snapshots are never read: a malformed one below the newest does not matter...
    broken = {codec.OFFSETS_KEY: "not json"}
    found = codec.newest_offsets([COMPACTION, batch({T0: 5}), broken])
    assert found is not None
    assert found.offsets == {T0: 5}
    # ...but a malformed newest one is an error, not "no offsets" (that would replay everything).
    with pytest.raises(OffsetsError):
        codec.newest_offsets([COMPACTION, broken, batch({T0: 5})])


def test_the_walk_stops_at_the_first_offset_bearing_snapshot() -> None:
    walked: list[int] = []

    def ancestry() -> Iterator[dict[str, str]]:
        for i, summary in enumerate([COMPACTION, batch({T0: 5}), batch({T0: 1})]):
            walked.append(i)
            yield summary

    assert codec.newest_offsets(ancestry()) is not None
    assert walked == [0, 1]


def test_callers_pass_their_own_snapshots_and_get_them_back() -> None:
    snapshots = [
        SimpleNamespace(id=3, props=COMPACTION),
        SimpleNamespace(id=2, props=batch({T0: 50}, 2)),
        SimpleNamespace(id=1, props=batch({T0: 10}, 1)),
    ]
    found = codec.newest_offsets(snapshots, lambda s: s.props)
    assert found is not None
    assert found.snapshot is snapshots[1]
    assert found.offsets == {T0: 50}


def test_a_summary_without_a_batch_id_has_none() -> None:
    found = codec.newest_offsets([{codec.OFFSETS_KEY: codec.encode({T0: 1})}])
    assert found is not None
    assert (found.batch_id, found.query_id) == (None, None)


# Recognising our own commit after an unclear outcome ---------------------------------------------


def test_our_commit_is_recognised_by_query_batch_and_offsets() -> None:
    ours = batch({T0: 10, T1: 4}, 7, "q1")
    assert codec.is_our_commit(ours, "q1", 7, {T0: 10, T1: 4})
    assert not codec.is_our_commit(ours, "q2", 7, {T0: 10, T1: 4}), "another query (a zombie)"
    assert not codec.is_our_commit(ours, "q1", 8, {T0: 10, T1: 4}), "another batch"
    assert not codec.is_our_commit(ours, "q1", 7, {T0: 11, T1: 4}), "other offsets"
    assert not codec.is_our_commit(ours, "q1", 7, {T0: 10}), "fewer topic-partitions"
    assert not codec.is_our_commit(rewind({T0: 10, T1: 4}), "q1", 7, {T0: 10, T1: 4}), "a rewind"
    assert not codec.is_our_commit(COMPACTION, "q1", 7, {})
    assert not codec.is_our_commit(None, "q1", 7, {})
