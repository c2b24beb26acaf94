"""docs/performance.md from a report.json: the method text of performance.md.tmpl, the figures,
dates and machine of the report (`python -m dev.bench render REPORT.json`)."""

from __future__ import annotations

import math
from pathlib import Path
from string import Template
from typing import Any

from dev.bench import REPO
from dev.bench.report import (
    LABELS,
    efficiency_table,
    fmt,
    freshness_table,
    load,
    memory_text,
    small_text,
    table,
    value_sizes,
    verdict_table,
)

TEMPLATE = Path(__file__).with_name("performance.md.tmpl")
NOT_MEASURED = "Not measured in this report: run it with `--report` to add its figures."
STEPS = {
    "total": "total",
    "read": "read (Kafka, cache, plan aggregate)",
    "ranges": "ranges (Spark's offset ranges)",
    "plan": "plan",
    "direct": "direct (JSON decode and write, one job)",
    "decode": "decode (driver)",
    "prepare": "prepare",
    "write": "write (executors)",
    "dead_letters": "dead letters",
    "commit": "commit",
    "group": "consumer group",
}


def machine_text(m: dict[str, Any]) -> str:
    cpu = f" {m['cpu']}" if m.get("cpu") else ""
    mem = f", {m['memory_gib']} GiB" if m.get("memory_gib") else ""
    return f"a {m.get('cores', '?')}-core{cpu} machine{mem} ({m.get('os', 'Linux')})"


def plural(n: float, word: str) -> str:
    return f"{n:,.0f} {word}" + ("" if n == 1 else "es" if word.endswith("h") else "s")


def thousands(x: float) -> str:
    return f"{x / 1000:.1f}k"


def e2e_figures(r: dict[str, Any]) -> str:
    if not any(r.get(k) for k in ("throughput", "freshness", "small", "memory", "sweep")):
        return NOT_MEASURED
    thr = r.get("throughput", {})
    cap = r["max_per_trigger"]
    batches = (
        f" in {plural(math.ceil(r['records'] / cap), 'batch')} (`maxOffsetsPerTrigger` {cap:,})"
        if cap
        else ", icesink at its default cap, the Spark baselines uncapped"
    )
    load = r.get("machine", {}).get("load_1m_at_start")
    lines = [
        f"Measured {r.get('started', '')} to {r['date']}, `{r.get('command', 'python -m dev.bench')}` "
        f"({r.get('seconds', 0) / 60:.0f} min"
        + (f"; load average {load} at the start" if load is not None else "")
        + f"). Each catch-up run reads {r['records']:,} records{batches}; medians of {plural(r['repeat'], 'run')}; "
        f"values: {value_sizes(r)}."
    ]
    if r.get("note"):
        lines += ["", r["note"]]
    lines += throughput_lines(thr) if thr else ["", "Catch-up throughput: not measured in this report."]
    lines += ["", "The targets, each judged on figures of this report:", "", *verdict_table(r)]
    lines += steps_lines(thr)
    lines += ["", *freshness_lines(r.get("freshness", []))]
    lines += ["", small_text(r["small"]) if r.get("small") else "Tiny and empty batches: not measured in this report."]
    lines += ["", memory_text(r["memory"]) if r.get("memory") else "Memory at 2M records: not measured in this report."]
    lines += ["", sweep_text(r.get("sweep", []))]
    return "\n".join(lines)


def throughput_lines(thr: dict[str, Any]) -> list[str]:
    # From the process's start: the Kafka Connect sink's worker launch, icesink's cold runs (report.summarize_runs).
    rows = [
        [LABELS.get(k, k), f"{a['median']:,.0f}", ", ".join(thousands(x) for x in a["rates"]) or "—",
         f"{a['per_cpu_s']:,.0f}", fmt(a.get("process_median")), fmt(a.get("process_per_cpu_s")),
         f"{a['peak_jvm_mb']:,.0f} MB", f"{a['peak_workers_mb']:,.0f} MB"]
        for k, a in thr.items()
    ]  # fmt: skip
    header = ["approach", "median records/s", "runs", "records per CPU-second", "records/s from process start",
              "per CPU-second from process start", "peak RSS JVM", "peak RSS Python workers"]  # fmt: skip
    return [
        "",
        *table(header, rows, left=(0, 2)),
        "",
        "What each approach costs (medians per run; — where it does not apply or was not measured):",
        "",
        *efficiency_table(thr),
    ]


def steps_lines(thr: dict[str, Any]) -> list[str]:
    steps = {k: a for k, a in thr.items() if a.get("breakdown")}
    if not steps:
        return []
    present = [k for a in steps.values() for k in a["breakdown"]]
    # Steps the job added since this page last learned their names are shown too, by their names.
    keys = [k for k in STEPS if k in present] + [k for k in dict.fromkeys(present) if k not in STEPS]
    rows = [[LABELS.get(k, k), *(f"{a['breakdown'].get(s, 0.0):.2f}" for s in keys)] for k, a in steps.items()]
    per_run = {plural(a.get("batches_per_run", 1), "batch") for a in steps.values()}
    title = f"Per-batch steps (seconds, median; {' or '.join(sorted(per_run))} per run; for JSON, decode is the "
    return ["", title + "schema inference):", "", *table(["variant", *(STEPS.get(s, s) for s in keys)], rows)]


def freshness_lines(fresh: list[dict[str, Any]]) -> list[str]:
    if not fresh:
        return ["Freshness: not measured in this report."]
    f0 = fresh[0]
    seconds = f" for {f0['records'] // max(f0['rate'], 1)} s" if f0.get("records") else ""
    return [
        f"Freshness (records/s produced at a steady rate{seconds}; latency from each record's Kafka timestamp to "
        "the commit of the snapshot that holds it; `produced` is the rate the producer achieved). A batch that "
        "takes longer than the trigger interval makes the next ones queue behind it.",
        "",
        *freshness_table(fresh),
    ]


def sweep_text(sweep: list[dict[str, Any]]) -> str:
    if not sweep:
        return "Trigger-size sweep: not measured in this report."
    points = ", ".join(f"{p['max_per_trigger']:,} per batch: {p['median']:,.0f} records/s" for p in sweep)
    return (
        f"Trigger-size sweep (icesink, Avro, {sweep[0]['records']:,} records): {points}; `sweep.png` in the "
        "output folder plots it. The fixed cost per batch is what a small trigger pays again and again."
    )


def decode_figures(d: dict[str, Any] | None) -> str:
    if not d:
        return NOT_MEASURED
    names = {"icesink": "icesink", "pandas_udf": "pandas_udf + AvroDeserializer"}
    rows = [[names.get(x["approach"], x["approach"]), f"{x['median']:,.0f}", f"{x['peak_rss_mb']:,.0f} MB"]
            for x in d["results"]]  # fmt: skip
    rows.append(["ratio", f"**{d['ratio']:.1f}x**", ""])
    header = ["approach", f"median records/s ({plural(d['repeat'], 'run')})", "peak RSS, driver JVM + Python workers"]
    return "\n".join(
        [
            f"{d['records']:,} values (~{d['value_bytes']:.0f} bytes) on {machine_text(d.get('machine', {}))}, "
            f"{d['date']}:",
            "",
            *table(header, rows),
            "",
            f"icesink's peak includes the {d['records']:,} records it caches to time decoding alone.",
        ]
    )


def cdc_figures(c: dict[str, Any] | None) -> str:
    if not c:
        return NOT_MEASURED
    t = c["throughput"]
    first, second = c["modes"]
    lines = [
        f"{c['records']:,} changes over {c['keys']:,} keys in {c['batches']} batches per run, on "
        f"{machine_text(c.get('machine', {}))}, {c['date']}:",
        "",
    ]
    label = {"changelog": "changelog (reduce, equality deletes, RowDelta)"}
    rows = [[label.get(m, m), f"{t['median'][m]:,.0f}"] for m in (first, second)]
    target = " (target ≥ 0.50)" if [first, second] == ["append", "changelog"] else ""
    rows.append([f"{second} / {first}", f"**{t['ratio']:.2f}**{target}"])
    lines += table(["mode", f"median records/s ({plural(c['repeat'], 'run')})"], rows)
    if c.get("reads"):
        rows = [
            [str(x["batches"]), f"{x['read_s_median']:.2f} s", str(x["data_files"]), str(x["equality_delete_files"])]
            for x in c["reads"]
        ]
        header = [
            "CDC batches committed",
            "full read through Spark (median of 3)",
            "data files",
            "equality-delete files",
        ]
        lines += ["", *table(header, rows)]
        lines += [
            "",
            "Reads slow down linearly with the delete files; compact (`icesink maintain`, or `rewrite_data_files` "
            "with `delete-file-threshold`) once a table has a few dozen.",
        ]
    return "\n".join(lines)


def fanout_figures(f: dict[str, Any] | None) -> str:
    """The fan-out benchmark's section (dev/bench/fanout.py --report)."""
    if not f:
        return NOT_MEASURED
    lines = [
        f"Measured {f.get('started', '')} to {f['date']}, `{f['command']}` ({f['minutes']:.0f} min), on "
        f"{machine_text(f.get('machine', {}))}: the median of {plural(f['repeat'], 'batch')} after the one that "
        "creates the tables; the one-table batch takes the same records from one topic into one table.",
        "",
    ]
    rows = []
    for size in f["sizes"]:
        for side in size["sides"]:
            steps = side["steps"]
            split = " / ".join(f"{steps.get(k, 0):.2f}" for k in ("plan", "direct", "commit"))
            label = side["side"].replace("default table_parallelism, ", "")
            rows.append([
                f"{size['tables']:,} x {size['records_per_table']}", label, f"{side['first_s']:.2f} s",
                f"{side['median_s']:.2f} s", f"{size['one_table_s']:.2f} s", f"**{side['vs_one_table']:.1f}x**", split,
                str(side["catalog_requests"]), "{jvm:,} / {workers:,} / {all:,} MB".format(**side["peak_rss_mb"]),
            ])  # fmt: skip
    header = [
        "tables x records", "commit", "first batch (creates them)", "median batch", "one table, same records", "ratio",
        "plan / direct / commit (s)", "catalog requests", "peak RSS: JVM / Python workers / all",
    ]  # fmt: skip
    lines += table(header, rows)
    return "\n".join(lines)


def soak_figures(f: dict[str, Any] | None) -> str:
    """The soak's section (dev/bench/soak.py --report): a changelog table under a steady stream,
    with the job's maintenance and without."""
    if not f:
        return NOT_MEASURED
    lines = [
        f"Measured {f.get('started', '')} to {f['date']}, `{f['command']}` ({f['minutes']:.0f} min), on "
        f"{machine_text(f.get('machine', {}))}: {f['rate']:,} changes/s over {f['keys']:,} keys for "
        f"{f['run_minutes']:.0f} min per side; Trino's reads are the median of 3 (5 for the compacted table "
        "read idle).",
    ]
    # The compacted table read under load, at each read of the side after the one compacted.
    under_load = next(
        (refs for s in f["sides"] if (refs := [r["reference"] for r in s["reads"] if "reference" in r])), []
    )
    if under_load:
        lines.append(
            '"compacted": the first side\'s table fully compacted after its run, read at each read of the second '
            "side, under that job's load (the n-th read of each side against the n-th of these); at the end, "
            "with every job stopped, that table read idle."
        )
    header = ["minute", "count(*)", "compacted", "vs compacted", "lookup by key", "compacted", "vs compacted",
              "delete files", "data files"]  # fmt: skip
    idle = next((s["compacted"] for s in f["sides"] if "count_s" in s["compacted"]), {})
    idle = {"count_s": math.nan, "lookup_s": math.nan, **idle}
    for side in f["sides"]:
        rows = []
        for i, r in enumerate(side["reads"]):
            ref = under_load[i] if not r.get("end") and i < len(under_load) else idle
            rows.append([
                "end" if r.get("end") else f"{r['minute']:.0f}", f"{r['count_s']:.2f} s", f"{ref['count_s']:.2f} s",
                f"**{r['count_s'] / ref['count_s']:.1f}x**", f"{r['lookup_s']:.2f} s", f"{ref['lookup_s']:.2f} s",
                f"**{r['lookup_s'] / ref['lookup_s']:.1f}x**", str(r["delete_files"]), str(r["data_files"]),
            ])  # fmt: skip
        compacted = side["compacted"]
        if "count_s" in compacted:
            c = compacted
            rows.append(["compacted (idle)", f"{c['count_s']:.2f} s", "", "1x", f"{c['lookup_s']:.2f} s", "", "1x",
                         str(c["delete_files"]), str(c["data_files"])])  # fmt: skip
        rss = {k: ("-" if v is None else f"{v:,}") for k, v in side["rss_mb"].items() if not k.startswith("growth")}
        pct, later = side["rss_mb"]["growth_after_10_pct"], side["rss_mb"].get("growth_after_20_pct")
        growth = "" if pct is None else f", {pct:+.1f}% from minute 10 to the end"
        growth += "" if later is None else f" ({later:+.1f}% from minute 20)"
        parts = side.get("rss_parts_mb") or {}
        if parts.get("minute_10") and parts.get("end"):
            growth += "; driver JVM / Python workers / the rest: " + ", then ".join(
                f"{p['jvm']:,} / {p['workers']:,} / {p['rest']:,} MB at {when.replace('_', ' ')}"
                for when, p in parts.items() if p
            )  # fmt: skip
        lines += [
            "",
            f"**{side['side']}** (`maintenance.tables: {side['maintenance_tables']}`): freshness p50 "
            f"{side['freshness_p50_s']} s, p99 {side['freshness_p99_s']} s; {side['batches']:,} batches, "
            f"{side['maintenance_runs']} maintenance runs ({side['maintenance_failures']} failed); at most "
            f"{side['max_live_delete_files']} live delete files (sampled every 10 s), {side['dangling_at_end']} "
            f"dangling at the end; the job's process tree {rss['minute_2']} MB at minute 2, {rss['minute_10']} "
            f"MB at minute 10, {rss['end']} MB at the end (peak {rss['peak']}){growth}.",
            "",
            *table(header, rows),
        ]
    by = {s["side"]: s for s in f["sides"]}
    if {"maintained", "unmaintained"} <= set(by) and by["unmaintained"]["freshness_p50_s"]:
        ratio = by["maintained"]["freshness_p50_s"] / by["unmaintained"]["freshness_p50_s"]
        lines += ["", f"Freshness p50 with the job's maintenance against without: **{ratio:.2f}x**."]
    return "\n".join(lines)


def render(report: dict[str, Any], report_path: str) -> str:
    machine = report.get("machine") or {"cores": report.get("cores")}
    text = Template(TEMPLATE.read_text()).substitute(
        report_path=report_path,
        machine=machine_text(machine),
        e2e_figures=e2e_figures(report),
        decode_figures=decode_figures(report.get("decode")),
        cdc_figures=cdc_figures(report.get("cdc")),
        fanout_figures=fanout_figures(report.get("fanout")),
        soak_figures=soak_figures(report.get("soak")),
    )
    return text.rstrip() + "\n"


def render_file(path: Path, out: Path) -> None:
    shown = path.resolve()
    shown_path = str(shown.relative_to(REPO)) if shown.is_relative_to(REPO) else str(path)
    out.write_text(render(load(path), shown_path))
