"""The end-to-end benchmark's report: summaries of the runs, the ratios, the met/MISSED verdicts
against the targets, report.json and report.md (the quick look; docs/performance.md is render.py's)."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any


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
    steps = [k for k in batches[0] if k != "records"]
    return {k: statistics.median(b.get(k, 0.0) for b in batches) for k in steps}


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


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
    }
    batches = [b for r in runs for b in r["batches"]]
    if batches:
        out["batches_per_run"] = statistics.median(len(r["batches"]) for r in runs)
        out["breakdown"] = breakdown(batches)
        out["batch_timings"] = [r["batches"] for r in runs]
    return out


def summarize_freshness(measured: dict[str, Any], interval: int, rate: int) -> dict[str, Any]:
    res = next(r for r in measured["results"] if r["kind"] == "freshness")
    lat = res["latencies"]
    busy = [b for b in res["batches"] if b["records"]]
    return {
        "interval": interval,
        "rate": rate,
        "records": len(lat),
        "p50": pct(lat, 0.5),
        "p99": pct(lat, 0.99),
        "batch_p50": statistics.median(b["total"] for b in busy) if busy else float("nan"),
        "breakdown": breakdown(busy) if busy else {},
        "batches": res["batches"],
    }


def ratios(throughput: dict[str, Any]) -> dict[str, tuple[float, str]]:
    out: dict[str, tuple[float, str]] = {}
    ice = throughput.get("icesink-avro")
    if ice:
        for other, target in (("seed000", ">= 3"), ("builtin", ">= 1")):
            if other in throughput:
                out[f"icesink-avro / {other}"] = (ice["median"] / throughput[other]["median"], target)
        if "icesink-cdc" in throughput:
            out["icesink-cdc / icesink-avro"] = (throughput["icesink-cdc"]["median"] / ice["median"], ">= 0.5")
    return out


# What each approach is, in tables for people.
LABELS = {
    "icesink-avro": "icesink, Avro, append",
    "icesink-json": "icesink, JSON, append",
    "icesink-cdc": "icesink, Avro, changelog (CDC)",
    "seed000": "pandas_udf + AvroDeserializer, Iceberg append",
    "builtin": "Spark's Iceberg streaming sink (from_avro)",
}

# Outside Kafka (read), the write and the commit: planning, decoding on the driver, schema work,
# dead letters, the consumer-group commit.
OVERHEAD_STEPS = ("plan", "decode", "prepare", "dead_letters", "group")


def verdicts(report: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(target, measured, wanted, met) for each of the targets that this run measured."""
    t, out = report["targets"], []
    thr = report["throughput"]
    ice = thr.get("icesink-avro")
    if ice:
        out.append(("icesink append records/s", f"{ice['median']:,.0f}", f">= {t['append_records_s']:,.0f}",
                    ice["median"] >= t["append_records_s"]))  # fmt: skip
        for other, key, name in (("builtin", "vs_builtin", "Spark's Iceberg sink"),
                                 ("seed000", "vs_seed000", "pandas_udf + AvroDeserializer")):  # fmt: skip
            if other in thr:
                ratio = ice["median"] / thr[other]["median"]
                per_cpu = ice["per_cpu_s"] / thr[other]["per_cpu_s"]
                got = f"{ratio:.2f}x ({per_cpu:.1f}x per CPU-second)"
                out.append((f"icesink / {name}", got, f">= {t[key]}x", ratio >= t[key]))
        if "icesink-cdc" in thr:
            ratio = thr["icesink-cdc"]["median"] / ice["median"]
            out.append(("CDC / append", f"{ratio:.2f}x", f">= {t['cdc_vs_append']}x", ratio >= t["cdc_vs_append"]))
        b = ice.get("breakdown", {})
        overhead = sum(b.get(k, 0.0) for k in OVERHEAD_STEPS)
        name = "per-batch overhead outside Kafka, the write and the commit (plan + decode + prepare + dead letters)"
        out.append((name, f"{overhead:.2f} s", f"<= {t['overhead_s']} s", overhead <= t["overhead_s"]))
    for f in report.get("freshness", []):
        if f["interval"] == 1:
            want = t["freshness_p50_s_1s_trigger"]
            name = f"p50 freshness at a 1 s trigger ({f['rate']:,} records/s in)"
            out.append((name, f"{f['p50']:.2f} s", f"<= {want} s", f["p50"] <= want))
    return out


def markdown(report: dict[str, Any]) -> str:
    """report.md: every figure of the run in tables, for a quick look."""
    r = report
    cores = r.get("machine", {}).get("cores", r.get("cores"))
    lines = [
        f"# icesink benchmark, {r['date']}",
        "",
        f"{r['records']:,} records per approach (Avro ~{r['value_bytes']['avro']:.0f} bytes, "
        f"JSON ~{r['value_bytes']['json']:.0f} bytes), maxOffsetsPerTrigger {r['max_per_trigger']:,}, "
        f"median of {r['repeat']} run(s), Spark local[2], whole stack on {cores} cores.",
        "",
        "| approach | median records/s | runs | records per CPU-s | peak RSS driver JVM | peak RSS Python workers |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for a in r["throughput"].values():
        runs = ", ".join(f"{x:,.0f}" for x in a["rates"])
        lines.append(
            f"| {a['approach']} | {a['median']:,.0f} | {runs} | {a['per_cpu_s']:,.0f} | {a['peak_jvm_mb']:,.0f} MB | "
            f"{a['peak_workers_mb']:,.0f} MB |"
        )
    if r["ratios"]:
        lines += ["", "| ratio | value | target |", "| --- | ---: | ---: |"]
        lines += [f"| {k} | {v:.2f}x | {target} |" for k, (v, target) in r["ratios"].items()]
    for name, a in r["throughput"].items():
        if "breakdown" in a:
            b = a["breakdown"]
            lines += [
                "",
                f"Per-batch steps of {name} (median seconds per batch, {a['batches_per_run']:.0f} batches per run):",
                "",
                "| " + " | ".join(b) + " |",
                "| " + " | ".join("---:" for _ in b) + " |",
                "| " + " | ".join(f"{v:.2f}" for v in b.values()) + " |",
            ]
    if r.get("freshness"):
        lines += [
            "",
            "| trigger | input rate | records | p50 latency | p99 latency | batch time p50 |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {f['interval']} s | {f['rate']:,}/s | {f['records']:,} | {f['p50']:.2f} s | {f['p99']:.2f} s | "
            f"{f['batch_p50']:.2f} s |"
            for f in r["freshness"]
        ]
    met = verdicts(r)
    if met:
        lines += ["", "| target | measured | wanted | |", "| --- | ---: | ---: | --- |"]
        lines += [f"| {name} | {got} | {want} | {'met' if ok else 'MISSED'} |" for name, got, want, ok in met]
    if r.get("sweep"):
        lines += ["", "| maxOffsetsPerTrigger | records/s |", "| ---: | ---: |"]
        lines += [f"| {p['max_per_trigger']:,} | {p['median']:,.0f} |" for p in r["sweep"]]
        lines += ["", "![throughput by trigger size](sweep.png)"]
    return "\n".join(lines) + "\n"


def plot_sweep(points: list[dict[str, Any]], target: float, path: Path) -> None:
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
    ax.axhline(target, color="grey", linestyle="--", linewidth=1, label="target")
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
