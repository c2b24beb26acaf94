"""What icesink is compared with, each run as icesink is (warm-up, then timed runs into fresh tables).

`seed000` is a pandas_udf calling confluent-kafka's AvroDeserializer(schema_str=None) per row (the
first prototype's decoder, "seed 000"), appended each batch with Spark's Iceberg writer
(foreachBatch + writeTo().append()). `builtin` is Spark's Iceberg streaming sink
(writeStream.format("iceberg"), append) after a JVM from_avro on the value with its 5-byte header
stripped.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd  # module level: pandas_udf reads the UDF's type hints from its globals

from dev.bench import CATALOG
from dev.bench.measure import emit, tree_cpu
from dev.bench.spec import WorkerSpec
from dev.bench.workloads import SCHEMA
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


def avro_struct(spark: Any) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    empty = spark.createDataFrame([], "value binary")
    return empty.select(from_avro(F.col("value"), json.dumps(SCHEMA)).alias("r")).schema["r"].dataType


def kafka_stream(spark: Any, topic: str, max_per_trigger: int) -> Any:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", KAFKA)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
    )


def run_baseline(spark: Any, tmp: Path, spec: WorkerSpec) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    struct = avro_struct(spark)
    for i in range(-1, spec.repeat):
        warm = i < 0
        topic = spec.warm_topic if warm else spec.topic
        ns = f"{spec.tag}_{spec.kind}_{uuid.uuid4().hex[:6]}"
        table = f"{CATALOG}.{ns}.events"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{ns}")
        spark.createDataFrame([], struct).writeTo(table).using("iceberg").tableProperty("format-version", "2").create()
        source = kafka_stream(spark, topic, spec.max_per_trigger)
        checkpoint = str(tmp / f"cp-{ns}")
        started, cpu = time.perf_counter(), tree_cpu()
        if spec.kind == "seed000":
            decode = deserializer_udf(struct, REGISTRY_URL)

            def append(batch: Any, _: int, decode: Any = decode, table: str = table) -> None:
                batch.select(decode(F.col("value")).alias("r")).select("r.*").writeTo(table).append()

            q = source.writeStream.option("checkpointLocation", checkpoint).foreachBatch(append)
            query = q.trigger(availableNow=True).start()
        else:
            decoded = source.select(from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("r"))
            writer = (
                decoded.select("r.*")
                .writeStream.format("iceberg")
                .outputMode("append")
                .option("checkpointLocation", checkpoint)
            )
            query = writer.trigger(availableNow=True).toTable(table)
        query.awaitTermination()
        seconds, cpu = time.perf_counter() - started, tree_cpu() - cpu
        rows = spark.sql(f"SELECT count(*) FROM {table}").first()[0]
        if not warm:
            emit(kind="run", seconds=seconds, cpu=cpu, records=spec.records, rows=rows, batches=[], table=table)
