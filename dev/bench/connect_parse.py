"""`python -m dev.bench.connect_parse [--records N] [--repeat R]`: how fast a one-pass task turns a
batch of Debezium change events in Kafka Connect JSON (JsonConverter with schemas on, as
`icesink-debezium-json` produces them: ~3.5 KB each, the schema in every record, Connect JSON keys,
a tombstone after each delete) into a changelog table's rows (tasks/decode_connect.ConnectRows), a
record at a time (each payload parsed by orjson) against the batch read whole by Arrow's JSON
reader (`add_whole`: tasks/connect_batches.py).

Pure: no stack, no Spark. Prints each way's median seconds and records/s, and checks that both
give the same rows; with code whose `add_whole` takes no Connect JSON batch (before 2026-12-06),
the record-at-a-time way only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import orjson
import pyarrow as pa
from pyspark.sql.types import StructField, StructType

from dev.bench import workloads as wl
from dev.kit import debezium_json as dj
from icesink.schema.connect import parse_schema
from icesink.schema.envelope import EnvelopeSpec, row_type
from icesink.tasks.decode_connect import ConnectRows, DirectConnect

_OPS = {"I": "c", "U": "u", "D": "d"}


def _records(n: int) -> tuple[list[bytes | None], list[bytes | None]]:
    """The benchmark's change stream's first `n` records (values, keys), tombstones included."""
    values: list[bytes | None] = []
    keys: list[bytes | None] = []
    for i, (key, op) in enumerate(wl.cdc_changes(n, seed=7)):
        row = wl.debezium_json_row(i, key)
        before, after = (row, None) if op == "D" else (None, row)
        k = dj.wrapped(wl.DEBEZIUM_JSON_KEY, {"id": key})
        values.append(dj.change(wl.DEBEZIUM_JSON_ENVELOPE, _OPS[op], before, after, 1_000 + i))
        keys.append(k)
        if op == "D":
            values.append(None)
            keys.append(k)
    return values[:n], keys[:n]


def _timed(fn: Callable[[], pa.RecordBatch | None], repeat: int) -> tuple[float, pa.RecordBatch | None]:
    seconds, batch = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        batch = fn()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), batch


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m dev.bench.connect_parse", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000, help="records a batch (default 10,000: a task's chunk)")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each way (default 7)")
    args = parser.parse_args()
    values, keys = _records(args.records)
    spec = EnvelopeSpec(source_columns=("lsn",))
    key_type = parse_schema(orjson.dumps(wl.DEBEZIUM_JSON_KEY).decode()).result_type
    image = row_type(parse_schema(orjson.dumps(wl.DEBEZIUM_JSON_ENVELOPE).decode()).result_type, spec)
    table = DirectConnect(StructType([*image.fields, StructField("_key", key_type)]), spec)
    n = len(values)
    coordinates = (pa.array(["t"] * n), pa.array([0] * n, pa.int32()), pa.array(range(n), pa.int64()))

    def rows() -> ConnectRows:
        return ConnectRows(table, carry=True, key_column="_key", key_decoder=DirectConnect(key_type), keys=("id",))

    def one_at_a_time() -> pa.RecordBatch | None:
        found = rows()
        assert all(found.add(v, ("t", 0, i), k) for i, (v, k) in enumerate(zip(values, keys, strict=True)))
        return found.take()

    def whole() -> pa.RecordBatch | None:
        found = rows()
        return found.take() if found.add_whole(values, coordinates, keys) else None

    slow, expected = _timed(one_at_a_time, args.repeat)
    size = sum(len(v or b"") for v in values) / n
    kind = "Debezium change events in Connect JSON"
    print(f"{n:,} {kind} of ~{size:.0f} bytes (tombstones too); medians of {args.repeat}")
    print(f"  {'a record at a time':18} {slow * 1000:7.1f} ms  {n / slow:12,.0f} records/s")
    if whole() is None:
        print("  read whole: not taken by this code")
        return
    fast, got = _timed(whole, args.repeat)
    assert got is not None
    assert expected is not None
    assert got.equals(expected), "the two ways gave different rows"
    print(f"  {'read whole':18} {fast * 1000:7.1f} ms  {n / fast:12,.0f} records/s")
    print(f"  read whole: {slow / fast:.2f}x")


if __name__ == "__main__":
    main()
