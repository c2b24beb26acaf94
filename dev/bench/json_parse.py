"""`python -m dev.bench.json_parse [--records N] [--repeat R]`: how fast a one-pass task turns a
batch of plain JSON records into a table's columns (tasks/plain_rows.DirectRows), a record at a time
(orjson, then each column checked and made Arrow) against the batch parsed whole by Arrow's JSON
reader (`add_parsed`: tasks/decode_json.parsed_columns), on the benchmark's JSON records (18
columns, ~420 bytes each, as `icesink-json` produces them).

Pure: no stack, no Spark. Prints each way's median seconds and records/s, and checks that both
give the same columns.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import pyarrow as pa
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType

from dev.bench import workloads as wl
from icesink.tasks.decode_json import DirectColumn, direct_columns
from icesink.tasks.plain_rows import DirectRows

_TYPES = {"bigint": LongType(), "double": DoubleType(), "string": StringType(), "boolean": BooleanType()}


def _columns() -> tuple[DirectColumn, ...]:
    fields = [StructField(name, _TYPES[kind]) for name, kind in (f.split() for f in wl.JSON_DDL.split(", "))]
    found = direct_columns(StructType(fields))
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
    args = parser.parse_args()
    columns = _columns()
    values: list[bytes | None] = [wl.as_json(wl.event(i)) for i in range(args.records)]

    def one_at_a_time() -> pa.RecordBatch:
        rows = DirectRows(columns)
        assert all(rows.add(v) for v in values)
        return rows.take()

    def whole() -> pa.RecordBatch:
        rows = DirectRows(columns)
        assert rows.add_parsed(values), "the batch was not parsed whole"
        return rows.take()

    slow, expected = _timed(one_at_a_time, args.repeat)
    fast, got = _timed(whole, args.repeat)
    assert got.equals(expected), "the two ways gave different columns"
    size = sum(len(v or b"") for v in values) / len(values)
    print(f"{args.records:,} JSON records of ~{size:.0f} bytes, {len(columns)} columns; medians of {args.repeat}")
    for name, seconds in (("a record at a time", slow), ("parsed whole", fast)):
        print(f"  {name:18} {seconds * 1000:7.1f} ms  {args.records / seconds:12,.0f} records/s")
    print(f"  parsed whole: {slow / fast:.2f}x")


if __name__ == "__main__":
    main()
