"""Decode benchmark: icesink's Avro decoder against a pandas_udf calling AvroDeserializer per row.

  python -m dev.bench decode [--records 1000000] [--repeat 3] [--report REPORT.json]

Needs the local stack (the real Schema Registry). Values are produced by confluent-kafka's
AvroSerializer (~200 bytes, 18 fields with logical types), stored once as Parquet, then decoded
in Spark local[2] by each approach in its own process, end to end into Spark's `noop` sink:
  icesink    from_avro per writer schema after the Confluent header (src/icesink/batch/decode/avro.py)
  pandas_udf a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None) per row
It prints records/s per run, the median, the peak memory (RSS of the whole process tree: driver
JVM and Python workers) and the ratio; --report adds them to a report.json as its `decode` section.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dev.bench import REPO
from dev.bench import report as rep
from dev.bench.measure import MB, peaks_of, worker_command
from dev.bench.workloads import SCHEMA, event
from dev.kit.endpoints import REGISTRY_URL

APPROACHES = ("icesink", "pandas_udf")


def generate(path: Path, n: int) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    # A timeout (the client has none) and the plain {topic}-value subject: confluent-kafka 2.16's
    # default strategy asks for associations, which Apicurio does not serve.
    client = SchemaRegistryClient({"url": REGISTRY_URL, "timeout": 10})
    ser = AvroSerializer(client, json.dumps(SCHEMA), conf={"subject.name.strategy": topic_subject_name_strategy})
    ctx = SerializationContext("bench.events", MessageField.VALUE)
    values = [ser(event(i, days=1), ctx) for i in range(n)]
    pq.write_table(pa.table({"value": pa.array(values, pa.binary())}), path)
    return sum(len(v) for v in values if v) / n


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    jars = os.environ.get("ICESINK_JARS_DIR", os.path.expanduser("~/.cache/icesink/jars/spark"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.jars", ",".join(str(p) for p in sorted(Path(jars).glob("*.jar"))))
        .config("spark.driver.memory", "2g")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def kafka_like(spark: Any, path: Path) -> Any:
    """The values as the Kafka source's rows, cached, so that only decoding is timed."""
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path))
    records = df.select(
        F.lit("bench.events").alias("topic"),
        F.lit(0).alias("partition"),
        F.monotonically_increasing_id().alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(None).cast("binary").alias("key"),
        "value",
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
    ).repartition(2)
    records = records.cache()
    records.count()
    return records


def run_icesink(spark: Any, path: Path) -> Any:
    from pyspark.sql import functions as F

    from icesink.batch.decode import bad_records, good_rows
    from icesink.batch.decode.avro import AvroDecoder
    from icesink.kafka.registry import RegistrySettings, registry_for

    records = kafka_like(spark, path)
    decoder = AvroDecoder(registry_for(RegistrySettings(url=REGISTRY_URL)))

    def once() -> None:
        # What the batch handler does: one planning aggregate (offsets and schema ids per
        # topic-partition), then decode and write.
        plan = records.groupBy("topic", "partition").agg(
            F.min("offset"), F.max("offset"), F.count(F.lit(1)), F.collect_set(decoder.plan_column()).alias("keys")
        )
        keys = sorted({bytes(k) for r in plan.collect() for k in r.keys})
        inspected = decoder.inspect(records, keys)
        parsed = inspected.parse(inspected.schema)
        good_rows(parsed, inspected.schema).write.format("noop").mode("overwrite").save()

    def check() -> None:
        inspected = decoder.inspect(records)
        assert bad_records(inspected.parse(inspected.schema)).count() == 0

    return once, check


def run_pandas_udf(spark: Any, path: Path) -> Any:
    from pyspark.sql import functions as F

    from dev.bench.baselines import deserializer_udf
    from icesink.batch.decode.avro import AvroDecoder
    from icesink.kafka.registry import RegistrySettings, registry_for

    records = kafka_like(spark, path)
    # The prototype hard-codes this schema; it is taken from the same writer schema here.
    schema = AvroDecoder(registry_for(RegistrySettings(url=REGISTRY_URL))).inspect(records).schema
    decode = deserializer_udf(schema, REGISTRY_URL, nulls_on_error=False)

    def once() -> None:
        records.select(decode(F.col("value")).alias("r")).select("r.*").write.format("noop").mode("overwrite").save()

    def check() -> None:
        assert records.select(decode(F.col("value")).alias("r")).where("r.id IS NULL").count() == 0

    return once, check


def worker(approach: str, path: Path, n: int, repeat: int) -> None:
    spark = spark_session()
    once, check = {"icesink": run_icesink, "pandas_udf": run_pandas_udf}[approach](spark, path)
    check()
    once()  # warm-up: Python workers, registry cache, JIT
    for _ in range(repeat):
        started = time.perf_counter()
        once()
        print(json.dumps({"approach": approach, "seconds": time.perf_counter() - started, "records": n}), flush=True)
    spark.stop()


def measure(approach: str, path: Path, n: int, repeat: int) -> dict[str, Any]:
    args = ["decode", "--worker", approach, "--data", str(path), "--records", str(n), "--repeat", str(repeat)]
    proc = subprocess.Popen(worker_command(*args), stdout=subprocess.PIPE, text=True, cwd=REPO)
    with peaks_of(proc.pid) as peaks:
        runs = [json.loads(line) for line in proc.stdout or [] if line.startswith("{")]
        rc = proc.wait()
    if rc != 0 or not runs:
        raise SystemExit(f"{approach} run failed (exit {rc})")
    rates = [r["records"] / r["seconds"] for r in runs]
    for r, rate in zip(runs, rates, strict=True):
        print(f"  {approach:<10} {r['seconds']:7.2f} s  {rate:>10,.0f} records/s")
    return {"approach": approach, "rates": rates, "median": statistics.median(rates), "peak_rss_mb": peaks[2] / MB}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--report", type=Path, help="add the figures to this report.json (section `decode`)")
    parser.add_argument("--worker", choices=APPROACHES, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)


def main(args: argparse.Namespace) -> None:
    if args.worker:
        worker(args.worker, args.data, args.records, args.repeat)
        return
    machine = rep.machine()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "values.parquet"
        started = time.perf_counter()
        size = generate(path, args.records)
        took = time.perf_counter() - started
        print(f"{args.records:,} values from AvroSerializer, {size:.0f} bytes on average ({took:.0f} s)")
        results = [measure(a, path, args.records, args.repeat) for a in APPROACHES]
    ice, udf = results
    print()
    print(f"{'approach':<12}{'median records/s':>18}{'peak RSS (MB)':>16}")
    for r in results:
        print(f"{r['approach']:<12}{r['median']:>18,.0f}{r['peak_rss_mb']:>16,.0f}")
    ratio = ice["median"] / udf["median"]
    print(f"ratio icesink / pandas_udf: {ratio:.1f}x (targets: >= 3x, icesink >= 250,000 records/s)")
    if args.report:
        section = {"date": rep.now(), "machine": machine, "records": args.records, "repeat": args.repeat,
                   "value_bytes": size, "results": results, "ratio": ratio}  # fmt: skip
        rep.merge_section(args.report, "decode", section)
