"""The commit takes each file's metrics from the footer its writer sent along (no read-back): they
must be what Iceberg reads from the file itself, or readers would skip files that hold their rows."""

from __future__ import annotations

from pyspark.sql import SparkSession

from dev.kit.kafka import create_topics, produce
from dev.kit.scenario import Scenario
from icesink.iceberg.file_descriptions import PARQUET, parquet_read_options
from icesink.iceberg.jvm import jvm
from icesink.iceberg.tables import IcebergCatalog
from icesink.job.query import Job
from icesink.model import TableRef


def test_file_metrics_committed_are_those_of_the_files(spark: SparkSession, scenario: Scenario) -> None:
    # The commit decodes the footers with Parquet as Iceberg's runtime jar relocates it; had the jar
    # moved it, the commit would take the slower way (a reader, and a Hadoop configuration, per file).
    assert parquet_read_options(jvm(spark)) is not None, f"no Parquet at {PARQUET} in the Iceberg runtime"
    topic = scenario.topic("sensors.20240305")
    create_topics(topic, partitions=2)
    produce(topic, [{"id": i, "name": f"s{i}" if i % 4 else None, "t": i / 7} for i in range(500)])
    Job(spark, scenario.config()).run()

    name = scenario.table("sensors")
    _, namespace, table_name = name.split(".")
    table = IcebergCatalog(spark, "icesink").load(TableRef(namespace, table_name))
    assert table is not None
    ice = jvm(spark).org.apache.iceberg
    config = ice.MetricsConfig.forTable(table)
    files = spark.sql(
        f"SELECT file_path, record_count, value_counts, null_value_counts, lower_bounds, upper_bounds FROM {name}.files"
    ).collect()
    assert len(files) >= 1
    for f in files:
        read = ice.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(f.file_path), config)
        assert f.record_count == read.recordCount()
        assert f.value_counts == {int(k): int(v) for k, v in dict(read.valueCounts()).items()}
        assert f.null_value_counts == {int(k): int(v) for k, v in dict(read.nullValueCounts()).items()}
        for committed, of_file in ((f.lower_bounds, read.lowerBounds()), (f.upper_bounds, read.upperBounds())):
            as_bytes = {int(k): bytes(ice.util.ByteBuffers.toByteArray(of_file.get(k))) for k in of_file.keySet()}
            assert {k: bytes(v) for k, v in committed.items()} == as_bytes
    assert spark.sql(f"SELECT count(*) FROM {name} WHERE id = 321").first()[0] == 1, "a filtered read finds its row"
