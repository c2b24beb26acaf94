"""`icesink maintain`: runs `ops.maintain` on every table of the namespace (or those asked for) and
prints what each run did. Needs Spark: Iceberg's maintenance procedures are Spark procedures."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from icesink.config import load_config


def maintain(args: argparse.Namespace) -> int:
    from icesink.iceberg import pyiceberg
    from icesink.ops import maintain as maintenance
    from icesink.ops import reports

    config = load_config(args.config)
    namespace = args.namespace or config.tables.namespace
    expire_after = maintenance.parse_age(args.expire_after)
    orphans_after = maintenance.parse_age(args.orphans_after)
    refs = [ref for ref, _ in pyiceberg.tables(pyiceberg.catalog_for(config), namespace, args.table or None)]
    from icesink.job.session import build_session

    spark = build_session(config)
    results = []
    try:
        for i, ref in enumerate(refs, 1):
            print(
                f"[{i}/{len(refs)}] {ref}: compacting, rewriting manifests, expiring snapshots, removing orphan files",
                file=sys.stderr,
            )
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
            "rewritten_manifests",
            "removed_delete_files",
            "live_delete_files",
            "expired_snapshots",
            "orphan_files",
            "attempts",
        ]
        print(reports.text_table(results, columns))
    return 0
