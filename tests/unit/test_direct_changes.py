"""The one-pass job's changes (tasks/change_rows.py): which operations it takes as Spark's path
reads them, the changes that path makes dead letters of (in its words), and the check that no key
was written by two tasks."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from icesink.batch.changes import OP_CODES
from icesink.config import WriteMode
from icesink.tasks.change_rows import ChangeSpec, change_problems, key_fingerprints, operation_codes, shared_keys

CHANGELOG = ChangeSpec(WriteMode.CHANGELOG, ("id", "region"), "op", "_key")


def test_operations_are_read_as_sparks_path_reads_them() -> None:
    raw = pa.array(["I", "u", " d ", "c", "r", "Update", "DELETE", " insert", "create"])
    codes = operation_codes(raw, len(raw))
    assert codes is not None
    assert codes.to_pylist() == ["I", "U", "D", "I", "I", "U", "D", "I", "I"]
    assert {OP_CODES[k] for k in OP_CODES} == {"I", "U", "D"}


@pytest.mark.parametrize(
    "bad",
    [
        None,  # a null operation: UnknownOperation on Spark's path
        "X",
        "",
        "\tI",  # Spark's trim removes spaces, not tabs
        "I\n",
        "upsert",
        "İ",  # not ASCII: no lower-casing to vouch for
    ],
)
def test_an_operation_sparks_path_would_refuse_declines_the_changes(bad: str | None) -> None:
    assert operation_codes(pa.array(["I", bad, "U"], pa.string()), 3) is None


def test_an_upsert_tables_changes_are_all_updates() -> None:
    codes = operation_codes(None, 3)
    assert codes is not None
    assert codes.to_pylist() == ["U", "U", "U"]


def test_changes_sparks_path_refuses_are_its_dead_letters_in_its_words() -> None:
    values = pa.table({
        "id": [1, None, 3, 4, None, 6, 7], "region": ["eu", "us", None, "eu", None, "eu", "eu"],
        "op": ["I", "U", "u", " X ", "x", None, "d"],
    })  # fmt: skip
    tombstones = pa.array([False] * 7)
    assert change_problems(values, values.column("op"), tombstones, CHANGELOG, 10) == {
        1: ("MissingKey", "no value for key column(s) id"),
        2: ("MissingKey", "no value for key column(s) region"),
        3: ("UnknownOperation", "operation column op holds ' X ', not I, U or D"),
        4: ("UnknownOperation", "operation column op holds 'x', not I, U or D"),  # before its missing keys
        5: ("UnknownOperation", "operation column op holds null, not I, U or D"),
    }
    assert change_problems(values.slice(0, 1), values.column("op").slice(0, 1), tombstones[:1], CHANGELOG) == {}
    upsert = ChangeSpec(WriteMode.UPSERT, ("id",), "op", "_key")
    assert change_problems(values, None, tombstones, upsert, 10) == {
        1: ("MissingKey", "no value for key column(s) id"), 4: ("MissingKey", "no value for key column(s) id"),
    }  # fmt: skip


def test_tombstones_without_their_key_are_dead_letters_where_the_key_column_says_why() -> None:
    values = pa.table({
        "id": [1, None, None, None], "region": ["eu", None, "eu", None],
        "op": [None, None, None, "i"], "_key": ["k1", None, "k3", None],
    })  # fmt: skip
    tombstones = pa.array([True, True, True, False])
    assert change_problems(values, values.column("op"), tombstones, CHANGELOG, 10) == {
        1: ("NullValue", "null value and null key: no row to delete"),
        2: ("MissingKey", "a tombstone whose record key has no value for key column(s) id"),
        3: ("MissingKey", "no value for key column(s) id, region"),
    }
    without = values.drop_columns(["_key"])
    assert change_problems(without, without.column("op"), tombstones, CHANGELOG) is None, "no key column: in doubt"


def test_more_dead_letters_than_the_table_may_still_take_decline_it() -> None:
    values = pa.table({"id": [1, 2, 3], "region": ["eu", "eu", "eu"], "op": ["x", "y", "I"]})
    tombstones = pa.array([False] * 3)
    assert change_problems(values, values.column("op"), tombstones, CHANGELOG, 2) is not None
    assert change_problems(values, values.column("op"), tombstones, CHANGELOG, 1) is None
    assert change_problems(values, values.column("op"), tombstones, CHANGELOG) is None, "takes none: declined"
    assert change_problems(values.slice(2), values.column("op").slice(2), tombstones[2:], CHANGELOG) == {}


def test_an_operation_not_ascii_declines() -> None:
    spelled = pa.table({"id": [1], "region": ["eu"], "op": ["İ"]})
    assert change_problems(spelled, spelled.column("op"), pa.array([False]), CHANGELOG) is None


def test_a_key_written_by_two_tasks_is_found_whatever_its_columns() -> None:
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "region": ["eu", "us", "eu"]})
    second = pa.table({"id": pa.array([4, 2], pa.int64()), "region": ["eu", "eu"]})  # (2, eu) is new
    apart = [key_fingerprints(first), key_fingerprints(second)]
    assert not shared_keys(apart)
    third = pa.table({"id": pa.array([7, 3], pa.int64()), "region": ["us", "eu"]})  # (3, eu) again
    assert shared_keys([*apart, key_fingerprints(third)])
    assert not shared_keys([key_fingerprints(first)]), "one task: nothing to compare"
    assert not shared_keys([])


def test_fingerprints_are_the_same_in_every_process() -> None:
    """A task's fingerprints are compared with other Python workers': a fixed seed, not a per-process one."""
    code = (
        "import sys, pyarrow as pa; from icesink.tasks.change_rows import key_fingerprints; "
        "sys.stdout.write(key_fingerprints(pa.table({'id': pa.array([1, 2], pa.int64()), 'name': ['a', 'b']})).hex())"
    )
    runs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    ]
    keys = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
    assert runs == [key_fingerprints(keys).hex()] * 2
    assert len(key_fingerprints(keys)) == 16
