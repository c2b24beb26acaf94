"""A job config on the local stack, with private topics, namespace and checkpoint."""

from __future__ import annotations

import dataclasses
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dev.kit import jvm_archive
from dev.kit.endpoints import CATALOG_URI, KAFKA, S3_ENDPOINT
from icesink.config import Config, parse_config

CATALOG = "icesink"


@dataclass
class Scenario:
    """One test's private topics, namespace and checkpoint, so tests never see each other's data."""

    prefix: str
    namespace: str
    checkpoint: Path
    catalog: str = CATALOG  # the Spark catalog name of the tables, and its REST endpoint
    catalog_uri: str = CATALOG_URI

    @classmethod
    def new(cls, tmp_path: Path) -> Scenario:
        tag = uuid.uuid4().hex[:8]
        return cls(prefix=f"it{tag}", namespace=f"it_{tag}", checkpoint=tmp_path / "checkpoint")

    def on(self, catalog: str, uri: str) -> Scenario:
        """The same scenario with its tables in another REST catalog (its name in Spark, its URI)."""
        return dataclasses.replace(self, catalog=catalog, catalog_uri=uri)

    def topic(self, name: str) -> str:
        return f"{self.prefix}_{name}"

    @property
    def pattern(self) -> str:
        return re.escape(self.prefix) + "_.*"

    def table(self, name: str) -> str:
        """The table of topics `topic(name)` (with the daily suffix stripped from `name`)."""
        return f"{self.catalog}.{self.namespace}.{self.prefix}_{name}"

    def raw_config(self, **overrides: Any) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "job": {
                "name": f"test-{self.prefix}",
                "checkpoint_location": str(self.checkpoint),
                "trigger": {"mode": "available-now"},
            },
            "kafka": {"bootstrap_servers": KAFKA, "subscribe_pattern": self.pattern},
            "catalog": {"name": self.catalog, "uri": self.catalog_uri},
            "s3": {"endpoint": S3_ENDPOINT},
            "tables": {"namespace": self.namespace},
            # The job's own maintenance commits at moments of its own (a thread beside the
            # batches): off unless a test turns it on, so that the others' snapshots are theirs.
            "maintenance": {"tables": "none"},
            "spark": {
                "master": "local[2]",
                "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
            },
        }
        for path, value in overrides.items():
            node = raw
            *parents, leaf = path.split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        return raw

    def config(self, **overrides: Any) -> Config:
        return parse_config(self.raw_config(**overrides), environ={})

    def write_config(self, path: Path, **overrides: Any) -> Path:
        """The config written for a job process; a test session's driver JVM options
        (`jvm_archive.ENV`) go in, unless the overrides set the driver's options themselves."""
        raw = self.raw_config(**overrides)
        java = jvm_archive.options_now(os.environ.get(jvm_archive.ENV, ""))
        conf = raw.setdefault("spark", {}).setdefault("conf", {})
        if java and "spark.driver.extraJavaOptions" not in conf:
            conf["spark.driver.extraJavaOptions"] = java
        path.write_text(yaml.safe_dump(raw))
        return path
