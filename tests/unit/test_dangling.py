"""Which delete files can no longer apply (iceberg/dangling.py), by the Iceberg spec's rules."""

from __future__ import annotations

from icesink.iceberg.dangling import EQUALITY_DELETES, POSITION_DELETES, DeleteEntry, dangling

P0, P1 = (1, '{"b":0}'), (1, '{"b":1}')
NONE = (0, "{}")


def eq(path: str, seq: int, group: tuple[int, str] = P0, unpartitioned: bool = False) -> DeleteEntry:
    return DeleteEntry(path, EQUALITY_DELETES, seq, group, unpartitioned)


def pos(path: str, seq: int, group: tuple[int, str] = P0, referenced_live: bool | None = None) -> DeleteEntry:
    return DeleteEntry(path, POSITION_DELETES, seq, group, False, referenced_live)


def paths(found: list[DeleteEntry]) -> list[str]:
    return [d.path for d in found]


def test_an_equality_delete_dangles_unless_older_data_of_its_partition_is_live() -> None:
    deletes = [eq("a", 3), eq("b", 5), eq("c", 6), eq("d", 2, P1)]
    # Compaction rewrote partition 0 with sequence number 5: deletes up to 5 apply to nothing.
    assert paths(dangling(deletes, {P0: 5, P1: 1})) == ["a", "b"]
    assert paths(dangling(deletes, {P1: 1})) == ["a", "b", "c"], "no data left in partition 0"


def test_a_global_equality_delete_looks_at_every_partition() -> None:
    deletes = [eq("g", 4, NONE, unpartitioned=True), eq("h", 9, NONE, unpartitioned=True)]
    assert paths(dangling(deletes, {P0: 8, P1: 3})) == [], "partition 1 holds rows older than both"
    assert paths(dangling(deletes, {P0: 8, P1: 7})) == ["g"]
    assert paths(dangling(deletes, {})) == ["g", "h"], "no data at all"


def test_a_position_delete_applies_to_data_of_its_own_sequence_number_too() -> None:
    deletes = [pos("p", 5), pos("q", 4)]
    assert paths(dangling(deletes, {P0: 5})) == ["q"]


def test_a_position_delete_of_a_file_no_longer_live_dangles() -> None:
    deletes = [pos("gone", 9, referenced_live=False), pos("there", 9, referenced_live=True), pos("any", 9)]
    assert paths(dangling(deletes, {P0: 1})) == ["gone"]
