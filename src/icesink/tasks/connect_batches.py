"""Connect JSON payloads read a batch at a time by Arrow's JSON reader, for tasks/decode_connect.py:
the arrays tasks/connect_values.read makes of them a record at a time, or None where the reader
may not read them alike (the caller then takes them a record at a time, which decides each).

The reader is given the payload's Connect schema as its Arrow types (`connect_values.read_type`)
and passes over the fields the schema lacks, as Spark's from_json and the record-at-a-time way do.
It refuses what that way refuses (a value of another JSON type, an integer beyond 64 bits, a key
twice, text that is not JSON); what it reads otherwise gives None: a double orjson may read
otherwise (decode_json.doubtful), an integral number beyond 2**24 for a float (that way tells an
integer, which it declines, from a double), more or fewer objects than records, nesting past
Python's reader's limit. A schema with a map is not read so (Arrow's reader has no maps).
Pure: no Spark.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import DoubleType, FloatType, MapType

from icesink.schema.connect import Node
from icesink.tasks.connect_values import FLOAT_EXACT, read_type
from icesink.tasks.decode_json import doubtful, read_whole

_DEPTH = 900  # brackets: the record-at-a-time way refuses a value nested past ~1,000


def reads_whole(root: Node) -> bool:
    """Whether a payload of schema `root` may be read a batch at a time: it holds no map."""
    if isinstance(root.parse, MapType):
        return False
    children = [n for _, n in root.fields] + ([root.element] if root.element is not None else [])
    return all(reads_whole(n) for n in children)


def read_payloads(root: Node, payloads: Sequence[bytes]) -> pa.StructArray | None:
    """The payloads (each a record's, of Connect schema `root`: a struct) as `read` reads them,
    or None (see the module)."""
    fields = list(read_type(root))
    table = read_whole(pa.schema(fields), payloads, "ignore", brackets=_DEPTH)
    if table is None or table.num_rows != len(payloads):
        return None
    struct = table.to_struct_array().combine_chunks()  # of as many rows as the table, columns or none
    return None if _doubts(root, struct) else struct


def _doubts(n: Node, array: pa.Array) -> bool:
    """Whether a number of `array` (schema `n`'s values) may be read otherwise than orjson reads it."""
    if n.fields:
        return any(_doubts(child, a) for (_, child), a in zip(n.fields, array.flatten(), strict=True))
    if n.element is not None:
        return _doubts(n.element, array.flatten())
    if isinstance(n.parse, DoubleType):
        return doubtful(array)
    if isinstance(n.parse, FloatType):
        integral = pc.and_(pc.equal(pc.floor(array), array), pc.greater(pc.abs(array), FLOAT_EXACT))
        return doubtful(array) or bool(pc.any(integral).as_py())
    return False  # a VariableScaleDecimal's struct holds an int and bytes
