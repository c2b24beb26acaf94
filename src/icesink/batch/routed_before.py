"""The values each field-routed topic's records held in the job's last batches, as the Python
tasks found them (batch/route_guess.py plans a batch with them). Pure; one per job, on the driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# A value not met for this many batches is no longer planned for (a table per value costs each
# batch its plan); a topic whose guess could not be judged is not guessed for as long.
KEEP_BATCHES = 20


class RoutedBefore:
    def __init__(self) -> None:
        self._met: dict[str, dict[str, int]] = {}  # topic -> value -> the last batch that met it
        self._held_off: dict[str, int] = {}  # topic -> the last batch not to guess for it

    def learn(self, batch_id: int, found: Mapping[str, Iterable[str]]) -> None:
        """The values each topic's records of batch `batch_id` held (every value: the tasks'
        routing of the whole batch)."""
        for topic, values in found.items():
            met = self._met.setdefault(topic, {})
            met.update(dict.fromkeys(values, batch_id))
            for value in [v for v, at in met.items() if at < batch_id - KEEP_BATCHES]:
                del met[value]

    def values(self, topic: str, batch_id: int) -> frozenset[str] | None:
        """The values to plan batch `batch_id` of `topic` with; None when the job has not routed
        it in the tasks yet."""
        met = self._met.get(topic)
        if met is None:
            return None
        return frozenset(v for v, at in met.items() if at >= batch_id - KEEP_BATCHES)

    def held_off(self, topic: str, batch_id: int) -> bool:
        return self._held_off.get(topic, -1) >= batch_id

    def hold_off(self, topics: Iterable[str], batch_id: int) -> None:
        """No guess for these topics for a while: the last could not be judged (no one-pass job
        ran for their tables, or a record the tasks cannot judge as Spark would), and the next
        would likely not be either."""
        for topic in topics:
            self._held_off[topic] = batch_id + KEEP_BATCHES
