from __future__ import annotations

from pyspark.sql.types import ArrayType, DoubleType, LongType, StringType, StructField, StructType

from icesink.schema_diff import CORRUPT_COLUMN, added_columns, merged, parse_schema


def s(*fields: StructField) -> StructType:
    return StructType(list(fields))


def f(name: str, t: object) -> StructField:
    return StructField(name, t, True)  # type: ignore[arg-type]


TABLE = s(f("id", LongType()), f("user", s(f("name", StringType()))), f("tags", ArrayType(s(f("k", StringType())))))


def test_nothing_new() -> None:
    assert added_columns(TABLE, s(f("id", DoubleType()), f(CORRUPT_COLUMN, StringType()))) == []


def test_new_top_level_nested_and_list_element_fields() -> None:
    batch = s(
        f("id", LongType()),
        f("user", s(f("name", StringType()), f("age", LongType()))),
        f("tags", ArrayType(s(f("k", StringType()), f("v", StringType())))),
        f("meta", s(f("a", LongType()))),
    )
    got = [(c.parent, c.name, c.path) for c in added_columns(TABLE, batch)]
    assert got == [
        ("user", "age", "user.age"),
        ("tags.element", "v", "tags.element.v"),
        (None, "meta", "meta"),
    ]


def test_merged_appends_new_fields_where_evolution_puts_them_and_keeps_table_types() -> None:
    batch = s(f("extra", StringType()), f("id", DoubleType()), f("user", s(f("age", LongType()))))
    m = merged(TABLE, batch)
    assert [x.name for x in m.fields] == ["id", "user", "tags", "extra"]
    assert m["id"].dataType == LongType()  # the table's type wins; a misfit value is reported, not nulled
    assert [x.name for x in m["user"].dataType.fields] == ["name", "age"]  # type: ignore[attr-defined]


def test_parse_schema_catches_corrupt_records() -> None:
    assert parse_schema(TABLE).fieldNames()[-1] == CORRUPT_COLUMN
