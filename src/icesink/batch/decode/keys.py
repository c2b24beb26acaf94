"""Record keys, decoded next to the values: with the key decoder (Avro, JSON) or as plain strings.

The decoded key and its error sit in two helper columns until the table's rows take them: the key
joins the row as the key column, and its error counts after the value's."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructType

from icesink.batch.decode import ERROR, ROW, Decoder, is_pending, no_error
from icesink.schema import evolution

KEY_ROW = "__icesink_key_row"
KEY_ERROR = "__icesink_key_error"


def string_keys(records: DataFrame) -> tuple[DataFrame, DataType]:
    """`records` with the key as a string (never an error)."""
    return records.withColumn(KEY_ROW, F.col("key").cast("string")).withColumn(KEY_ERROR, no_error()), StringType()


def decode_keys(
    records: DataFrame, decoder: Decoder, key_column: str, current: StructType, planned: Any,
    guessed: bool = False,
) -> tuple[DataFrame, DataType]:  # fmt: skip
    """`records` with the decoded key and its error (stage `key ...`, or pending; a null key is no
    error), and the key's type: what the table's `key_column` holds (`current`: the table's schema)
    merged with the batch's. `planned`, `guessed`: as for `Decoder.inspect`."""
    inspected = decoder.inspect(records, planned, guessed)
    have = current[key_column].dataType if key_column in current.fieldNames() else StructType([])
    key_target = evolution.merged(have, inspected.schema) if isinstance(have, StructType) else inspected.schema
    parsed = inspected.parse(key_target)
    failed = F.col(ERROR)
    labelled = F.struct(
        F.concat(F.lit("key "), failed["stage"]).alias("stage"),
        failed["error_class"].alias("error_class"),
        failed["message"].alias("message"),
    )
    key_error = (
        F.when(F.col("key").isNull() | failed.isNull(), no_error()).when(is_pending(failed), failed).otherwise(labelled)
    )
    # Exactly the key's columns: a decoder's row may carry helper fields (JSON's corrupt-record column).
    key_row = F.col(ROW)
    if isinstance(key_target, StructType):
        fields = [key_row[f.name].alias(f.name) for f in key_target.fields]
        key_row = F.when(key_row.isNull(), F.lit(None).cast(key_target)).otherwise(F.struct(*fields))
    parsed = parsed.withColumn(KEY_ERROR, key_error).withColumn(KEY_ROW, key_row).drop(ROW, ERROR)
    return parsed, key_target
