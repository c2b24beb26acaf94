"""What a benchmark run is: the records, trigger sizes, formats, repetitions and the targets.

`RunSpec` is the whole run as the command line gives it; `WorkerSpec` is one measurement handed to
a worker process (as JSON on its command line); `TARGETS` are the thresholds the report marks met
or MISSED.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Literal

# The parts of the end-to-end benchmark, in the order they run.
PARTS = ("icesink-avro", "icesink-json", "icesink-cdc", "seed000", "builtin", "freshness", "sweep")

Kind = Literal["icesink", "seed000", "builtin", "freshness"]
Variant = Literal["avro", "json", "cdc"]

# part -> (how it runs, which topic it reads)
CATCH_UP: dict[str, tuple[Kind, Variant]] = {
    "icesink-avro": ("icesink", "avro"),
    "icesink-json": ("icesink", "json"),
    "icesink-cdc": ("icesink", "cdc"),
    "seed000": ("seed000", "avro"),
    "builtin": ("builtin", "avro"),
}


@dataclass(frozen=True)
class Targets:
    """The thresholds of issue 1's performance goals."""

    append_records_s: float = 100_000
    vs_builtin: float = 1.0
    vs_seed000: float = 3.0
    cdc_vs_append: float = 0.5
    freshness_p50_s_1s_trigger: float = 3.0
    overhead_s: float = 0.3


TARGETS = Targets()


@dataclass(frozen=True)
class RunSpec:
    """One end-to-end benchmark run, as `python -m dev.bench e2e` is asked for it."""

    records: int = 2_000_000
    repeat: int = 3
    max_per_trigger: int = 500_000
    sweep: tuple[int, ...] = (25_000, 100_000, 250_000, 500_000, 1_000_000)
    sweep_records: int = 1_000_000
    rate: int = 5_000
    seconds: int = 60
    parts: tuple[str, ...] = PARTS

    def __post_init__(self) -> None:
        unknown = sorted(set(self.parts) - set(PARTS))
        if unknown:
            raise ValueError(f"--only: unknown part(s) {unknown}")

    def variants(self) -> list[Variant]:
        """The topics to pre-load: Avro always (the sweep and the baselines read it)."""
        out: list[Variant] = ["avro"]
        out += ["json"] if "icesink-json" in self.parts else []
        out += ["cdc"] if "icesink-cdc" in self.parts else []
        return out


@dataclass
class WorkerSpec:
    """One measurement in its own Spark process: a warm-up run on `warm_topic`, then `repeat`
    measured runs on `topic` (catch-up), or one steady-rate run (freshness)."""

    kind: Kind
    tag: str
    topic: str
    records: int
    repeat: int = 1
    max_per_trigger: int = 500_000
    variant: Variant = "avro"
    warm_topic: str = ""
    starting_offsets: str | None = None  # a Kafka startingOffsets JSON (the sweep reads a tail)
    interval: int = 0  # freshness: trigger seconds
    rate: int = 0  # freshness: records/s produced
    seconds: int = 0  # freshness: seconds of steady input

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        return cls(**json.loads(text))
