"""Pure parts of fault handling: which failures are waited out, the commit fence's decisions, and
the check that finds a recreated topic."""

from __future__ import annotations

from icesink.batch.plan import log_behind_table
from icesink.errors import (
    CommitError,
    CommitOutcomeUnknownError,
    DecodeError,
    RegistryUnavailableError,
    SchemaConflictError,
)
from icesink.iceberg import fence as commit_guard
from icesink.iceberg import snapshot_offsets as codec
from icesink.model import TopicPartition
from icesink.runtime import retries

TP0, TP1 = TopicPartition("events.20240101", 0), TopicPartition("events.20240101", 1)


def test_unreachable_services_are_waited_out() -> None:
    assert retries.is_transient(
        RuntimeError("RESTException: ... Caused by: java.net.ConnectException: Connection refused")
    )
    assert retries.is_transient(
        OSError("AWS Error NETWORK_CONNECTION during GetObject: curlCode: 7, Couldn't connect to server")
    )
    assert retries.is_transient(RegistryUnavailableError("registry http://r unavailable after 3 attempts"))
    assert retries.is_transient(CommitOutcomeUnknownError("table a.b: the catalog did not confirm"))


def test_a_wrapped_registry_outage_is_waited_out() -> None:
    outer = DecodeError("batch 3 could not be decoded")
    outer.__cause__ = RegistryUnavailableError("down")
    assert retries.is_transient(outer)


def test_our_error_over_an_unreachable_catalog_is_waited_out() -> None:
    outer = CommitError("cannot create namespace demo")
    outer.__cause__ = RuntimeError("java.net.ConnectException: Connection refused")
    assert retries.is_transient(outer)


def test_verdicts_on_data_config_and_fencing_are_final() -> None:
    fenced = CommitError("table a.b: offsets changed while the batch was written")
    fenced.__cause__ = RuntimeError("ValidationException: Snapshot ancestry validation failed: icesink: ...")
    assert not retries.is_transient(fenced)
    assert not retries.is_transient(SchemaConflictError("column id is bigint in the table, string in the record"))
    # Our own verdict stands even when the text happens to mention a connection.
    assert not retries.is_transient(DecodeError("topic t partition 0 offset 3: 'Connection refused' is not a number"))
    assert not retries.is_transient(ValueError("division by zero"))
    assert not retries.is_transient(KeyboardInterrupt())


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [retries.backoff_seconds(n) for n in range(1, 7)] == [2, 4, 8, 16, 30, 30]


def test_brief_names_the_unreachable_part() -> None:
    e = RuntimeError(
        "An error occurred while calling o123.commit.\n  at x\njava.net.ConnectException: Connection refused"
    )
    assert retries.brief(e) == "RuntimeError: java.net.ConnectException: Connection refused"


def summary(offsets: dict[TopicPartition, int], query: str = "q1", batch: int = 7) -> dict[str, str]:
    return codec.summary_properties(offsets, query, batch)


def test_the_newest_offset_bearing_summary_skips_compactions() -> None:
    ours = summary({TP0: 10})
    assert commit_guard.newest_offset_summary(iter([{"operation": "replace"}, ours, summary({TP0: 5})])) == ours
    assert commit_guard.newest_offset_summary(iter([{"operation": "replace"}])) is None


def test_our_commit_is_recognised_by_query_batch_and_offsets() -> None:
    ours = summary({TP0: 10, TP1: 4})
    assert commit_guard.is_our_commit(ours, "q1", 7, {TP0: 10, TP1: 4})
    assert not commit_guard.is_our_commit(ours, "q2", 7, {TP0: 10, TP1: 4}), "another query (a zombie)"
    assert not commit_guard.is_our_commit(ours, "q1", 8, {TP0: 10, TP1: 4}), "another batch"
    assert not commit_guard.is_our_commit(ours, "q1", 7, {TP0: 11, TP1: 4}), "other offsets"
    assert not commit_guard.is_our_commit(None, "q1", 7, {})


class _Snapshot:
    def __init__(self, s: dict[str, str]) -> None:
        self._s = s

    def summary(self) -> dict[str, str]:
        return self._s


class _JavaIterable:
    """Stands in for the java.lang.Iterable py4j hands the validator."""

    def __init__(self, items: list[dict[str, str]]) -> None:
        self._items = [_Snapshot(i) for i in items]

    def iterator(self) -> _JavaIterable:
        self._pos = 0
        return self

    def hasNext(self) -> bool:  # noqa: N802
        return self._pos < len(self._items)

    def next(self) -> _Snapshot:
        self._pos += 1
        return self._items[self._pos - 1]


def test_the_fence_passes_compactions_and_stops_moved_offsets() -> None:
    fence = commit_guard.OffsetsUnchanged({TP0: 10})
    assert fence.validate(_JavaIterable([{"operation": "replace"}, summary({TP0: 10})]))
    assert not fence.validate(_JavaIterable([summary({TP0: 12}), summary({TP0: 10})]))
    assert fence.found == {TP0: 12}
    assert commit_guard.OffsetsUnchanged({}).validate(_JavaIterable([])), "a new table"
    assert fence.errorMessage() == commit_guard.REFUSED


def test_a_log_that_ends_below_the_table_is_a_recreated_topic() -> None:
    committed = {TP0: 60, TP1: 30}
    assert log_behind_table(committed, {TP0: 20, TP1: 30}) == [TP0]
    assert log_behind_table(committed, {TP0: 60, TP1: 45}) == []
    assert log_behind_table({}, {TP0: 5}) == []
