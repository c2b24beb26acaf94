"""What a benchmark run is: the records, trigger sizes, formats, repetitions and the targets.

`RunSpec` is the whole run as the command line gives it; `WorkerSpec` is one measurement handed to
a worker process (as JSON on its command line); `TARGETS` are issue 16's thresholds, each a ratio
or a figure measured in the same run, that the report marks met, MISSED or not measured.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# The parts of the end-to-end benchmark, in the order they run.
PARTS = (
    "icesink-avro", "icesink-json", "icesink-cdc", "icesink-avro-days", "icesink-avro-nested",
    "icesink-avro-nested-jvm", "icesink-avro-flat", "icesink-avro-flat-jvm", "icesink-json-flat",
    "icesink-json-flat-jvm", "icesink-cdc-bucket",
    "icesink-json-upsert", "icesink-debezium", "icesink-debezium-json", "icesink-avro-routed", "icesink-json-routed",
    "icesink-avro-headers", "icesink-avro-headers-jvm", "seed000", "builtin", "builtin-json",
    "noop", "noop-debezium-json", "kc-sink", "kc-sink-days", "kc-sink-json", "icesink-avro-cold",
    "icesink-avro-days-cold", "icesink-json-cold", "freshness", "builtin-freshness", "freshness-debezium", "small",
    "memory", "sweep",
)  # fmt: skip

Kind = Literal["icesink", "seed000", "builtin", "noop", "kc-sink", "freshness", "builtin-freshness", "small"]
Variant = Literal[
    "avro", "json", "cdc", "debezium", "debezium-json", "avro-nested", "avro-grouped", "json-grouped", "avro-headers"
]

# part -> (how it runs, which topic it reads)
CATCH_UP: dict[str, tuple[Kind, Variant]] = {
    "icesink-avro": ("icesink", "avro"),
    "icesink-json": ("icesink", "json"),
    "icesink-cdc": ("icesink", "cdc"),
    "icesink-avro-days": ("icesink", "avro"),
    "icesink-avro-nested": ("icesink", "avro-nested"),
    "icesink-avro-nested-jvm": ("icesink", "avro-nested"),
    "icesink-avro-flat": ("icesink", "avro-grouped"),
    "icesink-avro-flat-jvm": ("icesink", "avro-grouped"),
    "icesink-json-flat": ("icesink", "json-grouped"),
    "icesink-json-flat-jvm": ("icesink", "json-grouped"),
    "icesink-cdc-bucket": ("icesink", "cdc"),
    "icesink-json-upsert": ("icesink", "json"),
    "icesink-debezium": ("icesink", "debezium"),
    "icesink-debezium-json": ("icesink", "debezium-json"),
    "icesink-avro-routed": ("icesink", "avro"),
    "icesink-json-routed": ("icesink", "json"),
    # icesink-avro's records with the schema id in a `__value_schema_id` header (bare bodies).
    "icesink-avro-headers": ("icesink", "avro-headers"),
    "icesink-avro-headers-jvm": ("icesink", "avro-headers"),
    "seed000": ("seed000", "avro"),
    "builtin": ("builtin", "avro"),
    "builtin-json": ("builtin", "json"),
    "noop": ("noop", "avro"),
    # The Debezium Connect JSON topic scanned the same way: what its records' bytes cost before any decoding.
    "noop-debezium-json": ("noop", "debezium-json"),
    # icesink's appends again, each run in a process of its own with no warm-up (`COLD`).
    "icesink-avro-cold": ("icesink", "avro"),
    "icesink-avro-days-cold": ("icesink", "avro"),
    "icesink-json-cold": ("icesink", "json"),
    # The Apache Iceberg Kafka Connect sink (kc_sink.py) on the same topics.
    "kc-sink": ("kc-sink", "avro"),
    "kc-sink-days": ("kc-sink", "avro"),
    "kc-sink-json": ("kc-sink", "json"),
}

# Parts of issue 36's table shapes: the same records as their plain part, into tables set up so.
TABLES: dict[str, dict[str, Any]] = {
    "icesink-avro-days": {"partition_by": ["days(ts)"]},
    "kc-sink-days": {"partition_by": ["days(ts)"]},
    "icesink-cdc-bucket": {"partition_by": ["bucket(16, id)"]},
    "icesink-avro-flat": {"flatten_separator": "_"},
    "icesink-avro-flat-jvm": {"flatten_separator": "_"},
    "icesink-json-flat": {"flatten_separator": "_"},
    "icesink-json-flat-jvm": {"flatten_separator": "_"},
    "icesink-json-upsert": {"mode": "upsert", "key_columns": ["id"]},
    "icesink-debezium": {"partition_by": ["bucket(16, id)"]},
    "icesink-debezium-json": {"partition_by": ["bucket(16, id)"]},
    "icesink-avro-days-cold": {"partition_by": ["days(ts)"]},
    "freshness-debezium": {"partition_by": ["bucket(16, id)"]},
}

# Parts whose records are routed by a field (routing.rules): a table per event type (view, cart,
# purchase), named by the field's value (dynamic routing), of the same records as their plain part.
ROUTING: dict[str, list[dict[str, Any]]] = {
    part: [{"topics": ".*", "field": "event_type", "dynamic": True}]
    for part in ("icesink-avro-routed", "icesink-json-routed")
}

# Parts measured from the process's start, as a user's `spark-submit` runs: each run a worker of its
# own, no warm-up run (the Kafka Connect sink's are always so: kc_sink.py).
COLD = frozenset({"icesink-avro-cold", "icesink-avro-days-cold", "icesink-json-cold"})

# Parts that run icesink with other decode settings: the same records through Spark's decoder.
DECODE: dict[str, dict[str, Any]] = {
    "icesink-avro-nested-jvm": {"direct_avro": False},
    "icesink-avro-flat-jvm": {"direct_avro": False},
    "icesink-json-flat-jvm": {"direct_json": False},
    "icesink-avro-headers-jvm": {"direct_avro": False},
}

# The freshness runs at each input rate: (part, how it runs, trigger seconds, the records). icesink
# and Spark's sink alternate at the 1 s trigger so that both see the same machine. Debezium: the
# change events of icesink-debezium (Avro keys, envelopes, a tombstone after each delete) at the
# rate in changes/s, into its changelog table by bucket(16, id) (issue 36).
FRESHNESS_RUNS: tuple[tuple[str, Kind, int, Variant], ...] = (
    ("freshness", "freshness", 1, "avro"),
    ("builtin-freshness", "builtin-freshness", 1, "avro"),
    ("freshness-debezium", "freshness", 1, "debezium"),
    ("freshness", "freshness", 10, "avro"),
)

# What icesink's batch timings count besides the seconds of each step (see runners.collector).
BATCH_COUNTS = ("spark_jobs", "catalog_requests")

SMALL_RECORDS = 20_000  # the `small` part: ~20 batches of
SMALL_TRIGGER = 1_000  # records each
EMPTY_CALLS = 20  # calls of the batch handler with an empty micro-batch
MEMORY_TRIGGER = 2_000_000  # the `memory` part's maxOffsetsPerTrigger: its records in one batch


@dataclass(frozen=True)
class Targets:
    """The thresholds of issue 16's performance goals (ratios are within one run)."""

    avro_vs_builtin: float = 1.2  # icesink-avro / builtin records/s
    avro_vs_builtin_stretch: float = 1.5
    avro_vs_noop: float = 0.5  # icesink-avro / the Kafka scan into Spark's noop sink
    json_vs_builtin_json: float = 1.0  # icesink-json / builtin-json records/s
    json_records_per_cpu_s: float = 30_000  # icesink-json
    cdc_vs_avro: float = 0.7  # icesink-cdc / icesink-avro records/s
    partitioned_vs_avro: float = 0.85  # icesink-avro-days / icesink-avro records/s (issue 36)
    nested_vs_avro: float = 0.85  # icesink-avro-nested / icesink-avro records/s (issue 36)
    partitioned_cdc_vs_avro: float = 0.7  # icesink-cdc-bucket / icesink-avro records/s (issue 36)
    json_upsert_vs_avro: float = 0.7  # icesink-json-upsert / icesink-avro records/s (issue 36)
    debezium_vs_avro: float = 0.7  # icesink-debezium / icesink-avro records/s (issue 36)
    routed_vs_avro: float = 0.85  # icesink-*-routed / icesink-avro records/s (issue 36: every shape)
    # Appends (flat, days(ts), JSON) against the Kafka Connect sink on the same topic (issue 36):
    append_vs_kc_sink: float = 1.5  # records/s from the query's start / from the connector's creation
    append_per_cpu_vs_kc_sink: float = 1.0  # records per CPU-second, the same spans
    bytes_per_record_vs_builtin: float = 1.0  # icesink-avro's data-file bytes per record / builtin's
    freshness_interval_s: int = 1  # the freshness targets' trigger
    freshness_rate: int = 5_000  # and input records/s
    freshness_p50_s: float = 3.0
    freshness_p99_s: float = 6.0
    debezium_freshness_p50_s: float = 1.5  # freshness-debezium at the freshness trigger and rate (issue 36)
    small_batch_s: float = 1.0  # a SMALL_TRIGGER-record batch, end to end (median)
    empty_batch_s: float = 0.2  # the batch handler on an empty micro-batch (median)


TARGETS = Targets()


@dataclass(frozen=True)
class RunSpec:
    """One end-to-end benchmark run, as `python -m dev.bench e2e` is asked for it."""

    records: int = 2_000_000
    repeat: int = 3
    max_per_trigger: int = 500_000
    sweep: tuple[int, ...] = (25_000, 100_000, 250_000, 500_000, 1_000_000)
    sweep_records: int = 1_000_000
    rates: tuple[int, ...] = (5_000, 20_000)
    seconds: int = 60
    memory_records: int = 2_000_000
    parts: tuple[str, ...] = PARTS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.parts) - set(PARTS))
        if unknown:
            raise ValueError(f"--only: unknown part(s) {unknown}")
        if not self.rates or min(self.rates) <= 0:
            raise ValueError("--rates: one or more positive records/s")
        if self.memory_records <= 0 or self.records <= 0:
            raise ValueError("--records and --memory-records must be positive")

    def variants(self) -> list[Variant]:
        """The topics to pre-load: Avro always (the sweep and the baselines read it)."""
        out: list[Variant] = ["avro"]
        json_parts = {"icesink-json", "builtin-json", "icesink-json-upsert", "kc-sink-json", "icesink-json-cold",
                      "icesink-json-routed"}  # fmt: skip
        out += ["json"] if json_parts & set(self.parts) else []
        out += ["cdc"] if {"icesink-cdc", "icesink-cdc-bucket"} & set(self.parts) else []
        out += ["debezium"] if "icesink-debezium" in self.parts else []
        out += ["debezium-json"] if "icesink-debezium-json" in self.parts else []
        out += ["avro-nested"] if {"icesink-avro-nested", "icesink-avro-nested-jvm"} & set(self.parts) else []
        out += ["avro-grouped"] if {"icesink-avro-flat", "icesink-avro-flat-jvm"} & set(self.parts) else []
        out += ["json-grouped"] if {"icesink-json-flat", "icesink-json-flat-jvm"} & set(self.parts) else []
        out += ["avro-headers"] if {"icesink-avro-headers", "icesink-avro-headers-jvm"} & set(self.parts) else []
        return out


@dataclass
class WorkerSpec:
    """One measurement in its own Spark process: a warm-up run on `warm_topic` (none without one),
    then `repeat` measured runs on `topic` (catch-up), or one steady-rate run (freshness)."""

    kind: Kind
    tag: str
    topic: str
    records: int
    repeat: int = 1
    max_per_trigger: int = 500_000
    variant: Variant = "avro"
    tables: dict[str, Any] = field(default_factory=dict)  # the tables section's settings (TABLES)
    decode: dict[str, Any] = field(default_factory=dict)  # the decode section's settings (DECODE)
    routing: list[dict[str, Any]] = field(default_factory=list)  # routing.rules (ROUTING): tables by a field
    warm_topic: str = ""
    starting_offsets: str | None = None  # a Kafka startingOffsets JSON (the sweep reads a tail)
    interval: int = 0  # freshness: trigger seconds
    rate: int = 0  # freshness: records/s produced
    seconds: int = 0  # freshness: seconds of steady input
    cold: bool = False  # a run that also reports its seconds and CPU from the process's start (`COLD`)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        return cls(**json.loads(text))
