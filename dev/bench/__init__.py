"""icesink's benchmarks, run with `python -m dev.bench` (see `--help`, and docs/performance.md):

  e2e     (the default) icesink against a pandas_udf decoder, Spark's own Iceberg sink (Avro and
          JSON) and the Kafka scan into Spark's noop sink, end to end: throughput, CPU, Spark jobs,
          bytes and files written, memory, per-batch steps, freshness beside Spark's sink, tiny and
          empty batches, trigger sizes, and the targets met or MISSED; writes report.json
  decode  icesink's Avro decoder against a pandas_udf calling AvroDeserializer per row
  cdc     the same change stream as an append table and as a changelog table; reads as delete
          files accumulate
  render  docs/performance.md from a report.json

spec.py says what a run is (and the targets), workloads.py produces the topics, runners.py (icesink)
and baselines.py (the others) run the approaches in worker processes, freshness.py measures
latencies for both, measure.py samples them, report.py summarises and judges the figures,
render.py writes the page.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CATALOG = "icesink"
