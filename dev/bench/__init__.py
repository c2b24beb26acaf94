"""icesink's benchmarks, run with `python -m dev.bench` (see `--help`, and docs/performance.md):

  e2e     (the default) icesink against a pandas_udf decoder and Spark's own Iceberg sink, end to
          end: throughput, CPU, memory, per-batch steps, freshness, trigger sizes; writes report.json
  decode  icesink's Avro decoder against a pandas_udf calling AvroDeserializer per row
  cdc     the same change stream as an append table and as a changelog table; reads as delete
          files accumulate
  render  docs/performance.md from a report.json

spec.py says what a run is, workloads.py produces the topics, runners.py and baselines.py run the
approaches in worker processes, measure.py samples them, report.py summarises and judges the
figures, render.py writes the page.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CATALOG = "icesink"
