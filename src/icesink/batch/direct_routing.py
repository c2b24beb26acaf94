"""A table of field-routed topics in the one-pass job (batch/direct_tables.py): the records its
tasks take of those topics (tasks/routing.py), from the values the routing pass found the table
takes (batch/route.py). The routing pass still decodes the routing field with Spark's decoder and
makes the dead letters of the records no table takes; the tasks route each record again by the
same values and write the table's rows.

The tasks route by one field and one set of values per table, so the table's topics must all be
routed by one rule alike (a table that also takes whole topics, or whose topics are routed by
rules that differ, is left to Spark's path); the field must be a top-level column of the table,
not its record key column, of a type the tasks spell as Spark's cast does (tasks/routing.py).
"""

from __future__ import annotations

from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import StructType

from icesink.batch.route import Targets
from icesink.model import TableRef
from icesink.tasks.routing import RouteFilter, routable


def route_values(targets: Targets, table: TableRef) -> RouteFilter | str:
    """The field and values the table takes of its field-routed topics' records, or why one field
    and one set of values cannot say which they are."""
    if table in targets.fixed_tables:
        return "it takes whole topics as well as records routed by a field"
    routes = targets.field_routes.get(table, [])
    rules = {route for _, route, _ in routes}
    if len(rules) != 1:
        return "its topics are routed by rules that differ"
    field = next(iter(rules)).field
    assert field is not None
    return RouteFilter(field, frozenset(v for _, _, values in routes for v in values))


def route_filter(targets: Targets, table: TableRef, schema: StructType, key_column: str | None) -> RouteFilter | str:
    """The records the table takes of its field-routed topics, or why its tasks cannot route them."""
    route = route_values(targets, table)
    if isinstance(route, str):
        return route
    field = route.field
    if field not in schema.fieldNames() or field == key_column:
        return f"its routing field {field} is not one of its columns filled from the record's value"
    if not routable(to_arrow_type(schema[field].dataType)):
        return f"its routing field {field} is not a string, an integer or a boolean"
    return route
