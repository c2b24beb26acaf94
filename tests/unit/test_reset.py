"""Planning an offsets reset (`ops.reset`): starts, rewinds, skips, and what a reset of some topics or tables leaves."""

from __future__ import annotations

import json

from icesink.model import TableRef
from icesink.model import TopicPartition as TP
from icesink.ops.reset import (
    Mode,
    complete,
    only_tables,
    parse_spark_json,
    plan_reset,
    refuse_rewinds,
    start_lines,
    with_others_from_tables,
)

A, B, DLQ = TableRef("ns", "a"), TableRef("ns", "b"), TableRef("ns", "dead_letters")
MARKS = {TP("t", 0): (0, 100), TP("t", 1): (50, 80), TP("new", 0): (0, 7)}


def test_from_tables_takes_the_lowest_offset_any_table_needs() -> None:
    plan = plan_reset(Mode.FROM_TABLES, {A: {TP("t", 0): 40, TP("t", 1): 70}, B: {TP("t", 0): 30}, DLQ: {}}, MARKS)
    assert plan.starting == {TP("t", 0): 30, TP("t", 1): 70, TP("new", 0): 0}
    assert plan.rewinds == ()
    assert json.loads(plan.spark_json()) == {"new": {"0": 0}, "t": {"0": 30, "1": 70}}


def test_a_start_from_the_tables_puts_partitions_no_table_holds_at_the_fallback() -> None:
    tables = {A: {TP("t", 0): 40}, DLQ: {TP("t", 1): 60}}
    plan = plan_reset(Mode.FROM_TABLES, tables, MARKS, unseen=Mode.LATEST)
    assert plan.starting == {TP("t", 0): 40, TP("t", 1): 60, TP("new", 0): 7}
    assert start_lines(plan, tables, Mode.LATEST) == [
        "topic new: 1 at latest (no table holds them)",
        "topic t: 2 partition(s) from the tables (0@40, 1@60)",
    ]
    early = plan_reset(Mode.FROM_TABLES, tables, MARKS)
    assert early.starting[TP("new", 0)] == 0
    assert start_lines(early, {}, Mode.EARLIEST)[1] == "topic t: 2 at earliest (no table holds them)"


def test_from_tables_clamps_to_what_retention_kept_and_says_so() -> None:
    plan = plan_reset(Mode.FROM_TABLES, {A: {TP("t", 1): 20}}, MARKS)
    assert plan.starting[TP("t", 1)] == 50
    (note,) = plan.notes
    assert note.startswith("t[1]: the tables need offset 20 but Kafka starts at 50; 30 record(s) were removed")


def test_moving_back_is_a_rewind_forward_a_skip() -> None:
    tables = {A: {TP("t", 0): 40}}
    back = plan_reset(Mode.EARLIEST, tables, MARKS)
    assert [(r.table, r.tp, r.held, r.target) for r in back.rewinds] == [(A, TP("t", 0), 40, 0)]
    message = refuse_rewinds(back)
    assert message is not None
    assert "ns.a t[0]: holds up to 40, reset to 0" in message
    assert back.lowered(A, tables[A]) == {TP("t", 0): 0}
    ahead = plan_reset(Mode.LATEST, tables, MARKS)
    assert ahead.rewinds == ()
    assert [(k.tp, k.records) for k in ahead.skips] == [(TP("t", 0), 60)]
    assert refuse_rewinds(ahead) is None


def test_timestamps_fall_back_to_the_end() -> None:
    plan = plan_reset(Mode.TIMESTAMP, {}, MARKS, {TP("t", 0): 12})
    assert plan.starting == {TP("t", 0): 12, TP("t", 1): 80, TP("new", 0): 7}


def test_saved_offsets_are_completed_for_the_partitions_spark_is_assigned() -> None:
    saved = parse_spark_json('{"t": {"0": 30, "1": 70}, "gone": {"0": 5}}')
    assert complete(saved, [TP("t", 0), TP("t", 1), TP("t", 2)]) == {TP("t", 0): 30, TP("t", 1): 70, TP("t", 2): -2}


def test_topics_not_asked_for_restart_where_the_tables_are() -> None:
    tables = {A: {TP("t", 0): 40, TP("t", 1): 60}, B: {TP("new", 0): 3}}
    asked = {tp: m for tp, m in MARKS.items() if tp.topic == "t"}
    plan = plan_reset(Mode.EARLIEST, tables, asked)
    whole = with_others_from_tables(plan, tables, {TP("new", 0): MARKS[TP("new", 0)]})
    assert whole.mode is Mode.EARLIEST
    assert whole.starting == {TP("t", 0): 0, TP("t", 1): 50, TP("new", 0): 3}
    assert whole.rewinds == plan.rewinds


def test_table_names_limit_the_rewinds_not_the_starts() -> None:
    tables = {A: {TP("t", 0): 40}, B: {TP("t", 0): 20}}
    plan = plan_reset(Mode.EARLIEST, tables, MARKS)
    mine = only_tables(plan, {"b"})
    assert [r.table for r in mine.rewinds] == [B]
    assert mine.starting == plan.starting


def test_from_tables_warns_when_a_table_is_ahead_of_kafkas_log() -> None:
    plan = plan_reset(Mode.FROM_TABLES, {A: {TP("new", 0): 60}}, MARKS)
    assert plan.starting[TP("new", 0)] == 7
    (note,) = plan.notes
    assert note.startswith("new[0]: a table holds offset 60 but Kafka's log ends at 7: the topic was deleted")
    assert "--topic new --to-earliest --rewind" in note
