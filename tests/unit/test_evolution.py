from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from icesink.schema.evolution import (
    CORRUPT_COLUMN,
    added_columns,
    conflicts,
    flattened,
    merged,
    optional_columns,
    parse_schema,
    respelled,
    widened_columns,
)


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


def test_map_values_gain_fields() -> None:
    table = s(f("attrs", MapType(StringType(), s(f("a", LongType())))))
    batch = s(f("attrs", MapType(StringType(), s(f("a", LongType()), f("b", StringType())))))
    assert [(c.parent, c.name) for c in added_columns(table, batch)] == [("attrs.value", "b")]
    merged_map = merged(table, batch)["attrs"].dataType
    assert isinstance(merged_map, MapType)
    assert merged_map.valueType == s(f("a", LongType()), f("b", StringType()))


def test_promotable_types_widen_everywhere() -> None:
    table = s(
        f("n", IntegerType()),
        f("x", FloatType()),
        f("amount", DecimalType(10, 2)),
        f("inner", s(f("m", IntegerType()))),
        f("list", ArrayType(IntegerType())),
        f("map", MapType(StringType(), FloatType())),
        f("same", LongType()),
    )
    batch = s(
        f("n", LongType()),
        f("x", DoubleType()),
        f("amount", DecimalType(12, 2)),
        f("inner", s(f("m", LongType()))),
        f("list", ArrayType(LongType())),
        f("map", MapType(StringType(), DoubleType())),
        f("same", IntegerType()),
    )
    got = {w.path: (w.old.simpleString(), w.new.simpleString()) for w in widened_columns(table, batch)}
    assert got == {
        "n": ("int", "bigint"),
        "x": ("float", "double"),
        "amount": ("decimal(10,2)", "decimal(12,2)"),
        "inner.m": ("int", "bigint"),
        "list.element": ("int", "bigint"),
        "map.value": ("float", "double"),
    }
    m = merged(table, batch)
    assert m["n"].dataType == LongType()
    assert m["same"].dataType == LongType(), "a narrower batch type keeps the column"
    assert conflicts(m, batch) == []


def test_narrowing_and_other_changes_are_conflicts_naming_column_and_types() -> None:
    table = s(
        f("n", LongType()), f("name", StringType()), f("amount", DecimalType(10, 2)), f("l", ArrayType(LongType()))
    )
    batch = s(
        f("n", StringType()), f("name", LongType()), f("amount", DecimalType(10, 3)), f("l", ArrayType(StringType()))
    )
    m = merged(table, batch)
    assert widened_columns(table, batch) == []
    assert conflicts(m, batch) == [
        "column n is bigint in the table, string in the record",
        "column name is string in the table, bigint in the record",
        "column amount is decimal(10,2) in the table, decimal(10,3) in the record",
        "column l.element is bigint in the table, string in the record",
    ]


def test_required_columns_the_batch_may_leave_null_become_optional() -> None:
    table = s(StructField("id", LongType(), False), StructField("v", s(StructField("a", LongType(), False)), True))
    batch = s(f("id", LongType()), f("v", s(f("a", LongType()))))
    assert optional_columns(table, batch) == ["id", "v.a"]
    assert optional_columns(table, table) == []


def test_case_insensitive_matching_both_ways() -> None:
    table = s(f("userId", LongType()), f("Profile", s(f("Name", StringType()))))
    batch = s(
        f("USERID", LongType()), f("profile", s(f("name", StringType()), f("Age", LongType()))), f("New", LongType())
    )
    matched = respelled(batch, table)
    assert matched.fieldNames() == ["userId", "Profile", "New"]
    assert added_columns(table, matched)[0].path == "Profile.Age"
    target = merged(table, matched)
    spelled = respelled(target, batch)
    assert spelled.fieldNames() == ["USERID", "profile", "New"]
    assert spelled["profile"].dataType == s(f("name", StringType()), f("Age", LongType()))


def test_flattening_joins_struct_paths() -> None:
    batch = s(
        f("id", LongType()),
        f("a", s(f("b", LongType()), f("c", s(f("d", StringType()))))),
        f("l", ArrayType(LongType())),
    )
    assert [(name, path) for name, path, _, _ in flattened(batch, "_")] == [
        ("id", ("id",)),
        ("a_b", ("a", "b")),
        ("a_c_d", ("a", "c", "d")),
        ("l", ("l",)),
    ]
