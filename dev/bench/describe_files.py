"""`python -m dev.bench.describe_files [--files 16] [--repeat 15]`: what a commit spends describing
its files to Iceberg (iceberg/file_descriptions.py), both ways on the same footers, alternating: from
the JSON of the footers' metrics read in Python (ContentFileParser), and through Iceberg's builders
and footer reader. The files are a changelog batch's into a `bucket(16, id)` table (a data and an
equality delete file per bucket, each ~1,000 rows of the Debezium benchmark's 18 columns), added
to a RowDelta that is not committed. Only the driver JVM is used (Iceberg's in-memory catalog); the
session is the job's, as the dev stack's config builds it. Prints the median milliseconds of a
commit's files and per file, and the py4j calls per file.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from py4j import clientserver
from pyspark.sql import SparkSession

from dev.kit.scenario import Scenario
from icesink.iceberg.file_descriptions import Described
from icesink.iceberg.jvm import jvm
from icesink.iceberg.warm_up import in_memory_namespace
from icesink.job.session import build_session
from icesink.model import WrittenFile
from icesink.tasks.parquet_files import footer_file

COLUMNS = [
    ("id", pa.int64()), ("name", pa.string()), ("email", pa.string()), ("amount", pa.decimal128(12, 2)),
    ("qty", pa.int32()), ("score", pa.float64()), ("active", pa.bool_()), ("created", pa.timestamp("us", "UTC")),
    ("day", pa.date32()), ("note", pa.string()), ("country", pa.string()), ("city", pa.string()),
    ("zip", pa.string()), ("phone", pa.string()), ("rank", pa.int64()), ("ratio", pa.float32()),
    ("_source_lsn", pa.int64()), ("op", pa.string()),
]  # fmt: skip


def _schema() -> pa.Schema:
    return pa.schema(
        [pa.field(n, t, n != "id", {b"PARQUET:field_id": str(i + 1).encode()}) for i, (n, t) in enumerate(COLUMNS)]
    )


def _footer(rows: int, seed: int) -> bytes:
    columns: dict[str, Any] = {}
    for name, kind in COLUMNS:
        if pa.types.is_string(kind):
            columns[name] = [f"{name}-{seed}-{i * 7919 % 1000:04d}" for i in range(rows)]
        elif pa.types.is_decimal(kind):
            columns[name] = pa.array([Decimal(i * 13 - 500) / 100 for i in range(rows)], kind)
        elif pa.types.is_boolean(kind):
            columns[name] = [i % 2 == 0 for i in range(rows)]
        elif pa.types.is_date32(kind):
            columns[name] = pa.array([seed * rows + i for i in range(rows)], pa.int32()).cast(kind)
        else:
            columns[name] = pa.array([seed * rows + i for i in range(rows)], pa.int64()).cast(kind, safe=False)
    footers: list[pq.FileMetaData] = []
    pq.write_table(pa.table(columns, schema=_schema()), pa.BufferOutputStream(), metadata_collector=footers)
    return footer_file(footers[0])


def _table(spark: SparkSession) -> Any:
    view = jvm(spark)
    ice = view.org.apache.iceberg
    catalog, namespace = in_memory_namespace(spark, "describe-files", "bench")
    fields = ",".join(
        f'{{"id": {i + 1}, "name": "{n}", "required": {str(n == "id").lower()}, "type": "{_iceberg(t)}"}}'
        for i, (n, t) in enumerate(COLUMNS)
    )
    schema = ice.SchemaParser.fromJson(f'{{"type": "struct", "schema-id": 0, "fields": [{fields}]}}')
    spec = ice.PartitionSpecParser.fromJson(
        schema, '{"spec-id": 0, "fields": [{"name": "id_bucket", "transform": "bucket[16]", "source-id": 1}]}'
    )
    props = view.java.util.HashMap()
    props.put("format-version", "2")
    return catalog.createTable(ice.catalog.TableIdentifier.of(namespace, "t"), schema, spec, props)


def _iceberg(kind: pa.DataType) -> str:
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision}, {kind.scale})"
    names = {pa.int64(): "long", pa.int32(): "int", pa.string(): "string", pa.float64(): "double",
             pa.float32(): "float", pa.bool_(): "boolean", pa.date32(): "date"}  # fmt: skip
    return names.get(kind, "timestamptz")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=16, help="buckets written (a data and a delete file each)")
    parser.add_argument("--rows", type=int, default=1000, help="rows per file")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    spark = build_session(Scenario.new(Path(tempfile.mkdtemp(prefix="describe-files-"))).config())
    table = _table(spark)
    footers = [_footer(args.rows, b) for b in range(args.files)]
    data = [WrittenFile(f"memory://d/{uuid.uuid4().hex}", args.rows, 50_000, "data", (str(b),), footers[b])
            for b in range(args.files)]  # fmt: skip
    deletes = [WrittenFile(f"memory://d/{uuid.uuid4().hex}", args.rows, 9_000, "deletes", (str(b),), footers[b])
               for b in range(args.files)]  # fmt: skip
    ways = {"from footers (JSON)": True, "Iceberg's builders": False}
    times: dict[str, list[float]] = {w: [] for w in ways}
    calls: dict[str, int] = {}
    for r in range(args.repeat + 2):  # the first two warm both ways up
        for way, from_footers in ways.items():
            sent = _count_calls()
            start = time.perf_counter()
            _row_delta(spark, table, data, deletes, from_footers)
            took = time.perf_counter() - start
            calls[way] = sent()
            if r >= 2:
                times[way].append(took)
    n = 2 * args.files
    print(f"{n} files of a bucket({args.files}) changelog batch, {args.rows:,} rows each; medians of {args.repeat}:")
    base = statistics.median(times["Iceberg's builders"])
    for way, taken in times.items():
        median = statistics.median(taken)
        print(f"  {way:<20} {median * 1000:7.1f} ms a commit ({median * 1000 / n:.2f} ms a file, "
              f"{calls[way] / n:.1f} py4j calls a file); {base / median:.2f}x the builders")  # fmt: skip
    spark.stop()


def _row_delta(spark: SparkSession, table: Any, data: list[WrittenFile], deletes: list[WrittenFile], json: bool) -> Any:
    """The files in a RowDelta, as commit.pending_update adds them (not committed)."""
    described = Described(spark, table, from_footers=json)
    delta = table.newRowDelta()
    for f in data:
        delta.addRows(described.data_file(f))
    for f in deletes:
        delta.addDeletes(described.equality_deletes(f, ["id"]))
    return delta


def _count_calls() -> Any:
    """Counts the driver's py4j calls from now until the returned function is called."""
    sent = [0]
    original = clientserver.ClientServerConnection.send_command

    def send(self: clientserver.ClientServerConnection, command: str) -> str:
        if command.startswith("c\n"):
            sent[0] += 1
        return str(original(self, command))

    clientserver.ClientServerConnection.send_command = send

    def done() -> int:
        clientserver.ClientServerConnection.send_command = original
        return sent[0]

    return done


if __name__ == "__main__":
    main()
