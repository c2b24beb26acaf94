"""What a Python worker imports to run the one-pass tasks: none of the config's pydantic models
(icesink/modes.py: that import was a third of a worker's start, which every first batch waits for)."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow as pa
import pytest
from pyspark import cloudpickle
from pyspark.sql import types as T

from icesink.batch.direct_avro import direct_avro
from icesink.config import S3Config, UnknownTables, Unmatched, WriteMode
from icesink.kafka import wire
from icesink.modes import UnknownTables as TaskUnknownTables
from icesink.modes import Unmatched as TaskUnmatched
from icesink.modes import WriteMode as TaskWriteMode
from icesink.tasks.change_rows import ChangeSpec
from icesink.tasks.files import WriteTask
from icesink.tasks.storage import StorageSettings
from icesink.tasks.table_out import DirectTable

# The last line of each probe: what of the config the process holds.
_HELD = """
print(" ".join(sorted(m for m in sys.modules if m == "pydantic" or m == "yaml" or m.startswith("icesink.config"))))
"""
_PROBE = (
    """
import importlib, pkgutil, sys
import pyspark.worker  # what PySpark's worker holds before it unpickles a task
import icesink.tasks
for m in pkgutil.iter_modules(icesink.tasks.__path__):
    importlib.import_module("icesink.tasks." + m.name)
"""
    + _HELD
)


_UNPICKLE = (
    """
import pickle, sys
import pyspark.worker
table = pickle.loads(sys.stdin.buffer.read())
"""
    + _HELD
)


def test_the_tasks_modules_import_no_config() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], f"a task's import pulls in {done.stdout.strip()}"


@pytest.mark.parametrize(
    ("config", "task"),
    [(WriteMode, TaskWriteMode), (Unmatched, TaskUnmatched), (UnknownTables, TaskUnknownTables)],
)
def test_the_config_and_the_tasks_share_one_enum(config: type, task: type) -> None:
    # A plan pickles the member by its class's module: icesink.modes, which needs no pydantic.
    assert config is task
    assert config.__module__ == "icesink.modes"


def test_a_planned_table_unpickles_in_a_worker_without_the_config() -> None:
    # A changelog table with Avro keys, planned by the driver's code from a parsed config's S3
    # section: what a task unpickles must not bring the config's models back in.
    value = {
        "type": "record",
        "name": "V",
        "fields": [{"name": "id", "type": "long"}, {"name": "op", "type": "string"}],
    }
    key = {"type": "record", "name": "K", "fields": [{"name": "id", "type": "long"}]}
    values = T.StructType([T.StructField("id", T.LongType()), T.StructField("op", T.StringType())])
    keys = T.StructType([T.StructField("id", T.LongType(), False)])
    decoder = direct_avro({wire.id_key(1): json.dumps(value)}, values)
    key_decoder = direct_avro({wire.id_key(2): json.dumps(key)}, keys)
    assert decoder is not None
    assert key_decoder is not None
    arrow = pa.schema(
        [("id", pa.int64()), ("op", pa.string()), ("_key", pa.struct([pa.field("id", pa.int64(), False)]))]
    )
    storage = StorageSettings.of(S3Config(endpoint="http://127.0.0.1:7070", access_key_id="k", secret_access_key="s"))
    task = WriteTask("db.t", arrow, "s3://b/t/", "p", storage=storage)
    spec = ChangeSpec(WriteMode.CHANGELOG, ("id",), "op", "_key")
    table = DirectTable(task, decoder, {("t", 0): (0, 9)}, changes=spec, key_column="_key", key_decoder=key_decoder)
    done = subprocess.run(
        [sys.executable, "-c", _UNPICKLE], input=cloudpickle.dumps(table), capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.split() == [], f"a planned table's unpickling pulls in {done.stdout.decode().strip()}"
