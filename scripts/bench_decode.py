"""Decode benchmark: icesink's Avro decoder against the seed-000 pipeline, in one run.

  scripts/bench_decode.py [--records 1000000] [--repeat 3]

Needs the local stack (the real Schema Registry). Values are produced by confluent-kafka's
AvroSerializer (~200 bytes, 18 fields with logical types), stored once as Parquet, then decoded
in Spark local[2] by each approach in its own process, end to end into Spark's `noop` sink:
  icesink    from_avro per writer schema after the Confluent header (src/icesink/batch/decode/avro.py)
  pandas_udf seed 000: a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None) per row
It prints records/s per run, the median, the peak memory (RSS of the whole process tree: driver
JVM and Python workers) and the ratio.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd  # module level: pandas_udf reads the UDF's type hints from its globals

SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "bench.icesink",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user_id", "type": "long"},
        {"name": "session", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "event_type", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}},
        {"name": "currency", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "device", "type": "string"},
        {"name": "os", "type": "string"},
        {"name": "app_version", "type": "string"},
        {"name": "price", "type": "double"},
        {"name": "quantity", "type": "int"},
        {"name": "promoted", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "page_url", "type": "string"},
        {"name": "user_agent", "type": "string"},
    ],
}


def registry_url() -> str:
    return os.environ.get("ICESINK_REGISTRY_URL", "http://127.0.0.1:8081/apis/ccompat/v7")


def generate(path: Path, n: int) -> float:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    # A timeout (the client has none) and the plain {topic}-value subject: confluent-kafka 2.16's
    # default strategy asks for associations, which Apicurio does not serve.
    client = SchemaRegistryClient({"url": registry_url(), "timeout": 10})
    ser = AvroSerializer(client, json.dumps(SCHEMA), conf={"subject.name.strategy": topic_subject_name_strategy})
    ctx = SerializationContext("bench.events", MessageField.VALUE)
    base = dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
    values = []
    for i in range(n):
        values.append(
            ser(
                {
                    "id": i, "user_id": i % 50_000, "session": f"{i:08x}-0000-4000-8000-{i:012x}",
                    "event_type": ("view", "cart", "purchase")[i % 3], "ts": base + dt.timedelta(milliseconds=i),
                    "day": dt.date(2024, 1, 2), "amount": Decimal(i % 100_000) / 100, "currency": "EUR",
                    "country": ("DE", "FR", "JP", "US")[i % 4], "device": "mobile", "os": ("ios", "android")[i % 2],
                    "app_version": "3.14.1", "price": i * 0.25, "quantity": i % 7, "promoted": i % 5 == 0,
                    "note": None if i % 4 else f"note {i}",
                    "page_url": f"https://shop.example.com/catalog/item/{i % 9973}?ref=home",
                    "user_agent": f"Mozilla/5.0 (Linux; Android 14) App/3.14.{i % 10}",
                },
                ctx,
            )
        )  # fmt: skip
    pq.write_table(pa.table({"value": pa.array(values, pa.binary())}), path)
    return sum(len(v) for v in values) / n


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
    from pyspark.sql import functions as F

    df = spark.read.parquet(str(path))
    return df.select(
        F.lit("bench.events").alias("topic"),
        F.lit(0).alias("partition"),
        F.monotonically_increasing_id().alias("offset"),
        F.current_timestamp().alias("timestamp"),
        F.lit(None).cast("binary").alias("key"),
        "value",
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
    ).repartition(2)


def run_icesink(spark: Any, path: Path) -> Any:
    from pyspark.sql import functions as F

    from icesink.batch.decode import bad_records, good_rows
    from icesink.batch.decode.avro import AvroDecoder
    from icesink.kafka.registry import RegistrySettings, registry_for

    records = kafka_like(spark, path).cache()
    records.count()
    decoder = AvroDecoder(registry_for(RegistrySettings(url=registry_url())))

    def once() -> None:
        # What BatchHandler does: one planning aggregate (offsets and schema ids per topic-partition),
        # then decode and write.
        plan = records.groupBy("topic", "partition").agg(
            F.min("offset"), F.max("offset"), F.count(F.lit(1)), F.collect_set(decoder.plan_column()).alias("keys")
        )
        keys = sorted({bytes(k) for r in plan.collect() for k in r.keys})
        prepared = decoder.prepare(records, keys)
        parsed = prepared.parse(prepared.schema)
        good_rows(parsed, prepared.schema).write.format("noop").mode("overwrite").save()

    def check() -> None:
        prepared = decoder.prepare(records)
        assert bad_records(prepared.parse(prepared.schema)).count() == 0

    return once, check


def run_pandas_udf(spark: Any, path: Path) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    from icesink.batch.decode.avro import AvroDecoder
    from icesink.kafka.registry import RegistrySettings, registry_for

    records = kafka_like(spark, path).cache()
    records.count()
    prepared = AvroDecoder(registry_for(RegistrySettings(url=registry_url()))).prepare(records)
    schema = prepared.schema  # the seed hard-codes this; taken from the same writer schema here
    url = registry_url()
    state: dict[str, Any] = {}

    def deserializer() -> Any:  # one per Python worker, as in seed 000
        if "d" not in state:
            from confluent_kafka.schema_registry import SchemaRegistryClient
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            state["d"] = AvroDeserializer(SchemaRegistryClient({"url": url, "timeout": 10}), schema_str=None)
        return state["d"]

    @pandas_udf(schema)  # type: ignore[call-overload]
    def decode(values: pd.Series) -> pd.DataFrame:
        from confluent_kafka.serialization import MessageField, SerializationContext

        d = deserializer()
        ctx = SerializationContext("bench.events", MessageField.VALUE)
        rows = [d(bytes(v), ctx) for v in values]
        for row in rows:  # fastavro yields uuid.UUID for the uuid logical type; Arrow wants str
            row["session"] = str(row["session"])
        return pd.DataFrame(rows)

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


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                total += next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def measure(approach: str, path: Path, n: int, repeat: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        approach,
        "--data",
        str(path),
        "--records",
        str(n),
        "--repeat",
        str(repeat),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    runs = [json.loads(line) for line in proc.stdout or [] if line.startswith("{")]
    rc = proc.wait()
    done.set()
    t.join()
    if rc != 0 or not runs:
        raise SystemExit(f"{approach} run failed (exit {rc})")
    rates = [r["records"] / r["seconds"] for r in runs]
    for r, rate in zip(runs, rates, strict=True):
        print(f"  {approach:<10} {r['seconds']:7.2f} s  {rate:>10,.0f} records/s")
    return {"approach": approach, "rates": rates, "median": statistics.median(rates), "peak_rss_mb": peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--worker", choices=["icesink", "pandas_udf"], help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.data, args.records, args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "values.parquet"
        started = time.perf_counter()
        size = generate(path, args.records)
        took = time.perf_counter() - started
        print(f"{args.records:,} values from AvroSerializer, {size:.0f} bytes on average ({took:.0f} s)")
        results = [measure(a, path, args.records, args.repeat) for a in ("icesink", "pandas_udf")]
    ice, udf = results
    print()
    print(f"{'approach':<12}{'median records/s':>18}{'peak RSS (MB)':>16}")
    for r in results:
        print(f"{r['approach']:<12}{r['median']:>18,.0f}{r['peak_rss_mb']:>16,.0f}")
    ratio = ice["median"] / udf["median"]
    print(f"ratio icesink / pandas_udf: {ratio:.1f}x (targets: >= 3x, icesink >= 250,000 records/s)")


if __name__ == "__main__":
    main()
