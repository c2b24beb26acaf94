"""The end-to-end benchmark's report: summaries of the runs, the ratios, the verdicts on the targets
(met, MISSED, or not measured when their parts did not run), report.json and report.md (the quick
look; docs/performance.md is render.py's). Older reports lack some figures: every reader here takes
them as not measured."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from dev.bench.spec import BATCH_COUNTS, TARGETS, Targets

Verdict = tuple[str, str, str, str]  # target, measured, wanted, status
MET, MISSED, NOT_MEASURED = "met", "MISSED", "not measured"
NONE = "—"


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def machine() -> dict[str, Any]:
    """What the figures were measured on: they only compare with figures of the same machine."""
    cpu, mem_kb = "", 0
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
        mem_kb = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    except OSError:
        pass
    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load_1m_at_start": round(os.getloadavg()[0], 2),
    }


def breakdown(batches: list[dict[str, Any]]) -> dict[str, float]:
    """Median seconds per batch of each step (and of the whole batch)."""
    steps = [k for k in batches[0] if k != "records" and k not in BATCH_COUNTS]
    return {k: statistics.median(b.get(k, 0.0) for b in batches) for k in steps}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def median_of(values: Iterable[float | None]) -> float | None:
    """The median, None when a value is missing (not counted) or there are none."""
    got = list(values)
    return statistics.median(v for v in got if v is not None) if got and None not in got else None


def per_run(runs: list[dict[str, Any]], figure: Callable[[dict[str, Any]], float | None]) -> float | None:
    """The median over the runs of a figure; None when a run lacks what it needs (older reports,
    or an approach it does not apply to)."""
    try:
        return median_of(figure(r) for r in runs)
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def n_batches(run: dict[str, Any]) -> int:
    return int(run.get("n_batches", len(run["batches"])))


def efficiency(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per approach: CPU, Spark jobs and catalog requests per batch, and what it wrote."""
    return {
        "cpu_s_per_m": per_run(runs, lambda r: r["cpu"] / r["records"] * 1e6),
        "spark_jobs_per_batch": per_run(runs, lambda r: r["spark_jobs"] / n_batches(r)),
        "catalog_requests_per_batch": per_run(runs, lambda r: r["catalog_requests"] / n_batches(r)),
        "bytes_per_record": per_run(runs, lambda r: r["data_bytes"] / r["rows"]),
        "files_per_batch": per_run(runs, lambda r: r["data_files"] / n_batches(r)),
    }


def summarize_runs(name: str, measured: dict[str, Any], records: int) -> dict[str, Any]:
    runs = [r for r in measured["results"] if r["kind"] == "run"]
    rates = [records / r["seconds"] for r in runs]
    per_cpu = [records / r["cpu"] for r in runs]
    out: dict[str, Any] = {
        "approach": name,
        "rates": rates,
        "median": statistics.median(rates),
        "per_cpu_s": statistics.median(per_cpu),
        "rows": [r["rows"] for r in runs],
        "peak_jvm_mb": measured["peak_jvm_mb"],
        "peak_workers_mb": measured["peak_workers_mb"],
        "batches_per_run": statistics.median(n_batches(r) for r in runs),
        **efficiency(runs),
    }
    # From the process's start (the Kafka Connect sink's worker launch; icesink's cold runs).
    timed = [r for r in runs if r.get("process_seconds")]
    if timed:
        out["process_median"] = statistics.median(records / r["process_seconds"] for r in timed)
        out["process_per_cpu_s"] = statistics.median(records / r["process_cpu"] for r in timed)
    batches = [b for r in runs for b in r["batches"]]
    if batches:
        out["breakdown"] = breakdown(batches)
        out["batch_timings"] = [r["batches"] for r in runs]
    return out


def summarize_freshness(measured: dict[str, Any], interval: int, rate: int, approach: str) -> dict[str, Any]:
    res = next(r for r in measured["results"] if r["kind"] == "freshness")
    lat = res["latencies"]
    busy = [b for b in res["batches"] if b["records"]]
    span = res.get("span") or 0.0
    return {
        "approach": approach,
        "interval": interval,
        "rate": rate,
        "produced_rate": len(lat) / span if span else None,
        "records": len(lat),
        "p50": pct(lat, 0.5),
        "p99": pct(lat, 0.99),
        "batch_p50": statistics.median(b["total"] for b in busy) if busy else float("nan"),
        "breakdown": breakdown(busy) if busy else {},
        "phases": res.get("phases", {}),
        "commit_offset": res.get("commit_offset"),
        "maintenance": res.get("maintenance"),  # the job's own maintenance runs meanwhile, their seconds
        "batches": res["batches"],
    }


def summarize_small(measured: dict[str, Any], records: int, trigger: int) -> dict[str, Any]:
    """Tiny batches end to end (their timings), and the batch handler on an empty micro-batch."""
    run = next(r for r in measured["results"] if r["kind"] == "run")
    empty = next(r for r in measured["results"] if r["kind"] == "empty")["seconds"]
    batches = run["batches"]
    totals = [b["total"] for b in batches]
    return {
        "records": records,
        "max_per_trigger": trigger,
        "batches": len(batches),
        "batch_p50": statistics.median(totals) if totals else None,
        "batch_p90": pct(totals, 0.9) if totals else None,
        "spark_jobs_p50": median_of(b.get("spark_jobs") for b in batches),
        "catalog_requests_p50": median_of(b.get("catalog_requests") for b in batches),
        "breakdown": breakdown(batches) if batches else {},
        "empty_p50": statistics.median(empty),
        "empty_max": max(empty),
        "empty_seconds": empty,
        "batch_timings": batches,
    }


def summarize_memory(measured: dict[str, Any], records: int, trigger: int) -> dict[str, Any]:
    return {**summarize_runs("memory", measured, records), "records": records, "max_per_trigger": trigger}


# (numerator, denominator, the Targets field of its threshold, if any)
RATIOS = (
    ("icesink-avro", "builtin", "avro_vs_builtin"),
    ("icesink-avro", "noop", "avro_vs_noop"),
    ("icesink-json", "builtin-json", "json_vs_builtin_json"),
    ("icesink-cdc", "icesink-avro", "cdc_vs_avro"),
    ("icesink-avro-days", "icesink-avro", "partitioned_vs_avro"),
    ("icesink-avro-nested", "icesink-avro", "nested_vs_avro"),
    ("icesink-avro-nested", "icesink-avro-nested-jvm", None),
    ("icesink-avro-flat", "icesink-avro", "nested_vs_avro"),
    ("icesink-avro-flat", "icesink-avro-flat-jvm", None),
    ("icesink-json-flat", "icesink-json", "nested_vs_avro"),
    ("icesink-json-flat", "icesink-json-flat-jvm", None),
    ("icesink-cdc-bucket", "icesink-avro", "partitioned_cdc_vs_avro"),
    ("icesink-json-upsert", "icesink-avro", "json_upsert_vs_avro"),
    ("icesink-debezium", "icesink-avro", "debezium_vs_avro"),
    ("icesink-avro-headers", "icesink-avro", None),
    ("icesink-avro-headers", "icesink-avro-headers-jvm", None),
    ("icesink-debezium-json", "icesink-avro", "debezium_vs_avro"),
    ("icesink-avro-routed", "icesink-avro", "routed_vs_avro"),
    ("icesink-json-routed", "icesink-avro", "routed_vs_avro"),
    ("icesink-json-routed", "icesink-json", None),
    ("icesink-avro", "seed000", None),
    ("icesink-avro", "kc-sink", "append_vs_kc_sink"),
    ("icesink-avro-days", "kc-sink-days", "append_vs_kc_sink"),
    ("icesink-json", "kc-sink-json", "append_vs_kc_sink"),
)
# icesink's appends and the Kafka Connect sink on the same topic: (icesink part, its cold part, the sink's part)
KC_PAIRS = (
    ("icesink-avro", "icesink-avro-cold", "kc-sink"),
    ("icesink-avro-days", "icesink-avro-days-cold", "kc-sink-days"),
    ("icesink-json", "icesink-json-cold", "kc-sink-json"),
)


def ratios(throughput: dict[str, Any]) -> dict[str, tuple[float, str]]:
    """Records/s ratios of the approaches that ran, with their targets."""
    out: dict[str, tuple[float, str]] = {}
    for a, b, key in RATIOS:
        if a in throughput and b in throughput:
            want = f">= {getattr(TARGETS, key)}" if key else NONE
            out[f"{a} / {b}"] = (throughput[a]["median"] / throughput[b]["median"], want)
    return out


# What each approach is, in tables for people.
LABELS = {
    "icesink-avro": "icesink, Avro, append",
    "icesink-json": "icesink, JSON, append",
    "icesink-cdc": "icesink, Avro, changelog (CDC)",
    "icesink-avro-days": "icesink, Avro, append, days(ts)",
    "icesink-avro-nested": "icesink, Avro with arrays, maps and records in arrays, append",
    "icesink-avro-nested-jvm": "icesink-avro-nested through Spark's from_avro (decode.direct_avro false)",
    "icesink-avro-flat": "icesink, Avro with two nested records, into a flattened table (flatten_separator _)",
    "icesink-avro-flat-jvm": "icesink-avro-flat through Spark's from_avro (decode.direct_avro false)",
    "icesink-json-flat": "icesink, JSON with two nested objects, into a flattened table (flatten_separator _)",
    "icesink-json-flat-jvm": "icesink-json-flat through Spark's from_json (decode.direct_json false)",
    "icesink-cdc-bucket": "icesink, Avro, changelog, bucket(16, id)",
    "icesink-json-upsert": "icesink, JSON, upsert by id",
    "icesink-debezium": "icesink, Debezium Avro (keys, tombstones), changelog, bucket(16, id)",
    "icesink-debezium-json": "icesink, Debezium Connect JSON (schemas on, keys, tombstones), changelog, bucket(16, id)",
    "icesink-avro-routed": "icesink-avro routed by a field (event_type) into a table per value, dynamic routing",
    "icesink-json-routed": "icesink-json routed by a field (event_type) into a table per value, dynamic routing",
    "icesink-avro-headers": "icesink-avro's records with the schema id in a __value_schema_id header, append",
    "icesink-avro-headers-jvm": "icesink-avro-headers through Spark's from_avro (decode.direct_avro false)",
    "seed000": "pandas_udf + AvroDeserializer, Iceberg append",
    "builtin": "Spark's Iceberg streaming sink (from_avro)",
    "builtin-json": "Spark's Iceberg streaming sink (from_json)",
    "noop": "Kafka scan into Spark's noop sink (the limit)",
    "noop-debezium-json": "the Debezium Connect JSON topic's Kafka scan into Spark's noop sink",
    "icesink-avro-cold": "icesink-avro, one run per process (from the process's start)",
    "icesink-avro-days-cold": "icesink-avro-days, one run per process (from the process's start)",
    "icesink-json-cold": "icesink-json, one run per process (from the process's start)",
    "kc-sink": "Apache Iceberg Kafka Connect sink 1.11.0, Avro (Apicurio's converter), append",
    "kc-sink-days": "Apache Iceberg Kafka Connect sink 1.11.0, Avro, append, days(ts)",
    "kc-sink-json": "Apache Iceberg Kafka Connect sink 1.11.0, JSON (schemas off), append",
}
FRESHNESS_LABELS = {
    "icesink": "icesink",
    "builtin": "Spark's Iceberg sink",
    "icesink-debezium": "icesink, Debezium Avro changes (changes/s), changelog, bucket(16, id)",
}


def targets_of(report: dict[str, Any]) -> dict[str, Any]:
    """The report's own thresholds; an older report's (other names) give way to today's."""
    names = {f.name for f in fields(Targets)}
    return {**asdict(TARGETS), **{k: v for k, v in report.get("targets", {}).items() if k in names}}


def judged(ok: bool) -> str:
    return MET if ok else MISSED


def ratio_verdict(name: str, thr: dict[str, Any], a: str, b: str, want: float, stretch: float = 0) -> Verdict:
    wanted = f">= {want}x" + (f" (stretch {stretch}x)" if stretch else "")
    if a not in thr or b not in thr:
        return name, NONE, wanted, NOT_MEASURED
    ratio = thr[a]["median"] / thr[b]["median"]
    status = judged(ratio >= want) + (", stretch too" if stretch and ratio >= stretch else "")
    return name, f"{ratio:.2f}x ({thr[a]['median']:,.0f} / {thr[b]['median']:,.0f} records/s)", wanted, status


def throughput_verdicts(thr: dict[str, Any], t: dict[str, Any]) -> list[Verdict]:
    json_cpu = thr.get("icesink-json", {}).get("per_cpu_s")
    cpu_row: Verdict = ("JSON append: icesink-json records per CPU-second", NONE,
                        f">= {t['json_records_per_cpu_s']:,.0f}", NOT_MEASURED)  # fmt: skip
    if json_cpu is not None:
        cpu_row = (*cpu_row[:1], f"{json_cpu:,.0f}", cpu_row[2], judged(json_cpu >= t["json_records_per_cpu_s"]))
    return [
        ratio_verdict("Avro append: icesink-avro / builtin", thr, "icesink-avro", "builtin",
                      t["avro_vs_builtin"], t["avro_vs_builtin_stretch"]),
        ratio_verdict("Avro append: icesink-avro / noop (the Kafka scan)", thr, "icesink-avro", "noop",
                      t["avro_vs_noop"]),
        ratio_verdict("JSON append: icesink-json / builtin-json", thr, "icesink-json", "builtin-json",
                      t["json_vs_builtin_json"]),
        cpu_row,
        ratio_verdict("CDC: icesink-cdc / icesink-avro", thr, "icesink-cdc", "icesink-avro", t["cdc_vs_avro"]),
        *shape_verdicts(thr, t),
        *kc_sink_verdicts(thr, t),
        bytes_verdict(thr, t["bytes_per_record_vs_builtin"]),
    ]  # fmt: skip


def shape_verdicts(thr: dict[str, Any], t: dict[str, Any]) -> list[Verdict]:
    """Issue 36's table shapes against the flat Avro append of the same run (reported only when run)."""
    shapes = [
        ("Partitioned append: icesink-avro-days / icesink-avro", "icesink-avro-days", "partitioned_vs_avro"),
        ("Nested Avro append: icesink-avro-nested / icesink-avro", "icesink-avro-nested", "nested_vs_avro"),
        ("Partitioned CDC: icesink-cdc-bucket / icesink-avro", "icesink-cdc-bucket", "partitioned_cdc_vs_avro"),
        ("JSON upsert: icesink-json-upsert / icesink-avro", "icesink-json-upsert", "json_upsert_vs_avro"),
        ("Debezium CDC: icesink-debezium / icesink-avro", "icesink-debezium", "debezium_vs_avro"),
        (
            "Debezium Connect JSON CDC: icesink-debezium-json / icesink-avro",
            "icesink-debezium-json",
            "debezium_vs_avro",
        ),
        ("Routed by a field, Avro: icesink-avro-routed / icesink-avro", "icesink-avro-routed", "routed_vs_avro"),
        ("Routed by a field, JSON: icesink-json-routed / icesink-avro", "icesink-json-routed", "routed_vs_avro"),
    ]
    return [
        ratio_verdict(name, thr, part, "icesink-avro", t.get(key, 0.0)) for name, part, key in shapes if part in thr
    ]


def kc_sink_verdicts(thr: dict[str, Any], t: dict[str, Any]) -> list[Verdict]:
    """icesink's appends against the Kafka Connect sink on the same topic (reported when the sink ran):
    records/s and records per CPU-second from the query's start (the sink: from the connector's
    creation), and from the process's start (icesink's cold part; the sink: from its worker's launch)."""
    out: list[Verdict] = []
    for part, cold, sink in KC_PAIRS:
        if sink not in thr:
            continue
        want, parity = t.get("append_vs_kc_sink", 1.5), t.get("append_per_cpu_vs_kc_sink", 1.0)
        out.append(ratio_verdict(f"{part} / {sink}, records/s from query start", thr, part, sink, want))
        rows = [
            (f"{part} / {sink}, records per CPU-second from query start", part, "per_cpu_s"),
            (f"{part} / {sink}, records/s from process start", cold, "process_median"),
            (f"{part} / {sink}, records per CPU-second from process start", cold, "process_per_cpu_s"),
        ]
        for name, mine, key in rows:
            theirs, ours = thr[sink].get(key), thr.get(mine, {}).get(key)
            if ours is None or theirs is None:
                out.append((name, NONE, f">= {parity}x", NOT_MEASURED))
                continue
            got = f"{ours / theirs:.2f}x ({ours:,.0f} / {theirs:,.0f})"
            out.append((name, got, f">= {parity}x", judged(ours / theirs >= parity)))
    return out


def bytes_verdict(thr: dict[str, Any], factor: float) -> Verdict:
    name = "bytes written per record: icesink-avro vs builtin (same rows)"
    wanted = "<= builtin's" if factor == 1 else f"<= {factor}x builtin's"
    ice, spark = (thr.get(k, {}).get("bytes_per_record") for k in ("icesink-avro", "builtin"))
    if ice is None or spark is None:
        return name, NONE, wanted, NOT_MEASURED
    return name, f"{ice:.1f} vs {spark:.1f} bytes", wanted, judged(ice <= factor * spark)


def find_freshness(fresh: list[dict[str, Any]], approach: str, interval: int, rate: int) -> dict[str, Any] | None:
    for f in fresh:
        if f.get("approach", "icesink") == approach and f["interval"] == interval and f["rate"] == rate:
            return f
    return None


def freshness_verdicts(fresh: list[dict[str, Any]], t: dict[str, Any]) -> list[Verdict]:
    interval, rate = t["freshness_interval_s"], t["freshness_rate"]
    where = f"at a {interval} s trigger, {rate:,} records/s"
    ice, spark = (find_freshness(fresh, a, interval, rate) for a in ("icesink", "builtin"))
    out: list[Verdict] = []
    for q, key in (("p50", "freshness_p50_s"), ("p99", "freshness_p99_s")):
        wanted = f"<= {t[key]} s"
        seconds, status = (f"{ice[q]:.2f} s", judged(ice[q] <= t[key])) if ice else (NONE, NOT_MEASURED)
        out.append((f"freshness {q} {where}", seconds, wanted, status))
    debezium = find_freshness(fresh, "icesink-debezium", interval, rate)
    limit = t.get("debezium_freshness_p50_s", 1.5)
    got = (f"{debezium['p50']:.2f} s", judged(debezium["p50"] <= limit)) if debezium else (NONE, NOT_MEASURED)
    name = f"freshness p50 at a {interval} s trigger, {rate:,} Debezium changes/s"
    out.append((name, got[0], f"<= {limit} s", got[1]))
    name, wanted = f"freshness {where}: icesink vs Spark's sink (p50, p99)", "no worse than Spark's sink"
    if ice and spark:
        both = f"{ice['p50']:.2f} / {ice['p99']:.2f} s vs {spark['p50']:.2f} / {spark['p99']:.2f} s"
        out.append((name, both, wanted, judged(ice["p50"] <= spark["p50"] and ice["p99"] <= spark["p99"])))
    else:
        out.append((name, NONE, wanted, NOT_MEASURED))
    return out


def small_verdicts(small: dict[str, Any] | None, t: dict[str, Any]) -> list[Verdict]:
    records = f"{small['max_per_trigger']:,}" if small else "1,000"
    rows = [
        (f"a {records}-record batch end to end (median)", "batch_p50", t["small_batch_s"]),
        ("an empty batch (median of the batch handler's calls)", "empty_p50", t["empty_batch_s"]),
    ]
    out: list[Verdict] = []
    for name, key, limit in rows:
        got = small.get(key) if small else None
        status = judged(got <= limit) if got is not None else NOT_MEASURED
        out.append((name, NONE if got is None else f"{got:.2f} s", f"<= {limit} s", status))
    return out


def verdicts(report: dict[str, Any]) -> list[Verdict]:
    """Every target, measured in this run or not: (target, measured, wanted, met/MISSED/not measured)."""
    t = targets_of(report)
    return [
        *throughput_verdicts(report.get("throughput", {}), t),
        *freshness_verdicts(report.get("freshness", []), t),
        *small_verdicts(report.get("small"), t),
    ]


def table(header: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    """A markdown table; the columns in `left` are left-aligned, the others right-aligned."""
    align = ["---" if i in left else "---:" for i in range(len(header))]
    return [f"| {' | '.join(r)} |" for r in (header, align, *rows)]


def fmt(x: float | None, spec: str = ",.0f", unit: str = "") -> str:
    return NONE if x is None or x != x else f"{x:{spec}}{unit}"


def cpu_s_per_m(a: dict[str, Any]) -> float | None:
    """CPU-seconds per million records (older reports have only its inverse, records per CPU-second)."""
    got = a.get("cpu_s_per_m")
    return got if got is not None else 1e6 / a["per_cpu_s"] if a.get("per_cpu_s") else None


def efficiency_table(thr: dict[str, Any]) -> list[str]:
    header = ["approach", "CPU-s per 1M records", "Spark jobs per batch", "catalog requests per batch",
              "batches per run", "bytes written per record", "data files per batch"]  # fmt: skip
    rows = [
        [LABELS.get(k, k), fmt(cpu_s_per_m(a), ".1f"), fmt(a.get("spark_jobs_per_batch"), ".1f"),
         fmt(a.get("catalog_requests_per_batch"), ".1f"), fmt(a.get("batches_per_run"), ".0f"),
         fmt(a.get("bytes_per_record"), ".1f"), fmt(a.get("files_per_batch"), ".1f")]
        for k, a in thr.items()
    ]  # fmt: skip
    return table(header, rows)


def maintenance_text(runs: list[float] | None) -> str:
    """The job's own maintenance runs during a freshness run: how many, and their seconds."""
    if runs is None:
        return NONE  # not recorded (Spark's sink; reports from before)
    return f"{len(runs)} ({', '.join(f'{s:.1f}' for s in runs)} s)" if runs else "0"


def freshness_table(fresh: list[dict[str, Any]]) -> list[str]:
    # The trigger (Spark's `triggerExecution`) and when its snapshot was committed, measured the
    # same way for both sinks; "commit at": seconds from the trigger's start (see
    # freshness.commit_offset).
    header = ["sink", "trigger", "input rate", "produced", "records", "p50 latency", "p99 latency", "trigger p50",
              "commit at p50", "its maintenance runs"]  # fmt: skip
    rows = [
        [FRESHNESS_LABELS.get(f.get("approach", "icesink"), f.get("approach", "")), f"{f['interval']} s",
         f"{f['rate']:,}/s", fmt(f.get("produced_rate"), ",.0f", "/s"), f"{f['records']:,}",
         fmt(f["p50"], ".2f", " s"), fmt(f["p99"], ".2f", " s"),
         fmt(f.get("phases", {}).get("triggerExecution"), ".2f", " s"), fmt(f.get("commit_offset"), ".2f", " s"),
         maintenance_text(f.get("maintenance"))]
        for f in fresh
    ]  # fmt: skip
    return table(header, rows, left=(0, 1, 9))


def small_text(s: dict[str, Any]) -> str:
    jobs = s.get("spark_jobs_p50")
    calls = s.get("catalog_requests_p50")
    counts = "" if jobs is None else f", {jobs:.0f} Spark job(s) and {fmt(calls, '.0f')} catalog request(s) each"
    steps = ", ".join(f"{k} {v:.2f}" for k, v in s.get("breakdown", {}).items() if k != "total" and v >= 0.005)
    return (
        f"Tiny batches: {s['records']:,} Avro records at `maxOffsetsPerTrigger` {s['max_per_trigger']:,}, "
        f"{s['batches']} batches, end to end {fmt(s['batch_p50'], '.2f')} s per batch (median; p90 "
        f"{fmt(s['batch_p90'], '.2f')} s; steps {steps} s){counts}. An empty micro-batch through the batch handler: "
        f"{s['empty_p50']:.3f} s (median of {len(s['empty_seconds'])} calls, slowest {s['empty_max']:.3f} s)."
    )


def memory_text(m: dict[str, Any]) -> str:
    return (
        f"Memory: icesink-avro, {m['records']:,} records at `maxOffsetsPerTrigger` {m['max_per_trigger']:,} "
        f"({m['batches_per_run']:.0f} batch(es), {m['median']:,.0f} records/s): peak RSS driver JVM "
        f"{m['peak_jvm_mb']:,.0f} MB, Python workers {m['peak_workers_mb']:,.0f} MB."
    )


def verdict_table(report: dict[str, Any]) -> list[str]:
    return table(["target", "measured", "wanted", ""], [list(v) for v in verdicts(report)], left=(0, 3))


def value_sizes(r: dict[str, Any]) -> str:
    names = {"avro": "Avro", "json": "JSON", "cdc": "CDC", "debezium": "Debezium CDC"}
    sizes = [f"{names.get(v, v)} ~{b:.0f} bytes" for v, b in r["value_bytes"].items() if b]
    return ", ".join(sizes) or "no topic pre-loaded"


def markdown(report: dict[str, Any]) -> str:
    """report.md: every figure of the run in tables, for a quick look."""
    r = report
    cores = r.get("machine", {}).get("cores", r.get("cores"))
    thr = r["throughput"]
    lines = [
        f"# icesink benchmark, {r['date']}",
        "",
        f"{r['records']:,} records per approach ({value_sizes(r)}), maxOffsetsPerTrigger {r['max_per_trigger']:,}, "
        f"median of {r['repeat']} run(s), Spark local[2], whole stack on {cores} cores.",
    ]
    if thr:
        header = ["approach", "median records/s", "runs", "records per CPU-s", "peak RSS driver JVM",
                  "peak RSS Python workers"]  # fmt: skip
        rows = [[a["approach"], f"{a['median']:,.0f}", ", ".join(f"{x:,.0f}" for x in a["rates"]),
                 f"{a['per_cpu_s']:,.0f}", f"{a['peak_jvm_mb']:,.0f} MB", f"{a['peak_workers_mb']:,.0f} MB"]
                for a in thr.values()]  # fmt: skip
        lines += ["", *table(header, rows, left=(0, 2)), "", *efficiency_table(thr)]
    if r["ratios"]:
        rows = [[k, f"{v:.2f}x", target] for k, (v, target) in r["ratios"].items()]
        lines += ["", *table(["ratio", "value", "target"], rows)]
    for name, a in thr.items():
        if "breakdown" in a:
            b = a["breakdown"]
            title = f"Per-batch steps of {name} (median seconds per batch, {a['batches_per_run']:.0f} batches per run):"
            lines += ["", title, "", *table(list(b), [[f"{v:.2f}" for v in b.values()]], left=())]
    if r.get("freshness"):
        lines += ["", *freshness_table(r["freshness"])]
    if r.get("small"):
        lines += ["", small_text(r["small"])]
    if r.get("memory"):
        lines += ["", memory_text(r["memory"])]
    lines += ["", *verdict_table(r)]
    if r.get("sweep"):
        rows = [[f"{p['max_per_trigger']:,}", f"{p['median']:,.0f}"] for p in r["sweep"]]
        lines += ["", *table(["maxOffsetsPerTrigger", "records/s"], rows, left=())]
        lines += ["", "![throughput by trigger size](sweep.png)"]
    return "\n".join(lines) + "\n"


def plot_sweep(points: list[dict[str, Any]], limit: float | None, path: Path) -> None:
    """The sweep's records/s by trigger size, with the Kafka scan's (the noop part), if measured."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [p["max_per_trigger"] for p in points]
    ax.plot(xs, [p["median"] for p in points], marker="o", label="icesink (Avro, append)")
    ax.set_xscale("log")
    ax.set_xlabel("maxOffsetsPerTrigger (records per micro-batch)")
    ax.set_ylabel("records/s")
    ax.set_title("icesink catch-up throughput by trigger size (local[2], whole stack on 2 cores)")
    if limit:
        ax.axhline(limit, color="grey", linestyle="--", linewidth=1, label="Kafka scan into noop (the limit)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def merge_section(path: Path, name: str, section: dict[str, Any]) -> None:
    """Adds (or replaces) the section of a separate benchmark (decode, cdc) in a report.json, so
    that docs/performance.md renders from one file; the report is created if missing."""
    report = load(path) if path.exists() else {}
    report[name] = section
    path.write_text(json.dumps(report, indent=2) + "\n")
