"""Which writer schemas each topic's records carried in the last batch that read it.

A batch is decoded in one pass with the schemas its topics carried last time (Avro: the frame keys
naming registry schemas), so nothing scans the batch first just to find them. A record with a
schema not among them is left pending by that pass and decoded in a second one (see
`batch/new_schemas.py`); what a pass saw replaces what was known of its topics, so a schema that
stopped appearing stops widening later batches' plans. The memory is pure; the helpers below
add the reference columns and read what a pass observed of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.batch.decode import fixed

if TYPE_CHECKING:
    from icesink.batch.decode import Decoder

# The columns a decoded table share carries with each record's schema reference (value, key), so
# its write pass can observe which ones the batch carried.
VALUE_REF = "__icesink_value_ref"
KEY_REF = "__icesink_key_ref"


class SeenSchemas:
    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], frozenset[Any]] = {}

    def expected(self, which: str, topics: Iterable[str]) -> list[Any] | None:
        """The schema references `which` ("value" or "key") of `topics` carried last time; None
        when some topic has not been seen yet (a first batch, a new daily topic): then the
        decoder looks at the batch itself."""
        known: set[Any] = set()
        for t in topics:
            found = self._seen.get((which, t))
            if found is None:
                return None
            known |= found
        return sorted(known, key=repr)

    def learn(self, which: str, seen: Mapping[str, Iterable[Any]]) -> None:
        """What one pass saw, per topic (topics it read no record of are left as they were)."""
        for topic, refs in seen.items():
            self._seen[(which, topic)] = frozenset(r for r in refs if r is not None)


def with_schema_refs(records: DataFrame, decoder: Decoder, key_decoder: Decoder | None) -> DataFrame:
    """`records` with the value's and the key's schema reference (null where a decoder has none)."""
    value = decoder.plan_column()
    key = key_decoder.plan_column() if key_decoder is not None else None
    none = fixed("no ref", lambda: F.lit(None).cast("binary"))
    return records.withColumns({VALUE_REF: none if value is None else value, KEY_REF: none if key is None else key})


def observed_refs() -> Column:
    """An aggregate for a pass's Observation: the distinct (topic, value ref, key ref) it read."""
    return F.collect_set(F.struct(F.col("topic"), F.col(VALUE_REF), F.col(KEY_REF)))


def refs_by_topic(observed: Iterable[Any]) -> tuple[dict[str, set[Any]], dict[str, set[Any]]]:
    """`observed_refs`' rows as value refs and key refs per topic."""
    values: dict[str, set[Any]] = defaultdict(set)
    keys: dict[str, set[Any]] = defaultdict(set)
    for topic, value, key in observed:
        values[topic].add(None if value is None else bytes(value))
        keys[topic].add(None if key is None else bytes(key))
    return dict(values), dict(keys)
