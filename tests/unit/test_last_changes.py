"""The executor-side reduction of a task's changes to the last change per key (pure pyarrow)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from icesink.tasks.last_changes import last_per_key, not_older

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
