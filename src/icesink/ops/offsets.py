"""`icesink offsets show` and `icesink offsets reset`: the offsets the tables hold against Kafka's,
and restarting the job from them or from a chosen point.

No Spark: the tables are read through PyIceberg, Kafka through confluent-kafka, so they answer in
seconds. A reset changes nothing until its plan is complete and accepted (a rewind needs --rewind),
then lowers the rewound tables' offsets (with an audit record), moves the checkpoint aside and
leaves the starting offsets the next `icesink run` starts from.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import sys
from collections.abc import Mapping
from typing import Any

from icesink.config import Config, load_config
from icesink.errors import ResetRefusedError, TableNotFoundError, TopicNotFoundError, UsageError
from icesink.model import Offsets, TableRef
from icesink.ops import checkpoints
from icesink.ops import reset as reset_plan
from icesink.ops.reports import Marks


def read_states(args: argparse.Namespace, live: bool = False) -> tuple[Config, Any, list[Any], Marks]:
    """The config, the catalog (PyIceberg), each table's state and Kafka's watermarks; `live`
    counts live rows (reads the key columns of tables with delete files)."""
    from icesink.iceberg import pyiceberg
    from icesink.kafka import admin

    config = load_config(args.config)
    namespace = args.namespace or config.tables.namespace
    catalog = pyiceberg.catalog_for(config)
    loaded = pyiceberg.tables(catalog, namespace, args.table or None)
    states = [pyiceberg.state_of(ref, t, live=live) for ref, t in loaded]
    tps = {tp for s in states for tp in s.offsets}
    marks = admin.watermarks(config, sorted(tps))
    return config, catalog, states, marks


def offsets_show(args: argparse.Namespace) -> int:
    from icesink.ops import reports  # PyIceberg and pyarrow load only for the commands that read tables

    _, _, states, marks = read_states(args)
    rows = reports.offset_rows(states, marks)
    if args.json:
        print(reports.as_json(rows))
    elif not rows:
        print("no table holds icesink offsets yet")
    else:
        columns = ["table", "topic", "partition", "committed", "earliest", "end", "lag", "snapshot_id", "committed_at"]
        print(reports.text_table(rows, columns))
        lost = [r for r in rows if r["lost"]]
        for r in lost:
            print(
                f"warning: {r['table']} {r['topic']}/{r['partition']}: {r['lost']} record(s) after offset "
                f"{r['committed']} were removed by retention before the table got them",
                file=sys.stderr,
            )
    return 0


def offsets_reset(args: argparse.Namespace) -> int:
    from icesink.kafka import admin

    # Every table counts for where to start (from-tables is the lowest offset ANY table needs);
    # --table only limits which tables a rewind lowers.
    only = set(args.table or [])
    args.table = None
    config, catalog, states, _ = read_states(args)
    marks = admin.subscribed(config)
    held = {s.table: s.offsets for s in states}
    _check_names(args, config, marks, held, only)
    plan = _plan(args, config, marks, held, only)
    refusal = reset_plan.refuse_rewinds(plan)
    if refusal and not args.rewind:
        raise ResetRefusedError(refusal)
    _print_plan(args, plan, marks)
    if args.dry_run:
        print("dry run: nothing changed", file=sys.stderr)
        return 0
    _apply(config, catalog, plan, held)
    return 0


def _check_names(
    args: argparse.Namespace, config: Config, marks: Marks, held: Mapping[TableRef, Offsets], only: set[str]
) -> None:
    """--topic and --table name topics the job subscribes to and tables of the namespace."""
    unknown = sorted(set(args.topic or []) - {tp.topic for tp in marks})
    if unknown:
        raise TopicNotFoundError(f"no topic {', '.join(unknown)} matching kafka.subscribe_pattern")
    missing = sorted(only - {ref.name for ref in held})
    if missing:
        raise TableNotFoundError(
            f"--table: no table {', '.join(missing)} in namespace {args.namespace or config.tables.namespace}"
        )


def _timestamp_ms(text: str) -> int:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--to-timestamp {text!r} is not an ISO time such as 2026-11-25T00:00:00Z") from None
    when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _plan(
    args: argparse.Namespace, config: Config, marks: Marks, held: Mapping[TableRef, Offsets], only: set[str]
) -> reset_plan.ResetPlan:
    from icesink.kafka import admin

    chosen = set(args.topic or [])
    mode = reset_plan.Mode("timestamp" if args.to_timestamp else args.mode)
    selected = {tp: m for tp, m in marks.items() if not chosen or tp.topic in chosen}
    at = None
    if mode is reset_plan.Mode.TIMESTAMP:
        at = admin.offsets_for_time(config, selected, _timestamp_ms(args.to_timestamp))
    plan = reset_plan.plan_reset(mode, held, selected, at)
    if chosen:
        others = {tp: m for tp, m in marks.items() if tp not in selected}
        plan = reset_plan.with_others_from_tables(plan, held, others)
    return reset_plan.only_tables(plan, only) if only else plan


def _print_plan(args: argparse.Namespace, plan: reset_plan.ResetPlan, marks: Marks) -> None:
    from icesink.ops import reports

    rows = reset_plan.rows(plan, marks)
    if args.json:
        print(reports.as_json(rows))
    else:
        print(f"reset ({plan.mode.value}): where `icesink run` starts each topic-partition")
        print(reports.text_table(rows, ["topic", "partition", "start", "earliest", "end"]))
    for note in plan.notes:
        print(f"warning: {note}", file=sys.stderr)
    for sk in plan.skips:
        print(
            f"warning: table {sk.table} {sk.tp}: skips {sk.records} record(s) ({sk.held} -> {sk.target})",
            file=sys.stderr,
        )
    for rw in plan.rewinds:
        print(
            f"rewind: table {rw.table} {rw.tp}: {rw.held} -> {rw.target} (re-ingests {rw.held - rw.target})",
            file=sys.stderr,
        )


def _apply(config: Config, catalog: Any, plan: reset_plan.ResetPlan, held: Mapping[TableRef, Offsets]) -> None:
    """Lowers the rewound tables' offsets, moves the checkpoint aside, writes the starting offsets."""
    from icesink.iceberg import pyiceberg

    location = config.job.checkpoint_location
    checkpoints.ensure_supported(location, config.s3)  # before anything changes
    by_table: dict[TableRef, list[reset_plan.Rewind]] = {}
    for rw in plan.rewinds:
        by_table.setdefault(rw.table, []).append(rw)
    for ref, rws in sorted(by_table.items()):
        table = catalog.load_table((ref.namespace, ref.name))
        audit = {
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "by": getpass.getuser(),
            "mode": plan.mode.value,
            "from": {str(r.tp): r.held for r in rws},
            "to": {str(r.tp): r.target for r in rws},
        }
        snapshot = pyiceberg.commit_rewind(table, plan.lowered(ref, held[ref]), audit)
        print(f"table {ref}: offsets lowered in snapshot {snapshot} (audit in {pyiceberg.REWIND_KEY})", file=sys.stderr)
    moved = checkpoints.move_aside(location, config.s3)
    if moved is not None:
        print(f"checkpoint {location} moved to {moved}", file=sys.stderr)
    written = checkpoints.write_starting(location, plan.spark_json(), config.s3)
    print(f"starting offsets written to {written}; the next `icesink run` starts there", file=sys.stderr)
