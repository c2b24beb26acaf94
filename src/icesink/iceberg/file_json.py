"""A written file as the JSON Iceberg's `ContentFileParser.fromJson` reads (file_descriptions.py
hands it over in two py4j calls), and what that JSON needs of its table (the columns' metrics
modes, the partition fields, the key columns' ids), asked of the JVM once per table version.

The JSON is written in the forms the parser has read since Iceberg 1.10 (content as the enum's
name, the partition as an object of field ids), so that another runtime than the pinned 1.11
reads it the same or has no such method (the builders describe the files then).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from py4j.protocol import Py4JError

from icesink.iceberg import footer_metrics
from icesink.iceberg.jvm import JavaObject, java_list
from icesink.model import WrittenFile

log = logging.getLogger(__name__)


@dataclass
class TableFacts:
    """What describing a table's files needs of the table, for one version of its schema, sort
    order, properties and spec: asked of the JVM once each, then kept."""

    spec_id: int
    partitioned: bool  # PartitionSpec.isPartitioned: a spec of void fields only is not
    partition_fields: tuple[tuple[int, str], ...]  # (field id, result type) of each partition field
    metrics_config: JavaObject
    modes: dict[str, str] = field(default_factory=dict)  # by column name
    ids: dict[tuple[str, ...], list[int]] = field(default_factory=dict)  # key columns' field ids
    lock: threading.Lock = field(default_factory=threading.Lock)

    def mode_of(self, name: str) -> str:
        mode = self.modes.get(name)
        if mode is None:
            with self.lock:
                mode = self.modes[name] = str(self.metrics_config.columnMode(name))
        return mode

    def field_ids(self, schema: JavaObject, columns: Sequence[str]) -> list[int]:
        key = tuple(columns)
        ids = self.ids.get(key)
        if ids is None:
            ids = self.ids[key] = [int(schema.findField(c).fieldId()) for c in columns]
        return ids


_FACTS: dict[tuple[Any, ...], TableFacts] = {}
_FACTS_LOCK = threading.Lock()
_FACTS_KEPT = 1024  # tables' versions; the oldest go first


def facts_of(jvm_key: int, table: JavaObject, schema: JavaObject, spec: JavaObject, config: Any) -> TableFacts | None:
    """The table's facts (`config`: MetricsConfig.forTable), or None when the table has no UUID to
    key them by (format v1 metadata may lack one): its files are described through the builders."""
    # A table's metrics modes follow from its properties, schema and sort order (MetricsConfig
    # .forTable); its partition fields from its spec; its key ids from its schema. Eight py4j calls
    # say whether any changed; the UUID tells a table dropped and created again under its name.
    try:
        uuid = str(table.uuid().toString())
    except Py4JError as e:
        log.debug("table %s has no UUID (%s): its files are described through the builders", table, e)
        return None
    key = (
        jvm_key, uuid, int(schema.schemaId()), int(table.sortOrder().orderId()), str(table.properties().toString()),
        int(spec.specId()),
    )  # fmt: skip
    facts = _FACTS.get(key)
    if facts is not None:
        return facts
    fields = tuple((int(f.fieldId()), str(f.type().toString())) for f in java_list(spec.partitionType().fields()))
    facts = TableFacts(key[-1], bool(spec.isPartitioned()), fields, config(table))
    with _FACTS_LOCK:
        if len(_FACTS) >= _FACTS_KEPT:
            del _FACTS[next(iter(_FACTS))]
        return _FACTS.setdefault(key, facts)


def document(f: WrittenFile, facts: TableFacts, equality_ids: list[int] | None) -> dict[str, Any] | None:
    """`f` as ContentFileParser's JSON, or None where its metrics or partition are left to
    Iceberg's builders."""
    partition = _partition(f.partition, facts.partition_fields) if facts.partitioned else {}
    fields = footer_metrics.metrics(f.footer, facts.mode_of) if partition is not None and f.footer else None
    if fields is None:
        return None
    doc: dict[str, Any] = {
        "spec-id": facts.spec_id,
        "content": "DATA" if equality_ids is None else "EQUALITY_DELETES",
        "file-path": f.path,
        "file-format": "parquet",
    }
    if facts.partitioned:
        doc["partition"] = partition
    doc["file-size-in-bytes"] = f.file_size
    doc.update(fields)
    if equality_ids is not None:
        doc["equality-ids"] = equality_ids
    doc["sort-order-id"] = 0  # the builders': unsorted
    return doc


_INTEGER = re.compile(r"-?[0-9]+")
_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # what Iceberg's partition strings read as null


def _partition(values: Sequence[str | None], fields: Sequence[tuple[int, str]]) -> dict[str, Any] | None:
    """A file's partition strings (as `withPartitionValues` parses them) as the JSON object of
    ContentFileParser (values by field id, nulls left out), or None for a type whose JSON is left
    to Iceberg's builders."""
    if len(values) != len(fields):
        return None
    out: dict[str, Any] = {}
    for value, (field_id, kind) in zip(values, fields, strict=True):
        if value is None:
            continue
        if value == _HIVE_NULL:
            return None
        if kind in ("int", "long") and _INTEGER.fullmatch(value):
            out[str(field_id)] = int(value)
        elif kind == "string" or (kind == "date" and _ISO_DATE.fullmatch(value)):
            out[str(field_id)] = value
        else:
            return None
    return out
