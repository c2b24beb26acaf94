"""`icesink status`: per table its last commit, live rows, files, lag and the dead letters of the
last day. No Spark: PyIceberg and confluent-kafka."""

from __future__ import annotations

import argparse
import datetime as dt
import sys

from icesink.model import TableRef
from icesink.ops.offsets import read_states


def status(args: argparse.Namespace) -> int:
    from icesink.iceberg import pyiceberg
    from icesink.ops import reports

    config, catalog, states, marks = read_states(args, live=True)
    dead_ref = TableRef(args.namespace or config.tables.namespace, config.decode.dead_letter_table)
    dead: dict[str, int] = {}
    if any(s.table == dead_ref for s in states):
        table = catalog.load_table((dead_ref.namespace, dead_ref.name))
        dead = pyiceberg.dead_letters_since(table, dt.datetime.now(dt.UTC) - dt.timedelta(days=1))
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
