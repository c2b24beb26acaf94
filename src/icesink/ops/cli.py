"""`icesink` command line. `icesink run --config FILE` is also what spark-submit runs."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from icesink import __version__
from icesink.config import load_config
from icesink.errors import IcesinkError, JobFailedError
from icesink.ops.maintain_command import maintain as maintain_tables
from icesink.ops.offsets import offsets_reset, offsets_show
from icesink.ops.status import status as show_status

if TYPE_CHECKING:
    from icesink.batch.handler import LastCommit

log = logging.getLogger("icesink")


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("py4j").setLevel(logging.WARNING)


def _cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from icesink.job import stopping
    from icesink.job.query import Job  # pyspark loads only for commands that need it
    from icesink.job.session import build_session
    from icesink.job.warm_up import WarmUp

    spark = build_session(config)
    warming = WarmUp(spark, config.catalog.name).start() if config.job.warm_up else None
    job = Job(spark, config)
    stop = stopping.StopSignals()
    stopping.install(stop, spark)
    try:
        job.run(stop)
    except Exception as e:
        cause = job.handler.failure
        if isinstance(cause, IcesinkError):
            raise cause from None
        message = f"streaming query {config.job.name!r} failed: {cause or e}"
        if "Some data may have been lost" in message:
            message += (
                f"\nhint: topics in the checkpoint are gone (deleted, aged out, or no longer matched by "
                f"kafka.subscribe_pattern). The tables hold their own offsets, so moving the checkpoint "
                f"{config.job.checkpoint_location} aside and starting again adds no duplicate."
            )
        raise JobFailedError(message) from None
    finally:
        if warming is not None:
            warming.stop()
    if stop.requested.is_set():
        print(f"icesink: stopped by {stop.name}; {_last_commit(job.handler.last_commit)}", file=sys.stderr)
    return 0


def _last_commit(last: LastCommit | None) -> str:
    if last is None:
        return "nothing was committed in this run"
    tables = ", ".join(f"{r.table} (snapshot {r.snapshot_id}, +{r.records} row(s))" for r in last.tables)
    offsets = sorted(last.next_offsets.items())
    shown = ", ".join(f"{tp}->{o}" for tp, o in offsets[:10])
    more = f" and {len(offsets) - 10} more" if len(offsets) > 10 else ""
    return f"the last committed batch is {last.batch_id}: {tables or 'no table'}; next offsets {shown}{more}"


def _cmd_sql(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    from icesink.job.session import build_session

    spark = build_session(config)
    try:
        for statement in args.statements:
            print(f"> {statement}")
            spark.sql(statement).show(n=args.rows, truncate=args.truncate, vertical=args.vertical)
    finally:
        spark.stop()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="icesink", description="Kafka topics into Apache Iceberg tables, exactly once."
    )
    parser.add_argument("--version", action="version", version=f"icesink {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the streaming job")
    run.add_argument("--config", "-c", required=True, help="YAML config file (ICESINK__SECTION__KEY overrides)")
    run.set_defaults(func=_cmd_run)
    sql = sub.add_parser("sql", help="run Spark SQL against the job's catalog, print the results")
    sql.add_argument("--config", "-c", required=True, help="YAML config file (the job's)")
    sql.add_argument("--rows", type=int, default=20, help="rows to show per statement")
    sql.add_argument("--truncate", type=int, default=60, help="cut cells at this many characters (0: never)")
    sql.add_argument("--vertical", action="store_true", help="one line per column")
    sql.add_argument("statements", nargs="+", help='e.g. "SELECT count(*) FROM icesink.demo.events"')
    sql.set_defaults(func=_cmd_sql)

    def reading(p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", "-c", required=True, help="YAML config file (the job's)")
        p.add_argument("--namespace", help="namespace to look at (default: tables.namespace)")
        p.add_argument("--table", action="append", help="only this table (repeatable)")
        p.add_argument("--json", action="store_true", help="JSON for scripts instead of a table")

    offsets = sub.add_parser("offsets", help="the offsets the tables hold, against Kafka's")
    offsets_sub = offsets.add_subparsers(dest="offsets_command", required=True)
    show = offsets_sub.add_parser("show", help="per table and topic-partition: committed, earliest, end, lag")
    reading(show)
    show.set_defaults(func=offsets_show)
    reset = offsets_sub.add_parser(
        "reset", help="restart the job from the tables' offsets (default) or a chosen point; moves the checkpoint aside"
    )
    reading(reset)
    modes = reset.add_mutually_exclusive_group()
    modes.add_argument("--from-tables", dest="mode", action="store_const", const="from-tables",
                       help="where the tables are: the lowest offset any table needs (default)")  # fmt: skip
    modes.add_argument("--to-earliest", dest="mode", action="store_const", const="earliest")
    modes.add_argument("--to-latest", dest="mode", action="store_const", const="latest", help="skip to the end")
    modes.add_argument("--to-timestamp", metavar="ISO", help="the first record at or after, e.g. 2026-11-25T00:00:00Z")
    reset.add_argument("--topic", action="append", help="only these topics (repeatable); others: from the tables")
    reset.add_argument("--rewind", action="store_true", help="allow re-ingesting records tables hold (audited)")
    reset.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    reset.set_defaults(func=offsets_reset, mode="from-tables")
    maintain = sub.add_parser(
        "maintain", help="compact files and equality deletes, expire snapshots, remove orphans; safe while the job runs"
    )
    reading(maintain)
    maintain.add_argument("--expire-after", default="3d", help="expire snapshots older than this (the newest "
                          "offset-bearing one always stays), e.g. 12h, 3d")  # fmt: skip
    maintain.add_argument("--orphans-after", default="1d", help="remove unreferenced files older than this")
    maintain.set_defaults(func=maintain_tables)
    status = sub.add_parser("status", help="per table: last commit, rows, files, lag, dead letters in the last day")
    reading(status)
    status.set_defaults(func=show_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        return int(args.func(args))
    except IcesinkError as e:
        print(f"icesink: error: {e}", file=sys.stderr)
        return 1
