"""The operations commands: `icesink offsets show|reset`, `icesink status`, `icesink maintain`.

`offsets` and `status` need no Spark: the tables are read through PyIceberg, Kafka through
confluent-kafka, so they answer in seconds. `maintain` runs Iceberg's Spark procedures.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from icesink.config import load_config
from icesink.errors import IcesinkError


def _states(args: argparse.Namespace, live: bool = False) -> tuple[Any, Any, list[Any], Any]:
    """The config, the catalog (PyIceberg), each table's state and Kafka's watermarks; `live`
    counts live rows (reads the key columns of tables with delete files)."""
    from icesink.iceberg import pyiceberg as table_state
    from icesink.kafka import admin as kafka_offsets

    config = load_config(args.config)
    namespace = args.namespace or config.tables.namespace
    catalog = table_state.catalog_for(config)
    loaded = table_state.tables(catalog, namespace, args.table or None)
    states = [table_state.state_of(ref, t, live=live) for ref, t in loaded]
    tps = {tp for s in states for tp in s.offsets}
    marks = kafka_offsets.watermarks(config, sorted(tps))
    return config, catalog, states, marks


def offsets_show(args: argparse.Namespace) -> int:
    from icesink.ops import reports

    _, _, states, marks = _states(args)
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


def status(args: argparse.Namespace) -> int:
    import datetime as dt

    from icesink.iceberg import pyiceberg as table_state
    from icesink.model import TableRef
    from icesink.ops import reports

    config, catalog, states, marks = _states(args, live=True)
    dead_ref = TableRef(args.namespace or config.tables.namespace, config.decode.dead_letter_table)
    dead: dict[str, int] = {}
    if any(s.table == dead_ref for s in states):
        table = catalog.load_table((dead_ref.namespace, dead_ref.name))
        dead = table_state.dead_letters_since(table, dt.datetime.now(dt.UTC) - dt.timedelta(days=1))
    rows = reports.status_rows(states, marks, dead)
    if args.json:
        print(reports.as_json(rows))
    else:
        columns = [
            "table",
            "last_commit_at",
            "last_batch",
            "rows",
            "data_files",
            "delete_files",
            "lag",
            "dead_letters_1d",
        ]
        print(reports.text_table(rows, columns))
        print(reports.ROWS_NOTE)
    for s in states:
        if s.rows_note:
            print(f"warning: {s.table}: live rows not counted: {s.rows_note}", file=sys.stderr)
    return 0


def offsets_reset(args: argparse.Namespace) -> int:
    import datetime as dt
    import getpass

    from icesink.iceberg import pyiceberg as table_state
    from icesink.kafka import admin as kafka_offsets
    from icesink.ops import checkpoints, reports
    from icesink.ops import reset as reset_plan

    # Every table counts for where to start (from-tables is the lowest offset ANY table needs);
    # --table only limits which tables a rewind lowers.
    only = set(args.table or [])
    args.table = None
    config, catalog, states, _ = _states(args)
    marks = kafka_offsets.subscribed(config)
    chosen = set(args.topic or [])
    unknown = sorted(chosen - {tp.topic for tp in marks})
    if unknown:
        raise IcesinkError(f"no topic {', '.join(unknown)} matching kafka.subscribe_pattern")
    held = {s.table: s.offsets for s in states}
    missing = sorted(only - {s.table.name for s in states})
    if missing:
        raise IcesinkError(
            f"--table: no table {', '.join(missing)} in namespace {args.namespace or config.tables.namespace}"
        )
    mode = reset_plan.Mode("timestamp" if args.to_timestamp else args.mode)
    selected = {tp: m for tp, m in marks.items() if not chosen or tp.topic in chosen}
    at = None
    if mode is reset_plan.Mode.TIMESTAMP:
        try:
            when = dt.datetime.fromisoformat(args.to_timestamp)
        except ValueError:
            raise IcesinkError(
                f"--to-timestamp {args.to_timestamp!r} is not an ISO time such as 2026-11-25T00:00:00Z"
            ) from None
        when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
        at = kafka_offsets.offsets_for_time(config, selected, int(when.timestamp() * 1000))
    plan = reset_plan.plan_reset(mode, held, selected, at)
    if chosen:
        # The other topics restart where the tables are: Spark needs a start for every partition.
        rest = reset_plan.plan_reset(
            reset_plan.Mode.FROM_TABLES, held, {tp: m for tp, m in marks.items() if tp not in selected}
        )
        plan = reset_plan.ResetPlan(
            mode, {**rest.starting, **plan.starting}, plan.rewinds, plan.skips, rest.notes + plan.notes
        )
    if only:
        plan = reset_plan.ResetPlan(
            plan.mode,
            plan.starting,
            tuple(r for r in plan.rewinds if r.table.name in only),
            tuple(k for k in plan.skips if k.table.name in only),
            plan.notes,
        )
    refusal = reset_plan.refuse_rewinds(plan)
    if refusal and not args.rewind:
        raise IcesinkError(refusal)
    rows = reset_plan.rows(plan, marks)
    if args.json:
        print(reports.as_json(rows))
    else:
        print(f"reset ({mode.value}): where `icesink run` starts each topic-partition")
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
    if args.dry_run:
        print("dry run: nothing changed", file=sys.stderr)
        return 0
    location = config.job.checkpoint_location
    checkpoints.ensure_local(location)  # before anything changes
    by_table: dict[Any, list[Any]] = {}
    for rw in plan.rewinds:
        by_table.setdefault(rw.table, []).append(rw)
    for ref, rws in sorted(by_table.items()):
        table = catalog.load_table((ref.namespace, ref.name))
        audit = {
            "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "by": getpass.getuser(),
            "mode": mode.value,
            "from": {str(r.tp): r.held for r in rws},
            "to": {str(r.tp): r.target for r in rws},
        }
        snapshot = table_state.commit_rewind(table, plan.lowered(ref, held[ref]), audit)
        print(
            f"table {ref}: offsets lowered in snapshot {snapshot} (audit in {table_state.REWIND_KEY})", file=sys.stderr
        )
    moved = checkpoints.move_aside(location)
    if moved is not None:
        print(f"checkpoint {location} moved to {moved}", file=sys.stderr)
    written = checkpoints.write_starting(location, plan.spark_json())
    print(f"starting offsets written to {written}; the next `icesink run` starts there", file=sys.stderr)
    return 0


def maintain(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from icesink.iceberg import pyiceberg as table_state
    from icesink.ops import maintain as maintenance
    from icesink.ops import reports

    config = load_config(args.config)
    namespace = args.namespace or config.tables.namespace
    expire_after = maintenance.parse_age(args.expire_after)
    orphans_after = maintenance.parse_age(args.orphans_after)
    refs = [ref for ref, _ in table_state.tables(table_state.catalog_for(config), namespace, args.table or None)]
    from icesink.job.session import build_session

    spark = build_session(config)
    results = []
    try:
        for i, ref in enumerate(refs, 1):
            print(f"[{i}/{len(refs)}] {ref}: compacting, expiring snapshots, removing orphan files", file=sys.stderr)
            results.append(
                asdict(maintenance.maintain_table(spark, config.catalog.name, ref, expire_after, orphans_after))
            )
    finally:
        spark.stop()
    if args.json:
        print(reports.as_json(results))
    else:
        columns = [
            "table",
            "rewritten_data_files",
            "added_data_files",
            "removed_delete_files",
            "expired_snapshots",
            "orphan_files",
            "attempts",
        ]
        print(reports.text_table(results, columns))
    return 0
