"""The config's choices that the Python tasks act on too: a table's write mode, what becomes of a
record no route or table takes. Here rather than in icesink.config so that a task importing them
(or unpickling a plan holding them) does not import the config's pydantic models: that import
was a third of a Python worker's start (~0.3 s of ~0.9 s), which the first batch after every
start waits for. icesink.config exports them as before.
"""

from __future__ import annotations

from enum import StrEnum


class WriteMode(StrEnum):
    APPEND = "append"
    UPSERT = "upsert"
    CHANGELOG = "changelog"


class Unmatched(StrEnum):
    DEAD_LETTER = "dead-letter"
    SKIP = "skip"


class UnknownTables(StrEnum):
    CREATE = "create"
    DEAD_LETTER = "dead-letter"
