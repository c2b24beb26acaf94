"""Where a micro-batch's time goes: wall-clock seconds per step of the batch handler.

The handler logs one INFO line per batch (`batch 7 timings: read 1.20s, plan 0.05s, ...`) and hands
the same record to `BatchHandler.on_timings`, if set (the benchmark collects them there).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class BatchTimings:
    batch_id: int
    records: int = 0
    # step -> seconds, in the order the steps ran: read (Kafka read + planning aggregate), plan
    # (routing, table offsets), decode (schemas, JSON inference), dead_letters, prepare (create,
    # evolve), write (decode + Parquet files on the executors), commit (all tables), group.
    steps: dict[str, float] = field(default_factory=dict)
    total: float = 0.0
    _last: float = field(default_factory=lambda: time.monotonic(), repr=False)
    _started: float = field(default_factory=lambda: time.monotonic(), repr=False)

    def lap(self, step: str) -> None:
        """Charges the time since the previous lap (or the start) to `step`."""
        now = time.monotonic()
        self.steps[step] = self.steps.get(step, 0.0) + now - self._last
        self._last = now
        self.total = now - self._started

    def line(self) -> str:
        parts = ", ".join(f"{k} {v:.2f}s" for k, v in self.steps.items())
        return f"batch {self.batch_id} timings: {self.records} record(s) in {self.total:.2f}s: {parts}"
