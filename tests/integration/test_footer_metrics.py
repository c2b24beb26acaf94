"""A file described from the JSON of its footer's metrics (iceberg/footer_metrics.py, read in
Python) must be the file Iceberg's builders and footer reader describe: the same metrics, partition
and content, or readers would skip files that hold their rows. Both are made here from the same
footers of every column type, mode and edge, and compared through ContentFileParser.toJson. Only
the JVM is used (Iceberg's in-memory catalog); the session is the job's."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from py4j import clientserver
from pyspark.sql import SparkSession

from icesink.iceberg import footer_metrics
from icesink.iceberg.file_descriptions import Described
from icesink.iceberg.jvm import jvm, string_array
from icesink.iceberg.warm_up import in_memory_namespace
from icesink.model import WrittenFile
from icesink.tasks.parquet_files import dictionary_columns, footer_file

pytestmark = pytest.mark.integration


def _f(name: str, t: pa.DataType, field_id: int, nullable: bool = True) -> pa.Field:
    return pa.field(name, t, nullable, {b"PARQUET:field_id": str(field_id).encode()})


# Every column type the tasks write, with the Iceberg schema the table has.
ARROW = pa.schema([
    _f("id", pa.int64(), 1, False),
    _f("flag", pa.bool_(), 2),
    _f("small", pa.int16(), 3),
    _f("n", pa.int32(), 4),
    _f("f", pa.float32(), 5),
    _f("d", pa.float64(), 6),
    _f("s", pa.string(), 7),
    _f("b", pa.binary(), 8),
    _f("fx", pa.binary(4), 9),
    _f("u", pa.uuid(), 10),
    _f("amount", pa.decimal128(9, 2), 11),
    _f("big", pa.decimal128(38, 10), 12),
    _f("day", pa.date32(), 13),
    _f("t", pa.time64("us"), 14),
    _f("ts", pa.timestamp("us"), 15),
    _f("tstz", pa.timestamp("us", tz="UTC"), 16),
    _f("st", pa.struct([_f("x", pa.int32(), 17), _f("y", pa.string(), 18)]), 19),
    _f("tags", pa.list_(_f("element", pa.string(), 20)), 21),
    _f("attrs", pa.map_(_f("key", pa.string(), 22, False), _f("value", pa.int64(), 23)), 24),
    _f("nothing", pa.string(), 25),
    _f("items", pa.list_(_f("element", pa.struct([_f("q", pa.int32(), 26)]), 27)), 28),
])  # fmt: skip


def _field(field_id: int, name: str, kind: Any, required: bool = False) -> dict[str, Any]:
    return {"id": field_id, "name": name, "required": required, "type": kind}


ICEBERG: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        _field(1, "id", "long", True), _field(2, "flag", "boolean"), _field(3, "small", "int"),
        _field(4, "n", "int"), _field(5, "f", "float"), _field(6, "d", "double"), _field(7, "s", "string"),
        _field(8, "b", "binary"), _field(9, "fx", "fixed[4]"), _field(10, "u", "uuid"),
        _field(11, "amount", "decimal(9, 2)"), _field(12, "big", "decimal(38, 10)"), _field(13, "day", "date"),
        _field(14, "t", "time"), _field(15, "ts", "timestamp"), _field(16, "tstz", "timestamptz"),
        _field(19, "st", {"type": "struct", "fields": [_field(17, "x", "int"), _field(18, "y", "string")]}),
        _field(21, "tags", {"type": "list", "element-id": 20, "element": "string", "element-required": False}),
        _field(24, "attrs", {"type": "map", "key-id": 22, "key": "string", "value-id": 23, "value": "long",
                             "value-required": False}),
        _field(25, "nothing", "string"),
        _field(28, "items", {"type": "list", "element-id": 27, "element-required": False,
                             "element": {"type": "struct", "fields": [_field(26, "q", "int")]}}),
    ],
}  # fmt: skip

LONG = "a string of more than sixteen code points"
EDGES = [
    "\U0010ffff" * 20,  # no upper bound can be made
    "x" * 15 + "\U0010ffff" + "tail",  # the 15th code point is incremented
    "y" * 15 + "\ud7ff".encode("utf-16", "surrogatepass").decode("utf-16") + "tail",  # U+D7FF -> U+E000
    "é" * 17,
    "😀" * 17,
]


def _rows(n: int, start: int = 0, strings: list[str] | None = None) -> pa.Table:
    texts: list[str | None] = [*strings] if strings else [LONG, "b", "é", "😀 emoji", "", None]
    floats = [0.0, -0.0, 1.5, float("nan"), -3.25, None]
    return pa.table(
        {
            "id": pa.array([start + i for i in range(n)], pa.int64()),
            "flag": [i % 3 == 0 if i % 5 else None for i in range(n)],
            "small": pa.array([(i % 200) - 100 for i in range(n)], pa.int16()),
            "n": pa.array([None if i % 4 == 0 else i * 1000 - 5 for i in range(n)], pa.int32()),
            "f": pa.array([floats[i % len(floats)] for i in range(n)], pa.float32()),
            "d": pa.array([floats[(i + 1) % len(floats)] for i in range(n)], pa.float64()),
            "s": [texts[i % len(texts)] for i in range(n)],
            "b": [None if i % 3 == 0 else bytes([0xFF] * 20 + [i % 256]) for i in range(n)],
            "fx": pa.array([bytes([i % 256, 0, 0xFF, 1]) for i in range(n)], pa.binary(4)),
            "u": pa.array([uuid.UUID(int=(i * 7919) << 64 | i).bytes for i in range(n)], pa.uuid()),
            "amount": pa.array([Decimal(i * 37 - 500) / 100 for i in range(n)], pa.decimal128(9, 2)),
            "big": pa.array([Decimal(10**27 - i) / 10**10 * (-1) ** i for i in range(n)], pa.decimal128(38, 10)),
            "day": pa.array([i * 40 - 3000 for i in range(n)], pa.int32()).cast(pa.date32()),
            "t": pa.array([i * 1_000_003 for i in range(n)], pa.time64("us")),
            "ts": pa.array([1_700_000_000_000_000 + i * 999 for i in range(n)], pa.timestamp("us")),
            "tstz": pa.array([-1_000_000 + i for i in range(n)], pa.timestamp("us", tz="UTC")),
            "st": [None if i % 7 == 0 else {"x": i, "y": LONG[: i % 30]} for i in range(n)],
            "tags": [["a", "b"] if i % 2 else None for i in range(n)],
            "attrs": [[("k", i)] if i % 2 else None for i in range(n)],
            "nothing": pa.nulls(n, pa.string()),
            "items": [[{"q": i}] for i in range(n)],
        },
        schema=ARROW,
    )


def _footer(rows: pa.Table, **options: Any) -> bytes:
    """The footer of `rows` written as the tasks write files (parquet_files.RollingWriter)."""
    footers: list[pq.FileMetaData] = []
    written = {"compression": "zstd", "use_dictionary": dictionary_columns(rows.schema), "store_schema": False}
    pq.write_table(rows, pa.BufferOutputStream(), metadata_collector=footers, **{**written, **options})
    return footer_file(footers[0])


_TABLES = iter(range(1_000_000))


def _table(
    spark: SparkSession, properties: dict[str, str], partition: list[dict[str, Any]] | None = None,
    catalog: Any = None, name: str | None = None, iceberg: dict[str, Any] = ICEBERG,
) -> Any:  # fmt: skip
    view = jvm(spark)
    ice = view.org.apache.iceberg
    namespace = ice.catalog.Namespace.of(string_array(spark, ["m"]))
    if catalog is None:
        catalog, namespace = in_memory_namespace(spark, "footer-metrics", "m")
    schema = ice.SchemaParser.fromJson(json.dumps(iceberg))
    spec = ice.PartitionSpecParser.fromJson(schema, json.dumps({"spec-id": 0, "fields": partition or []}))
    props = view.java.util.HashMap()
    props.put("format-version", "2")
    for k, v in properties.items():
        props.put(k, v)
    identifier = ice.catalog.TableIdentifier.of(namespace, name or f"t{next(_TABLES)}")
    return catalog.createTable(identifier, schema, spec, props)


def _both(spark: SparkSession, table: Any, f: WrittenFile, keys: list[str] | None = None) -> tuple[Any, Any]:
    """The file as JSON read back by Iceberg, and as Iceberg's builders make it: each as
    ContentFileParser.toJson writes it, parsed. The first must have been made from JSON (not left
    to the builders, which would make the comparison hold for nothing)."""
    parser = jvm(spark).org.apache.iceberg.ContentFileParser
    out = []
    for from_footer in (True, False):
        with _py4j_commands() as sent:
            described = Described(spark, table, from_footers=from_footer)
            made = described.data_file(f) if keys is None else described.equality_deletes(f, keys)
        assert any("\nfromJson\n" in c for c in sent) == from_footer, "described from JSON"
        out.append(_maps(json.loads(parser.toJson(made, table.spec()))))
    return out[0], out[1]


def _maps(described: dict[str, Any]) -> dict[str, Any]:
    """The metrics maps ({"keys": [...], "values": [...]}, in a HashMap's order) as dicts."""
    return {
        k: dict(zip(v["keys"], v["values"], strict=True)) if isinstance(v, dict) and "keys" in v else v
        for k, v in described.items()
    }


MODES = [
    {},
    {"write.metadata.metrics.default": "full"},
    {"write.metadata.metrics.default": "counts"},
    {"write.metadata.metrics.default": "none", "write.metadata.metrics.column.s": "truncate(4)"},
    {
        "write.metadata.metrics.default": "truncate(3)",
        "write.metadata.metrics.column.s": "full",
        "write.metadata.metrics.column.st.y": "none",
        "write.metadata.metrics.column.tags.element": "none",
        "write.metadata.metrics.column.attrs.value": "counts",
    },
    {"write.metadata.metrics.max-inferred-column-defaults": "6"},  # the first 6 columns only
]


def _mode_of(spark: SparkSession, table: Any) -> Any:
    config = jvm(spark).org.apache.iceberg.MetricsConfig.forTable(table)
    return lambda name: str(config.columnMode(name))


def _named(properties: dict[str, str]) -> str:
    return ",".join(f"{k[23:]}={v}" for k, v in properties.items()) or "default"


@pytest.mark.parametrize("properties", MODES, ids=_named)
def test_every_type_and_mode_described_as_iceberg_does(spark: SparkSession, properties: dict[str, str]) -> None:
    table = _table(spark, properties)
    mode_of = _mode_of(spark, table)
    for rows, options in (
        (_rows(60), {}),
        (_rows(3000, 7, EDGES), {"row_group_size": 1000}),  # bounds across row groups
        (_rows(40, 3, EDGES), {"store_decimal_as_integer": True}),  # decimals as int32 and int64
        (_rows(5).slice(1, 1), {}),  # one row
    ):
        footer = _footer(rows, **options)
        assert footer_metrics.metrics(footer, mode_of) is not None  # read here, not left to Java
        for content, keys in (("data", None), ("deletes", ["id"]), ("deletes", ["id", "s"])):
            f = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", rows.num_rows, 4096, content, (), footer)
            from_json, built = _both(spark, table, f, keys)
            assert from_json == built, (content, options)


EDGE_COLUMNS = [
    ("s", ["y" * 15 + "\ud7ff" + "tail", "a"]),  # U+D7FF's next scalar value is U+E000
    ("s", ["x" * 15 + "\U0010ffff" + "tail", "a"]),  # the last code point cannot grow: the one before
    ("s", ["\U0010ffff" * 20]),  # no upper bound at all
    ("s", ["é" * 17, "😀" * 17]),
    ("b", [bytes([1] * 15 + [0xFF] * 3), b""]),
    ("b", [bytes([0xFF] * 20), None]),
    ("b", [bytes([5] * 15 + [0xFE, 0]), None]),
    ("f", [0.0, 1.0]),  # a zero min is -0.0, a zero max +0.0 (pyarrow writes them so, parquet-java reads so)
    ("f", [-1.0, -0.0]),
    ("d", [0.0, None]),
    ("d", [float("nan"), 2.5]),
    ("d", [float("nan"), None]),
]


@pytest.mark.parametrize(("column", "values"), EDGE_COLUMNS)
@pytest.mark.parametrize(("mode", "row_group"), [("truncate(16)", None), ("full", None), ("truncate(1)", 1)])
def test_bounds_at_their_edges(
    spark: SparkSession, column: str, values: list[Any], mode: str, row_group: int | None
) -> None:  # fmt: skip
    # A row group a value (`row_group` 1): an all-null or all-NaN chunk among others, zeros across chunks.
    table = _table(spark, {"write.metadata.metrics.default": mode})
    rows = _with(_rows(len(values)), column, values)
    footer = _footer(rows, row_group_size=row_group)
    assert footer_metrics.metrics(footer, _mode_of(spark, table)) is not None
    f = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", rows.num_rows, 4096, "data", (), footer)
    from_json, built = _both(spark, table, f)
    assert from_json == built


def _with(rows: pa.Table, column: str, values: list[Any]) -> pa.Table:
    i = rows.schema.get_field_index(column)
    return rows.set_column(i, rows.schema.field(i), pa.array(values, rows.schema.field(i).type))


@pytest.mark.parametrize(("values", "row_group"), [(["z" * 5000, None, "m", "n"], 2), (["z" * 5000, "m", "n"], 1)])
def test_a_value_without_statistics_leaves_its_column_without_bounds(
    spark: SparkSession, values: list[str | None], row_group: int
) -> None:  # fmt: skip
    # The writer leaves a chunk's min and max out for a value over 4 KiB. Iceberg's reader then
    # takes the bounds of the other row groups, which do not hold that value: a reader looking for
    # it would skip the file. Read here, the column has no bounds; its counts stay.
    table = _table(spark, {})
    s_id = 7
    rows = _with(_rows(len(values)), "s", values)
    footer = _footer(rows, row_group_size=row_group)
    f = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", rows.num_rows, 4096, "data", (), footer)
    from_json, built = _both(spark, table, f)
    assert built["upper-bounds"][s_id] == b"n".hex().upper()  # Iceberg's: below "zzz..."
    assert s_id not in from_json["upper-bounds"]
    assert s_id not in from_json["lower-bounds"]
    assert from_json["value-counts"][s_id] == len(values)
    for bounds in ("lower-bounds", "upper-bounds"):
        built[bounds].pop(s_id)
    assert from_json == built


def test_metrics_follow_the_tables_properties_as_they_change(spark: SparkSession) -> None:
    table = _table(spark, {})
    footer = _footer(_rows(20))
    f = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", 20, 4096, "data", (), footer)
    before, _ = _both(spark, table, f)
    table.updateProperties().set("write.metadata.metrics.default", "counts").commit()
    from_json, built = _both(spark, table, f)
    assert from_json == built
    assert before["lower-bounds"]
    assert from_json["lower-bounds"] == {}


def test_a_file_of_no_rows_is_left_to_icebergs_reader() -> None:
    # Its chunks carry no statistics (the tasks never write such a file).
    assert footer_metrics.metrics(_footer(_rows(0)), lambda name: "full") is None


PARTITIONED = [
    {"name": "s_trunc", "transform": "truncate[3]", "source-id": 7, "field-id": 1000},
    {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001},
    {"name": "day_day", "transform": "day", "source-id": 13, "field-id": 1002},
    {"name": "ts_hour", "transform": "hour", "source-id": 15, "field-id": 1003},
    {"name": "flag_void", "transform": "void", "source-id": 2, "field-id": 1004},
]


@pytest.mark.parametrize(
    "values",
    [("a s", "3", "2024-02-29", "473000", None), (None, "15", None, "-1", None), ("", "0", "1969-12-31", None, None)],
)
def test_partitioned_files_carry_the_partition_the_builders_parse(spark: SparkSession, values: tuple[Any, ...]) -> None:
    table = _table(spark, {}, PARTITIONED)
    rows = _rows(20)
    footer = _footer(rows)
    for content, keys in (("data", None), ("deletes", ["id"])):
        f = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", rows.num_rows, 999, content, values, footer)
        from_json, built = _both(spark, table, f, keys)
        assert from_json == built
        assert from_json["partition"] == [
            values[0], int(values[1]), values[2], None if values[3] is None else int(values[3]), None
        ]  # fmt: skip


@contextmanager
def _py4j_commands() -> Iterator[list[str]]:
    """The py4j commands the driver sends inside the block."""
    sent: list[str] = []
    original = clientserver.ClientServerConnection.send_command

    def send(self: clientserver.ClientServerConnection, command: str) -> str:
        sent.append(command)
        return str(original(self, command))

    with pytest.MonkeyPatch.context() as m:
        m.setattr(clientserver.ClientServerConnection, "send_command", send)
        yield sent


def test_a_commit_describes_each_file_in_two_py4j_calls(spark: SparkSession) -> None:
    # A Debezium batch into a bucket(16) table commits 32 files: the builders took ~14 calls each.
    table = _table(spark, {}, PARTITIONED[1:2])
    footer = _footer(_rows(30))
    files = [
        WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", 30, 999, content, (str(b),), footer)
        for b in range(16)
        for content in ("data", "deletes")
    ]
    first = Described(spark, table)  # the table's metrics modes and key ids, asked once a table version
    first.data_file(files[0])
    first.equality_deletes(files[1], ["id"])
    with _py4j_commands() as sent:
        described = Described(spark, table)
        setup = len(sent)
        for f in files:
            if f.content == "data":
                described.data_file(f)
            else:
                described.equality_deletes(f, ["id"])

    def calls(commands: list[str]) -> list[str]:  # not py4j's releases of Java objects
        return [c.split("\n")[2] for c in commands if c.startswith("c\n")]

    assert len(calls(sent[:setup])) <= 10, calls(sent[:setup])  # the table, its version's key
    assert calls(sent[setup:]) == ["readTree", "fromJson"] * len(files), calls(sent[setup:])


def test_a_table_created_again_under_its_name_is_described_by_its_own_columns(spark: SparkSession) -> None:
    # What is asked of a table once (metrics modes, partition types, key ids) is the table's own:
    # another table of the same name, schema id and spec id has other field ids and partitions.
    catalog, _ = in_memory_namespace(spark, "footer-metrics-again", "m")
    first = _table(spark, {}, PARTITIONED[1:2], catalog=catalog, name="again")
    rows = _rows(10)
    footer = _footer(rows)
    f = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", 10, 999, "deletes", ("3",), footer)
    assert Described(spark, first).equality_deletes(f, ["id"]).equalityFieldIds().get(0) == 1

    catalog.dropTable(jvm(spark).org.apache.iceberg.catalog.TableIdentifier.parse("m.again"))
    moved = {**ICEBERG, "fields": ICEBERG["fields"][1:] + ICEBERG["fields"][:1]}  # the catalog numbers ids anew
    again = _table(spark, {}, [{"name": "day", "transform": "day", "source-id": 13, "field-id": 1000}],
                   catalog=catalog, name="again", iceberg=moved)  # fmt: skip
    g = WrittenFile(f"memory://m/{uuid.uuid4().hex}.parquet", 10, 999, "deletes", ("2024-02-29",), _footer(rows))
    from_json, built = _both(spark, again, g, ["id"])
    assert from_json == built
    key_id = int(again.schema().findField("id").fieldId())
    assert key_id != 1
    assert from_json["equality-ids"] == [key_id]
    assert from_json["partition"] == ["2024-02-29"]
