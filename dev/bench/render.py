"""docs/performance.md from a report.json: the method text of performance.md.tmpl, the figures,
dates and machine of the report (`python -m dev.bench render REPORT.json`)."""

from __future__ import annotations

import math
from pathlib import Path
from string import Template
from typing import Any

from dev.bench import REPO
from dev.bench.report import LABELS, load, verdicts

TEMPLATE = Path(__file__).with_name("performance.md.tmpl")
NOT_MEASURED = "Not measured in this report: run it with `--report` to add its figures."
STEPS = {
    "total": "total",
    "read": "read (Kafka, cache, plan aggregate)",
    "plan": "plan",
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


def table(header: list[str], rows: list[list[str]], left: tuple[int, ...] = (0,)) -> list[str]:
    """A markdown table; the columns in `left` are left-aligned, the others right-aligned."""
    align = ["---" if i in left else "---:" for i in range(len(header))]
    return [f"| {' | '.join(r)} |" for r in (header, align, *rows)]


def plural(n: float, word: str) -> str:
    return f"{n:,.0f} {word}" + ("" if n == 1 else "es" if word.endswith("h") else "s")


def thousands(x: float) -> str:
    return f"{x / 1000:.1f}k"


def e2e_figures(r: dict[str, Any]) -> str:
    thr = r.get("throughput", {})
    if not thr:
        return NOT_MEASURED
    batches = math.ceil(r["records"] / r["max_per_trigger"])
    load = r.get("machine", {}).get("load_1m_at_start")
    lines = [
        f"Measured {r.get('started', '')} to {r['date']}, `{r.get('command', 'python -m dev.bench')}` "
        f"({r.get('seconds', 0) / 60:.0f} min"
        + (f"; load average {load} at the start" if load is not None else "")
        + f"). Each catch-up run reads {r['records']:,} records in {plural(batches, 'batch')} "
        f"(`maxOffsetsPerTrigger` {r['max_per_trigger']:,}); medians of {plural(r['repeat'], 'run')}; Avro values "
        f"~{r['value_bytes']['avro']:.0f} bytes, JSON ~{r['value_bytes']['json']:.0f} bytes."
    ]
    if r.get("note"):
        lines += ["", r["note"]]
    rows = [
        [LABELS.get(k, k), f"{a['median']:,.0f}", ", ".join(thousands(x) for x in a["rates"]) or "—",
         f"{a['per_cpu_s']:,.0f}", f"{a['peak_jvm_mb']:,.0f} MB", f"{a['peak_workers_mb']:,.0f} MB"]
        for k, a in thr.items()
    ]  # fmt: skip
    header = ["approach", "median records/s", "runs", "records per CPU-second", "peak RSS driver JVM",
              "peak RSS Python workers"]  # fmt: skip
    lines += ["", *table(header, rows, left=(0, 2))]
    met = verdicts(r)
    if met:
        rows = [[name, got, want, "met" if ok else "MISSED"] for name, got, want, ok in met]
        lines += ["", *table(["target", "measured", "wanted", ""], rows, left=(0, 3))]
    steps = {k: a for k, a in thr.items() if a.get("breakdown")}
    if steps:
        keys = [k for k in STEPS if any(k in a["breakdown"] for a in steps.values())]
        rows = [[LABELS.get(k, k), *(f"{a['breakdown'].get(s, 0.0):.2f}" for s in keys)] for k, a in steps.items()]
        per_run = {plural(a.get("batches_per_run", 1), "batch") for a in steps.values()}
        title = f"Per-batch steps (seconds, median; {' or '.join(sorted(per_run))} per run; for JSON, decode is the "
        lines += ["", title + "schema inference):", "", *table(["variant", *(STEPS[s] for s in keys)], rows)]
    lines += ["", freshness_text(r.get("freshness", [])), "", sweep_text(r.get("sweep", []))]
    return "\n".join(lines)


def freshness_text(fresh: list[dict[str, Any]]) -> str:
    if not fresh:
        return "Freshness: not measured in this report."
    f0 = fresh[0]
    parts = [
        f"{f['interval']} s trigger p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s (a batch takes {f['batch_p50']:.2f} s)"
        for f in fresh
    ]
    seconds = f" for {f0['records'] // max(f0['rate'], 1)} s" if f0.get("records") else ""
    return (
        f"Freshness ({f0['rate']:,} records/s produced{seconds}, latency from each record's Kafka timestamp to "
        f"the commit of the snapshot that holds it): {'; '.join(parts)}. A batch that takes longer than the "
        "trigger interval makes the next ones queue behind it."
    )


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


def render(report: dict[str, Any], report_path: str) -> str:
    machine = report.get("machine") or {"cores": report.get("cores")}
    text = Template(TEMPLATE.read_text()).substitute(
        report_path=report_path,
        machine=machine_text(machine),
        e2e_figures=e2e_figures(report),
        decode_figures=decode_figures(report.get("decode")),
        cdc_figures=cdc_figures(report.get("cdc")),
    )
    return text.rstrip() + "\n"


def render_file(path: Path, out: Path) -> None:
    shown = path.resolve()
    shown_path = str(shown.relative_to(REPO)) if shown.is_relative_to(REPO) else str(path)
    out.write_text(render(load(path), shown_path))
