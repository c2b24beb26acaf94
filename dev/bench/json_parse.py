"""`python -m dev.bench.json_parse [--records N] [--repeat R] [--debezium]`: how fast a one-pass task
turns a batch of plain JSON records into a table's columns (tasks/plain_rows.DirectRows), a record
at a time (orjson, then each column checked and made Arrow) against the batch parsed whole by
Arrow's JSON reader (`add_parsed`: tasks/decode_json.parsed_columns), on the benchmark's JSON
records (18 columns, ~420 bytes each, as `icesink-json` produces them). With --debezium, the same
rows as Debezium change events in plain JSON (JsonConverter with schemas off: before, after, op,
source; a third each creates, updates and deletes) into a changelog table's columns
(tasks/plain_changes.parsed_changes).

Pure: no stack, no Spark. Prints each way's median seconds and records/s, and checks that both
give the same columns.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import orjson
import pyarrow as pa
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType

from dev.bench import workloads as wl
from icesink.schema.envelope import EnvelopeSpec
from icesink.tasks.decode_json import DirectColumn, direct_columns
from icesink.tasks.plain_rows import DirectRows

# The changelog table's columns beside the image's (schema/envelope.row_type).
_ENVELOPE = EnvelopeSpec(source_columns=("lsn",))
_SYNTHETIC = [StructField("_op", StringType()), StructField("_source_lsn", LongType())]

_TYPES = {"bigint": LongType(), "double": DoubleType(), "string": StringType(), "boolean": BooleanType()}


def _columns(debezium: bool = False) -> tuple[DirectColumn, ...]:
    fields = [StructField(name, _TYPES[kind]) for name, kind in (f.split() for f in wl.JSON_DDL.split(", "))]
    found = direct_columns(StructType(fields + (_SYNTHETIC if debezium else [])))
    assert found is not None
    return found


def _timed(fn: Callable[[], pa.RecordBatch], repeat: int) -> tuple[float, pa.RecordBatch]:
    seconds, batch = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        batch = fn()
        seconds.append(time.perf_counter() - started)
    assert batch is not None
    return statistics.median(seconds), batch


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dev.bench.json_parse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000, help="records a batch (default 10,000: a task's chunk)")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each way (default 7)")
    parser.add_argument("--debezium", action="store_true", help="Debezium change events in plain JSON")
    args = parser.parse_args()
    columns = _columns(args.debezium)
    values: list[bytes | None] = [_change(i) if args.debezium else wl.as_json(wl.event(i)) for i in range(args.records)]
    envelope = _ENVELOPE if args.debezium else None
    coordinates = tuple(pa.array(x) for x in (["t"] * len(values), [0] * len(values), list(range(len(values)))))

    def one_at_a_time() -> pa.RecordBatch:
        rows = DirectRows(columns, carry=True, envelope=envelope)
        assert all(rows.add(v, ("t", 0, i)) for i, v in enumerate(values))
        return rows.take()

    def whole() -> pa.RecordBatch:
        rows = DirectRows(columns, carry=True, envelope=envelope)
        assert rows.add_all(values, coordinates)
        assert not rows._rows, "the batch was not parsed whole"
        return rows.take()

    slow, expected = _timed(one_at_a_time, args.repeat)
    fast, got = _timed(whole, args.repeat)
    assert got.equals(expected), "the two ways gave different columns"
    size = sum(len(v or b"") for v in values) / len(values)
    kind = "Debezium change events in plain JSON" if args.debezium else "JSON records"
    print(f"{args.records:,} {kind} of ~{size:.0f} bytes, {len(columns)} columns; medians of {args.repeat}")
    for name, seconds in (("a record at a time", slow), ("parsed whole", fast)):
        print(f"  {name:18} {seconds * 1000:7.1f} ms  {args.records / seconds:12,.0f} records/s")
    print(f"  parsed whole: {slow / fast:.2f}x")


def _change(i: int) -> bytes:
    """The benchmark's event `i` as a Debezium change event: created, updated or deleted."""
    row = orjson.loads(wl.as_json(wl.event(i)))
    op = "cud"[i % 3]
    before = None if op == "c" else {**row, "currency": "USD"}
    source = {"version": "3.6.1", "connector": "postgresql", "name": "db", "ts_ms": 1, "snapshot": "false",
              "db": "shop", "schema": "public", "table": "events", "txId": i, "lsn": 1000 + i}  # fmt: skip
    change = {"before": before, "after": None if op == "d" else row, "op": op, "source": source, "ts_ms": 2}
    return orjson.dumps({**change, "transaction": None})


if __name__ == "__main__":
    main()
