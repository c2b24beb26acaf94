"""The one-pass job's changes (tasks/change_rows.py): which operations it takes as Spark's path
reads them, and the check that no key was written by two tasks."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest

from icesink.batch.changes import OP_CODES
from icesink.tasks.change_rows import key_fingerprints, keys_set, operation_codes, shared_keys


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


def test_a_change_without_its_key_is_not_taken() -> None:
    rows = pa.table({"id": [1, None], "region": ["eu", "us"], "v": [None, 2]})
    assert not keys_set(rows, ["id", "region"])
    assert keys_set(rows, ["region"])


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
