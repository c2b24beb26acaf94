"""The one-pass Avro decoder's union check: each index found where its record's decoded values place
it (src/icesink/tasks/avro_positions.py) against the records read again once per combination of
null fields (tasks/avro_unions.py, the way before it and still the fallback), inside a task's decode
(`AvroRows.decode`). No stack needed: pure Python, one core.

  python -m dev.bench unions [--events 150000] [--records 10000] [--repeat 5]

Four workloads: the end-to-end benchmark's Debezium Avro change events (icesink-debezium's:
inserts, updates and deletes, 2-4 combinations of null fields) and flat Avro records
(icesink-avro's), and records of 20 optional longs with 1% and 5% of them null (hundreds of
combinations; beyond 32 the reading again declines the block, which then goes through Spark's
decoder; the table says what reading it again uncapped would cost).
Prints the median milliseconds of each way and the ratio.
"""

from __future__ import annotations

import argparse
import io
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dev.bench import workloads as wl
from dev.bench.semantic import median_ms

OPTIONAL = 20  # optional longs of the sparse records


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=150_000, help="Debezium events a run (default 150,000)")
    parser.add_argument("--records", type=int, default=10_000, help="sparse records a run (default 10,000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each way (default 5)")


@contextmanager
def read_again() -> Iterator[None]:
    """The check with its placing off: the records read again, as before it."""
    import numpy as np

    from icesink.tasks import decode_avro

    saved = decode_avro.indexes_placed
    decode_avro.indexes_placed = lambda *a: (False, np.ones(len(a[3]), dtype=bool))  # type: ignore[assignment]
    try:
        yield
    finally:
        decode_avro.indexes_placed = saved


@contextmanager
def uncapped() -> Iterator[None]:
    """The reading again with no cap on the combinations of null fields."""
    from icesink.tasks import avro_unions

    saved = avro_unions.MAX_NULL_PATTERNS
    avro_unions.MAX_NULL_PATTERNS = 1 << 40
    try:
        yield
    finally:
        avro_unions.MAX_NULL_PATTERNS = saved


def _framed(schema: dict[str, Any], records: list[dict[str, Any]]) -> list[bytes]:
    import fastavro

    from icesink.kafka import wire

    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    out = []
    for r in records:
        buf = io.BytesIO()
        buf.write(wire.id_key(1))
        fastavro.schemaless_writer(buf, parsed, r)
        out.append(buf.getvalue())
    return out


def _rows(text: str, spec: Any = None) -> Any:
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from icesink.batch.direct_avro import direct_avro, row_struct
    from icesink.kafka import wire
    from icesink.tasks.decode_avro import AvroRows

    struct = row_struct(text, spec)
    direct = direct_avro({wire.id_key(1): text}, struct, spec) if struct is not None else None
    if struct is None or direct is None:
        raise SystemExit("the one-pass decoder does not take the benchmark's schema")
    return AvroRows(direct, pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in struct.fields]))


def main(args: argparse.Namespace) -> None:
    import pyarrow as pa

    from icesink.batch.decode.debezium import EnvelopeSpec
    from icesink.tasks.avro_unions import MAX_NULL_PATTERNS

    changes = wl.cdc_changes(args.events, seed=7)
    events = pa.array(
        _framed(wl.DEBEZIUM_ENVELOPE, [wl.debezium_event(i, key, op) for i, (key, op) in enumerate(changes)]),
        pa.binary(),
    )
    sparse = {"type": "record", "name": "Sparse", "fields": [{"name": "id", "type": "long"}] + [
        {"name": f"o{k}", "type": ["null", "long"]} for k in range(OPTIONAL)]}  # fmt: skip
    rng = random.Random(1)
    flat = pa.array(_framed(wl.SCHEMA, [wl.event(i) for i in range(args.events)]), pa.binary())
    cases: list[tuple[str, Any, pa.Array]] = [
        (f"{args.events:,} Debezium Avro events (icesink-debezium's)",
         _rows(json.dumps(wl.DEBEZIUM_ENVELOPE), EnvelopeSpec("_op", ("lsn",))), events),
        (f"{args.events:,} flat Avro records (icesink-avro's: one optional field)", _rows(json.dumps(wl.SCHEMA)), flat),
    ]  # fmt: skip
    for share in (0.01, 0.05):
        records = [{"id": i, **{f"o{k}": None if rng.random() < share else i * k for k in range(OPTIONAL)}}
                   for i in range(args.records)]  # fmt: skip
        cases.append((f"{args.records:,} records of {OPTIONAL} optional longs, {share:.0%} null",
                      _rows(json.dumps(sparse)), pa.array(_framed(sparse, records), pa.binary())))  # fmt: skip
    print(f"a task's AvroRows.decode, median of {args.repeat} runs, one core")
    print()
    print("| records | combinations of null fields | read again | placed | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, rows, values in cases:
        placed = rows.decode(values)
        combinations = _combinations(rows, values)
        with read_again():
            again = rows.decode(values)
            before = median_ms(lambda rows=rows, values=values: rows.decode(values), args.repeat)
        if placed is None:
            raise SystemExit(f"{label}: declined with the placing")
        if again is not None and not again.equals(placed):
            raise SystemExit(f"{label}: not the same rows both ways")
        after = median_ms(lambda rows=rows, values=values: rows.decode(values), args.repeat)
        if again is None:  # the block goes through Spark's decoder: what reading it again would cost uncapped
            with read_again(), uncapped():
                before = median_ms(lambda rows=rows, values=values: rows.decode(values), args.repeat)
            print(
                f"| {label} | {combinations:,} | declined (over {MAX_NULL_PATTERNS}); {before:,.0f} ms uncapped "
                f"| {after:,.0f} ms | {before / after:.1f}x |"
            )
        else:
            print(f"| {label} | {combinations:,} | {before:,.0f} ms | {after:,.0f} ms | {before / after:.1f}x |")


def _combinations(rows: Any, values: Any) -> int:
    from icesink.tasks import avro_unions

    w = rows._direct.writers[0]
    decoded = rows._read(rows._headers[w.frame], values, [*w.fields, "__icesink_end"])
    with uncapped():
        return len(avro_unions.null_groups(w.unions, decoded) or [])
