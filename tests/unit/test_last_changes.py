"""The executor-side reduction of a task's changes to the last change per key (pure pyarrow)."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pyarrow as pa

from icesink.tasks.last_changes import last_per_key, not_older, not_older_than_held, order_values

NAMES = ["op", "o_ts", "o_topic", "o_part", "o_offset", "id", "region", "v"]
TYPES = [pa.string(), pa.int64(), pa.string(), pa.int32(), pa.int64(), pa.int64(), pa.string(), pa.string()]
KEYS, ORDER = [5, 6], [1, 2, 3, 4]


def table(rows: list[tuple[Any, ...]], chunks: int = 1) -> pa.Table:
    """`rows` as an Arrow table (in `chunks` record batches, as a task receives them)."""
    size = max(1, -(-len(rows) // chunks))
    parts = [rows[i : i + size] for i in range(0, len(rows), size)]
    batches = [
        pa.RecordBatch.from_arrays([pa.array(c, t) for c, t in zip(zip(*p, strict=True), TYPES, strict=True)], NAMES)
        for p in parts
    ]
    return pa.Table.from_batches(batches)


def oracle(rows: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    """Per key, the greatest change by the order columns, a null smaller than any value (what
    Spark's max_by over the same struct picks)."""

    def order(r: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((v is not None, v if v is not None else 0) for v in (r[i] for i in ORDER))

    best: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in rows:
        k = tuple(r[i] for i in KEYS)
        if k not in best or order(r) > order(best[k]):
            best[k] = r
    return set(best.values())


def test_the_last_change_by_offset_wins_and_keys_are_composite() -> None:
    rows = [
        ("I", None, "t", 0, 0, 1, "eu", "a"),
        ("U", None, "t", 0, 1, 1, "eu", "b"),
        ("I", None, "t", 0, 2, 1, "us", "c"),  # another key: same id, another region
        ("D", None, "t", 0, 3, 1, "eu", None),
        ("U", None, "t", 1, 0, 1, "us", "d"),  # a later partition sorts after an earlier one
    ]
    got = last_per_key(table(rows), KEYS, ORDER).to_pylist()
    assert [(r["id"], r["region"], r["op"], r["v"]) for r in got] == [(1, "eu", "D", None), (1, "us", "U", "d")]


def test_the_order_column_wins_over_offsets_and_a_null_order_is_the_smallest() -> None:
    rows = [
        ("U", 5, "t", 0, 0, 1, "eu", "newest by ts"),
        ("U", 3, "t", 0, 1, 1, "eu", "newest by offset"),
        ("U", None, "t", 0, 2, 1, "eu", "no ts"),
        ("U", None, "t", 0, 0, 2, "eu", "no ts, first"),
        ("U", None, "t", 0, 1, 2, "eu", "no ts, last"),
        ("U", 7, "t.20240102", 0, 0, 3, "eu", "later topic"),
        ("U", 7, "t.20240101", 0, 9, 3, "eu", "earlier topic"),
    ]
    got = {r["id"]: r["v"] for r in last_per_key(table(rows), KEYS, ORDER).to_pylist()}
    assert got == {1: "newest by ts", 2: "no ts, last", 3: "later topic"}


def test_null_keys_are_one_key() -> None:
    rows = [("U", None, "t", 0, i, None, None, str(i)) for i in range(3)] + [("U", None, "t", 0, 3, 4, None, "x")]
    got = last_per_key(table(rows), KEYS, ORDER).to_pylist()
    assert [(r["id"], r["v"]) for r in got] == [(None, "2"), (4, "x")]


def test_random_changes_in_several_batches_match_the_oracle() -> None:
    rng = random.Random(3)
    for case in range(30):
        rows = [
            (
                rng.choice("IUD"),
                rng.choice([None, *range(5)]),
                rng.choice(["a", "b"]),
                rng.randrange(2),
                i,
                rng.randrange(20),
                rng.choice(["eu", "us", None]),
                f"v{i}",
            )
            for i in range(rng.randrange(0, 200))
        ]
        rng.shuffle(rows)  # a shuffle hands a task its rows in no particular order
        if not rows:
            continue
        got = last_per_key(table(rows, chunks=rng.randrange(1, 4)), KEYS, ORDER)
        want = oracle(rows)
        assert {tuple(r.values()) for r in got.to_pylist()} == want, case
        assert got.num_rows == len(want), case


def test_a_change_older_than_the_held_row_is_skipped_and_no_order_says_nothing() -> None:
    rows = pa.table(
        {
            "ts": pa.array([5, 3, None, 4, 6], pa.int64()),
            "held": pa.array([6, None, 2, 4, 5], pa.int64()),
            "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        }
    )
    # Key 1 (5 < 6) is older than the table's row; key 4 is as new (kept, like Spark's >=).
    assert not_older(rows, 0, 1).column("id").to_pylist() == [2, 3, 4, 5]
    newer = rows.filter(pa.array([False, True, True, True, True]))
    assert not_older(newer, 0, 1) is newer  # nothing to skip: the same table


def test_the_rows_held_apart_drop_what_a_join_with_them_drops() -> None:
    """The one-pass second round's comparison (batch/direct_held.py) against Spark's path's: the
    held rows joined to every change by key, then `not_older`. Random keys of two columns (a long
    and a string the driver may read as a large string), order values with nulls, held rows with
    nulls and keys the batch lacks."""
    rng = random.Random(5)
    for case in range(200):
        n = rng.randint(1, 60)
        ids = [rng.randint(0, 9) for _ in range(n)]
        names = [rng.choice(["a", "b", None]) for _ in range(n)]
        order = [rng.choice([None, *range(20)]) for _ in range(n)]
        rows = pa.table(
            {
                "o": pa.array(order, pa.int64()),
                "id": pa.array(ids, pa.int64()),
                "name": pa.array(names, pa.string()),
                "n": range(n),
            }
        )
        held_keys = {(rng.randint(0, 12), rng.choice(["a", "b", "c"])) for _ in range(rng.randint(0, 15))}
        held = {k: rng.choice([None, *range(25)]) for k in held_keys}
        held_table = pa.table(
            {
                "id": pa.array([k[0] for k in held], pa.int64()),
                "name": pa.array([k[1] for k in held], pa.large_string()),
                "h": pa.array(list(held.values()), pa.int64()),
            }
        )
        joined = rows.append_column(
            "held", pa.array([held.get((i, s)) for i, s in zip(ids, names, strict=True)], pa.int64())
        )
        want = not_older(joined, 0, 4).column("n").to_pylist()
        got = not_older_than_held(rows, [1, 2], 0, held_table)
        assert got.column("n").to_pylist() == want, case
        assert got.schema == rows.schema


def test_timestamps_are_compared_as_their_microseconds() -> None:
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    micros = (at - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    rows = pa.table({"id": ["x", "y", "z"], "at": pa.array([at, at, at], pa.timestamp("us", "UTC"))})
    held = pa.table({"id": ["x", "y"], "h": pa.array([micros + 1, micros], pa.int64())})
    assert not_older_than_held(rows, [0], 1, held).column("id").to_pylist() == ["y", "z"]
    assert order_values(rows.column("at")).to_pylist() == [micros] * 3
    assert order_values(pa.array([at], pa.timestamp("ms", "UTC"))).to_pylist() == [micros // 1000 * 1000]
    assert order_values(pa.array([7], pa.int32())).to_pylist() == [7]


def test_nothing_held_or_nothing_older_leaves_the_rows_as_they_are() -> None:
    rows = pa.table({"id": [1, 2], "o": [5, 6]})
    assert (
        not_older_than_held(rows, [0], 1, pa.table({"id": pa.array([], pa.int64()), "h": pa.array([], pa.int64())}))
        is rows
    )
    assert not_older_than_held(rows, [0], 1, pa.table({"id": [1, 3], "h": [5, 100]})) is rows
