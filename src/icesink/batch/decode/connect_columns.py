"""Connect JSON payload values, parsed as a Connect schema's `Node` says (see `connect`), converted
to their column types, and checked where a conversion must be exact. Spark expressions only."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType

from icesink.batch.decode.connect_logical import conversion
from icesink.schema.connect import Node


def convert(col: Column, n: Node) -> Column:
    """`col` (the payload value parsed as `n.parse`) as `n.result`."""
    if not n.converts:
        return col
    if n.logical is not None:
        return conversion(n)(col)
    if n.default is not None:
        return F.coalesce(col, F.lit(n.default).cast(n.result))
    if n.fields:
        out = [convert(col[name], c).alias(name) for name, c in n.fields]
        return F.when(col.isNull(), F.lit(None).cast(n.result)).otherwise(F.struct(*out))
    assert n.element is not None
    elem = n.element
    if isinstance(n.parse, MapType):
        return F.transform_values(col, lambda _, v: convert(v, elem))
    return F.transform(col, lambda x: convert(x, elem))


def lost(raw: Column, converted: Column, n: Node) -> Column | None:
    """True where a checked conversion (a decimal, a zoned timestamp) left null for a value that
    was there: such a record is a dead letter, not a row with a null. None when nothing is checked."""
    if not n.checked:
        return None
    if n.logical is not None:
        return raw.isNotNull() & converted.isNull()
    if n.fields:
        parts = [c for name, child in n.fields if (c := lost(raw[name], converted[name], child)) is not None]
        out = parts[0]
        for p in parts[1:]:
            out = out | p
        return raw.isNotNull() & F.coalesce(out, F.lit(False))
    assert n.element is not None
    elem = n.element
    if isinstance(n.parse, MapType):
        any_lost = F.exists(
            F.map_keys(raw),
            lambda k: F.coalesce(lost(raw[k], converted[k], elem), F.lit(False)),  # type: ignore[arg-type]
        )
    else:
        any_lost = F.exists(
            F.sequence(F.lit(1), F.greatest(F.size(raw), F.lit(1))),
            lambda i: F.coalesce(lost(F.get(raw, i - 1), F.get(converted, i - 1), elem), F.lit(False)),  # type: ignore[arg-type]
        )
    return raw.isNotNull() & F.coalesce(any_lost, F.lit(False))
