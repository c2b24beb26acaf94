"""What icesink is compared with, each run as icesink is (warm-up, then timed runs into fresh tables).

`seed000` is a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None) per row (the
first prototype's decoder, "seed 000"), appended each batch with Spark's Iceberg writer
(foreachBatch + writeTo().append()). `builtin` is Spark's Iceberg streaming sink
(writeStream.format("iceberg"), append) after a JVM from_avro on the value with its 5-byte header
stripped; on the JSON topic (`builtin-json`) after a from_json with the records' fixed schema.
`noop` scans the Avro topic into Spark's noop sink: the most any sink can take from Kafka here.
`builtin-freshness` is Spark's sink with a processing-time trigger at a steady input rate.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd  # module level: pandas_udf reads the UDF's type hints from its globals

from dev.bench import CATALOG
from dev.bench.freshness import commit_offset, file_latencies, input_span, steady_input, wait_until, warm_up
from dev.bench.measure import emit, query_batches, query_jobs, tree_cpu, trigger_phases, written
from dev.bench.spec import WorkerSpec
from dev.bench.workloads import JSON_DDL, SCHEMA
from dev.kit.endpoints import KAFKA, REGISTRY_URL


def deserializer_udf(schema: Any, url: str, *, nulls_on_error: bool = True) -> Any:
    """A pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None) per row, one
    deserializer per Python worker; with `nulls_on_error` a record that fails becomes a row of
    nulls (the prototype's behaviour, kept so that the work is the same)."""
    from pyspark.sql.functions import pandas_udf

    state: dict[str, Any] = {}

    def deserializer() -> Any:
        if "d" not in state:
            from confluent_kafka.schema_registry import SchemaRegistryClient
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            state["d"] = AvroDeserializer(SchemaRegistryClient({"url": url, "timeout": 10}), schema_str=None)
        return state["d"]

    @pandas_udf(schema)  # type: ignore[call-overload]
    def decode(values: pd.Series) -> pd.DataFrame:
        from confluent_kafka.serialization import MessageField, SerializationContext

        d = deserializer()
        ctx = SerializationContext("bench", MessageField.VALUE)
        rows = []
        for v in values:
            try:
                row = d(bytes(v), ctx)
                row["session"] = str(row["session"])  # fastavro yields uuid.UUID; Arrow wants str
            except Exception:
                if not nulls_on_error:
                    raise
                row = {f.name: None for f in schema.fields}
            rows.append(row)
        return pd.DataFrame(rows, columns=schema.fieldNames())

    return decode


def row_struct(spark: Any, variant: str) -> Any:
    """The rows' Spark type: what from_avro makes of the Avro schema, or the JSON records' fixed one."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    if variant == "json":
        return spark.createDataFrame([], JSON_DDL).schema
    empty = spark.createDataFrame([], "value binary")
    return empty.select(from_avro(F.col("value"), json.dumps(SCHEMA)).alias("r")).schema["r"].dataType


def decoded_rows(source: Any, variant: str, struct: Any) -> Any:
    """The Kafka records' values as rows, decoded in the JVM."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    if variant == "json":
        return source.select(F.from_json(F.col("value").cast("string"), struct).alias("r")).select("r.*")
    return source.select(from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("r")).select("r.*")


def kafka_stream(spark: Any, topic: str, max_per_trigger: int) -> Any:
    """The topic from its start; no maxOffsetsPerTrigger when `max_per_trigger` is 0 (freshness)."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    if max_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_per_trigger))
    return reader.load()


def fresh_table(spark: Any, spec: WorkerSpec, struct: Any) -> str:
    ns = f"{spec.tag}_{spec.kind.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    table = f"{CATALOG}.{ns}.events"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{ns}")
    spark.createDataFrame([], struct).writeTo(table).using("iceberg").tableProperty("format-version", "2").create()
    return table


def start_query(spark: Any, spec: WorkerSpec, topic: str, table: str | None, checkpoint: str, struct: Any) -> Any:
    """The baseline's available-now query, started."""
    from pyspark.sql import functions as F

    source = kafka_stream(spark, topic, spec.max_per_trigger)
    if spec.kind == "noop":
        writer = source.writeStream.format("noop").option("checkpointLocation", checkpoint)
        return writer.trigger(availableNow=True).start()
    if spec.kind == "seed000":
        decode = deserializer_udf(struct, REGISTRY_URL)

        def append(batch: Any, _: int) -> None:
            batch.select(decode(F.col("value")).alias("r")).select("r.*").writeTo(table).append()

        q = source.writeStream.option("checkpointLocation", checkpoint).foreachBatch(append)
        return q.trigger(availableNow=True).start()
    writer = iceberg_writer(decoded_rows(source, spec.variant, struct), checkpoint)
    return writer.trigger(availableNow=True).toTable(table)


def iceberg_writer(rows: Any, checkpoint: str) -> Any:
    return rows.writeStream.format("iceberg").outputMode("append").option("checkpointLocation", checkpoint)


def run_baseline(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """A warm-up run on the warm-up topic, then `repeat` timed catch-up runs, each into a fresh
    table (none for `noop`)."""
    struct = row_struct(spark, spec.variant)
    for i in range(-1, spec.repeat):
        warm = i < 0
        topic = spec.warm_topic if warm else spec.topic
        table = None if spec.kind == "noop" else fresh_table(spark, spec, struct)
        checkpoint = str(tmp / f"cp-{uuid.uuid4().hex}")
        started, cpu = time.perf_counter(), tree_cpu()
        query = start_query(spark, spec, topic, table, checkpoint, struct)
        query.awaitTermination()
        seconds, cpu = time.perf_counter() - started, tree_cpu() - cpu
        if warm:
            continue
        batches = query_batches(query)
        outcome: dict[str, Any] = {"rows": sum(b["records"] for b in batches)}
        if table is not None:
            outcome = {"rows": spark.sql(f"SELECT count(*) FROM {table}").first()[0], **written(spark, table)}
        emit(kind="run", seconds=seconds, cpu=cpu, records=spec.records, batches=[], n_batches=len(batches),
             spark_jobs=query_jobs(spark, query), catalog_requests=None, table=table, **outcome)  # fmt: skip


def run_builtin_freshness(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    """Spark's Iceberg sink with a processing-time trigger while a separate process produces at a
    steady rate (no maxOffsetsPerTrigger, as icesink's freshness run)."""
    struct = row_struct(spark, "avro")
    table = fresh_table(spark, spec, struct)
    rows = decoded_rows(kafka_stream(spark, spec.topic, 0), "avro", struct)
    writer = iceberg_writer(rows, str(tmp / f"cp-{uuid.uuid4().hex}"))
    query = writer.trigger(processingTime=f"{spec.interval} seconds").toTable(table)

    def holds(records: int) -> bool:
        # From the snapshot's summary, as icesink's run checks its offsets: no scan beside the query.
        last = f"SELECT summary['total-records'] AS n FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1"
        rows = spark.sql(last).collect()
        return bool(rows) and int(rows[0].n) >= records

    since = warm_up(spec.topic, lambda ends: holds(sum(ends.values())))
    warm_batches, warm_triggers = len(query_batches(query)), len(query.recentProgress)
    produced = sum(steady_input(spec).values())
    wait_until(lambda: holds(produced), lambda: query.exception() is not None, spec.interval)
    if query.exception() is not None:
        raise SystemExit(f"builtin freshness run failed: {query.exception()}")
    batches = query_batches(query)[warm_batches:]
    phases = trigger_phases(query, warm_triggers)
    query.stop()
    latencies = file_latencies(spark, table, spec.topic)
    emit(kind="freshness", interval=spec.interval, rate=spec.rate, latencies=latencies, batches=batches,
         span=input_span(spark, spec.topic, since), phases=phases,
         commit_offset=commit_offset(spark, table, spec.topic, since, spec.interval))  # fmt: skip
