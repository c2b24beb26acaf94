"""JSON values (or keys) -> rows.

Plain JSON: types are inferred by Spark's JSON reader in the JVM over the whole batch (`1` and
`2.5` unify to double), then every value is parsed with the table's (evolved) schema. Once the
table exists, a batch is parsed with the table's schema in one pass instead, and the records it
does not cover (a new key, a value of a wider type) are left pending: a second pass infers over
those only (batch/new_schemas.py).

Kafka Connect JSON (`{"schema": ..., "payload": ...}`, JsonConverter with schemas on, Debezium's
default): the record's own Connect schema decides the types, not inference (see `connect`): a
Decimal becomes a decimal, exactly; a Debezium timestamp a timestamp. The batch's distinct schemas
are found in one aggregate, and each record is parsed with its own schema (a CASE on the schema's
hash evaluates only the matching branch), like Avro records with their writer schemas. Once a
decoder has seen Connect schemas it looks for them first, so such topics pay no inference pass.

Values framed by Confluent's JSONSerializer (0x00 + schema id + JSON) are unframed first.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, AtomicType, DataType, StructType

from icesink.batch.decode import VALUE, ExpressionMemo, Source, debezium
from icesink.batch.decode.debezium import EnvelopeSpec
from icesink.batch.decode.json_rows import (
    PARSE_OPTIONS,
    InspectedJson,
    SchemaInBatch,
    corrupt_under,
    json_text,
    schema_hash,
    schema_text,
    unfit,
)
from icesink.iceberg.jvm import jsession, jvm
from icesink.schema import connect
from icesink.schema.connect import ConnectSchema
from icesink.schema.connect_sample import sample_schemas
from icesink.schema.evolution import CORRUPT_COLUMN, merged

log = logging.getLogger(__name__)


class Unsure:
    """What `JsonDecoder.connect_rows_of` says of a sample only Spark's reading may judge."""


UNSURE = Unsure()


def _flat(t: DataType) -> bool:
    return isinstance(t, AtomicType) or (isinstance(t, ArrayType) and isinstance(t.elementType, AtomicType))


def _looks_like_connect(inferred: StructType) -> bool:
    names = inferred.fieldNames()
    if "schema" not in names or "payload" not in names:
        return False
    schema = inferred["schema"].dataType
    return isinstance(schema, StructType) and "type" in schema.fieldNames()


class JsonDecoder:
    scans = True  # infers types over the batch

    def __init__(self, spark: SparkSession, envelope: EnvelopeSpec | None = None, src: Source = VALUE) -> None:
        self._spark = spark
        self._envelope = envelope
        self._src = src
        # Set once a batch carried Connect schemas: later batches look for them first.
        self._connect_seen = False
        # Set once a sample of a batch (`connect_rows`) carried none: the one-pass job stops looking.
        self._connect_absent = False
        # Parsed Connect schemas by their text (Debezium repeats one schema in every record).
        self._parsed: dict[str, SchemaInBatch] = {}
        self._memo: ExpressionMemo[tuple[Column, Column, Column]] = ExpressionMemo()

    def plan_column(self) -> None:
        return None

    def guess(self, seen: list[Any] | None, shape: DataType | None, topics: Sequence[str]) -> StructType | None:
        """The table's shape of these records, when plain JSON can be parsed with it in one pass
        and a record it does not cover be told apart (`unfit`): no envelope, no Connect schemas
        met so far, only primitive columns and arrays of them."""
        if self._envelope is not None or self._connect_seen or not isinstance(shape, StructType) or not shape.fields:
            return None
        return shape if all(_flat(f.dataType) for f in shape.fields) else None

    @property
    def envelope(self) -> EnvelopeSpec | None:
        return self._envelope

    @property
    def connect(self) -> bool | None:
        """Whether the records are Connect JSON, as far as the job has seen (None: not known yet)."""
        if self._connect_seen:
            return True
        return False if self._connect_absent else None

    def connect_rows(self, records: DataFrame) -> StructType | None:
        """The row type of `records` (a sample of a table's share of a batch) when every one is
        Connect JSON: their schemas' rows merged, as `inspect` makes a new table's columns; None
        when one is not, or has a schema Spark's path does not read (it makes them dead letters)."""
        schemas, others = self._connect_schemas(records.where(F.col(self._src.column).isNotNull()))
        return self._sampled_rows([s.row if s.schema is not None else None for s in schemas], others)

    def connect_rows_of(self, values: Sequence[bytes | None]) -> StructType | Unsure | None:
        """`connect_rows` of a sample's records read by the driver (`values` of the decoder's
        column), found in this process, not by a Spark job; `UNSURE` when a record may read
        otherwise in Spark (schema/connect_sample.py): only `connect_rows` says then."""
        found = sample_schemas(v for v in values if v is not None)
        if found is None:
            return UNSURE
        texts, others = found
        return self._sampled_rows([self._row_of(text) for text in texts], others)

    def _sampled_rows(self, rows: Sequence[StructType | None], others: int) -> StructType | None:
        """The merged row of a sample's distinct Connect schemas (None: one Spark's path does not
        read), with `others` records without one; learns whether the records are Connect JSON."""
        if rows:
            self._connect_seen = True
        elif others:
            self._connect_absent = True
        if others or not rows or None in rows:
            return None
        row = StructType([])
        for r in rows:
            assert r is not None
            row = merged(row, r)
        return row

    @property
    def column(self) -> str:
        """The Kafka record's column the decoder reads (value or key)."""
        return self._src.column

    @property
    def plain(self) -> bool:
        """Whether the records are plain JSON, as far as the job has seen: no envelope, no Connect schemas."""
        return self._envelope is None and not self._connect_seen

    def plain_columns(self, records: DataFrame | StructType, nested: bool = False) -> StructType | None:
        """The columns Spark infers from `records` (a sample of a new table's, or the columns
        inferred from one as Spark would: schema/json_inference.py), when they are plain JSON that
        could be parsed with them in one pass (as `guess` asks of a table's shape; with `nested`,
        structs and arrays of them too: the one-pass decoder's own check)."""
        if not self.plain:
            return None
        if isinstance(records, StructType):
            inferred = records
        else:
            inferred = self._infer(records.where(F.col(self._src.column).isNotNull()))
        if _looks_like_connect(inferred):
            return None
        if nested:
            return inferred if inferred.fields else None
        return self.guess(None, inferred, ())

    def envelope_row(self, records: DataFrame) -> StructType | None:
        """The row type Spark infers from `records` (a sample of a new table's) when they are
        Debezium change events without Connect schemas, as `inspect` makes a new table's columns
        from the whole batch; None when they are not."""
        if self._envelope is None or self._connect_seen:
            return None
        inferred = self._infer(records.where(F.col(self._src.column).isNotNull()))
        if not inferred.fields or _looks_like_connect(inferred):
            return None
        try:
            return debezium.row_type(inferred, self._envelope)
        except debezium.EnvelopeError:
            return None

    def pending(self, planned: Any) -> Column:
        """The records a guessed inspect with `planned` (a shape from `guess`) leaves pending."""
        assert isinstance(planned, StructType)
        return unfit(self._src, planned, corrupt_under(self._src, planned))

    def inspect(self, records: DataFrame, planned: Any = None, guessed: bool = False) -> InspectedJson:
        if guessed and isinstance(planned, StructType):
            # Parsed with the table's shape; the records it does not cover wait for a second pass.
            return InspectedJson(records, planned, [], None, self._src, guessed=True, memo=self._memo)
        present = records.where(F.col(self._src.column).isNotNull())
        if not self._connect_seen:
            inferred = self._infer(present)
            if not _looks_like_connect(inferred):
                # A batch with records and no Connect schemas: the one-pass job need not sample the next.
                self._connect_absent = self._connect_absent or bool(inferred.fields)
                return InspectedJson(records, inferred, [], self._envelope, self._src, memo=self._memo)
            self._connect_seen = True
        schemas, others = self._connect_schemas(present)
        inferred_rest = None
        if others or not schemas:
            hashes = [F.lit(s.hash) for s in schemas]
            h = schema_hash(self._src)
            rest = present.where(h.isNull() | ~h.isin(*hashes)) if hashes else present
            inferred_rest = self._infer(rest)
        return InspectedJson(records, inferred_rest, schemas, self._envelope, self._src)

    def _infer(self, records: DataFrame) -> StructType:
        strings = records.select(json_text(self._src))._jdf
        dataset = getattr(strings, "as")(jvm(self._spark).org.apache.spark.sql.Encoders.STRING())
        reader = jsession(self._spark).read()
        # A field that is null in every record of the batch says nothing about its type: it
        # becomes a column once a record carries a value (else it would become a string column).
        for k, v in {**PARSE_OPTIONS, "dropFieldIfAllNull": "true"}.items():
            reader = reader.option(k, v)
        inferred = StructType.fromJson(json.loads(reader.json(dataset).schema().json()))
        return StructType([f for f in inferred.fields if f.name != CORRUPT_COLUMN])

    def _connect_schemas(self, present: DataFrame) -> tuple[list[SchemaInBatch], int]:
        """The batch's distinct Connect schemas (one aggregate), and how many records carry none."""
        text = schema_text(self._src)
        rows = (
            present.groupBy(schema_hash(self._src).alias("h"))
            .agg(F.first(text).alias("s"), F.count(F.lit(1)).alias("n"))
            .collect()
        )
        schemas, others = [], 0
        for r in rows:
            if r.h is None or not connect.is_connect_schema(r.s):
                others += r.n
                continue
            schemas.append(self._schema(int(r.h), r.s))
        log.debug("connect schemas in batch: %d; records without one: %d", len(schemas), others)
        return schemas, others

    def _read(self, text: str) -> tuple[ConnectSchema, StructType]:
        """A Connect schema's text parsed, and the row its records give (the envelope's, for
        change events); raises ConnectSchemaError or EnvelopeError."""
        schema = connect.parse_schema(text)
        row = schema.result_type
        return schema, (debezium.row_type(row, self._envelope) if self._envelope is not None else row)

    def _row_of(self, text: str) -> StructType | None:
        try:
            return self._read(text)[1]
        except (connect.ConnectSchemaError, debezium.EnvelopeError):
            return None

    def _schema(self, h: int, text: str) -> SchemaInBatch:
        found = self._parsed.get(text)  # the hash is the text's: the same text, the same hash
        if found is not None:
            return found
        try:
            found = SchemaInBatch(h, *self._read(text))
        except (connect.ConnectSchemaError, debezium.EnvelopeError) as e:
            found = SchemaInBatch(h, None, StructType([]), f"{self._src.column} Connect schema: {e}")
        if len(self._parsed) >= 64:
            self._parsed.clear()
        self._parsed[text] = found
        return found
