"""Debezium's ZonedTimestamp (a PostgreSQL timestamptz) and VariableScaleDecimal (a numeric without
a scale) in the one-pass tasks (src/icesink/tasks/semantic_values.py): converted a whole array at a
time against a value at a time, as the conversions alone and inside a task's decode of Debezium Avro
change events whose row has one of each. No stack needed: pure Python, one core.

  python -m dev.bench semantic [--values 200000] [--repeat 5]

Prints the median milliseconds of each way, values (or events) per second and the ratio.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dev.kit import debezium_avro as dbz

ZONED = "io.debezium.time.ZonedTimestamp"

ROW: dict[str, Any] = {
    "type": "record",
    "name": "Value",
    "namespace": "bench.public.accounts",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "v", "type": "long"},
        {"name": "updated", "type": ["null", {"type": "string", "connect.name": ZONED}], "default": None},
        {
            "name": "balance",
            "type": ["null", dbz.VARIABLE_DECIMAL],
            "default": None,
        },
    ],
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--values", type=int, default=200_000, help="values (and events) per run (default 200,000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each way (default 5)")


def zoned(i: int) -> str:
    """A timestamptz as Debezium writes it: UTC, microseconds when there are any."""
    fraction = f".{i % 1_000_000:06d}" if i % 4 else ""
    return f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:{(i // 60) % 60:02d}{fraction}Z"


def row(i: int) -> dict[str, Any]:
    return {"id": i % 50_000, "v": i, "updated": zoned(i), "balance": dbz.variable_decimal(f"{i}.{i % 97:02d}")}


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


@contextmanager
def one_at_a_time() -> Iterator[None]:
    """The conversions with their whole-array way off: what the tasks did before it."""
    from icesink.tasks import semantic_values as sv

    saved = sv._zoned_whole, sv._variable_decimals_whole
    sv._zoned_whole = sv._variable_decimals_whole = lambda _: None  # type: ignore[assignment]
    try:
        yield
    finally:
        sv._zoned_whole, sv._variable_decimals_whole = saved


def main(args: argparse.Namespace) -> None:
    import fastavro
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from icesink.batch.decode.debezium import EnvelopeSpec
    from icesink.batch.direct_avro import direct_avro, row_struct
    from icesink.kafka import wire
    from icesink.schema.connect import VARIABLE_DECIMAL, ZONED_TIMESTAMP
    from icesink.tasks.decode_avro import AvroRows
    from icesink.tasks.semantic_values import CONVERSIONS

    n = args.values
    strings = pa.array([zoned(i) for i in range(n)])
    decimals = pa.array(
        [dbz.variable_decimal(f"{i}.{i % 97:02d}") for i in range(n)],
        pa.struct([("scale", pa.int32()), ("value", pa.binary())]),
    )
    envelope = dbz.envelope(ROW)
    text, frame = json.dumps(envelope), wire.id_key(1)
    parsed = fastavro.parse_schema(copy.deepcopy(envelope))
    ops = ("I", "U", "D")

    def framed(i: int) -> bytes:
        buf = io.BytesIO(frame)
        buf.seek(len(frame))
        fastavro.schemaless_writer(buf, parsed, dbz.event(ops[i % 3], row(i), 1_000 + i))
        return buf.getvalue()

    events = pa.array([framed(i) for i in range(n)], pa.binary())
    spec = EnvelopeSpec("_op", ("lsn",))
    struct = row_struct(text, spec)
    direct = direct_avro({frame: text}, struct, spec) if struct is not None else None
    if struct is None or direct is None:
        raise SystemExit("the one-pass decoder does not take the benchmark's envelope")
    rows = AvroRows(direct, pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in struct.fields]))
    cases: list[tuple[str, Callable[[], object]]] = [
        ("ZonedTimestamp", lambda: CONVERSIONS[ZONED_TIMESTAMP](strings)),
        ("VariableScaleDecimal", lambda: CONVERSIONS[VARIABLE_DECIMAL](decimals)),
        ("a task's decode of Debezium Avro events", lambda: rows.decode(events)),
    ]
    print(f"{n:,} values (events) a run, median of {args.repeat} runs, one core")
    print()
    print("| what | a value at a time | a whole array at a time | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for label, run in cases:
        whole = run()
        with one_at_a_time():
            each = run()
            before = median_ms(run, args.repeat)
        if whole is None or each is None or not whole.equals(each):
            raise SystemExit(f"{label}: not the same values both ways")
        after = median_ms(run, args.repeat)
        print(
            f"| {label} | {before:,.0f} ms ({n / before * 1000:,.0f}/s) | {after:,.0f} ms ({n / after * 1000:,.0f}/s) "
            f"| {before / after:.1f}x |"
        )
