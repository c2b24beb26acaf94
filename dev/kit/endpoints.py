"""The local stack's endpoints (`eval "$(dev/stack env)"`), with loopback defaults."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

KAFKA = os.environ.get("ICESINK_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
CATALOG_URI = os.environ.get("ICESINK_CATALOG_URI", "http://127.0.0.1:8181")
# Project Nessie's Iceberg REST API (`dev/stack up --with-nessie`): the second catalog of the tests.
NESSIE_URI = os.environ.get("ICESINK_NESSIE_URI", "http://127.0.0.1:19120/iceberg")
S3_ENDPOINT = os.environ.get("ICESINK_S3_ENDPOINT", "http://127.0.0.1:7070")
REGISTRY_URL = os.environ.get("ICESINK_REGISTRY_URL", "http://127.0.0.1:8081/apis/ccompat/v7")
SPARK_MASTER = os.environ.get("ICESINK_SPARK_MASTER", "spark://127.0.0.1:7077")
SPARK_MASTER_UI = os.environ.get("ICESINK_SPARK_MASTER_UI", "http://127.0.0.1:8090")
# Where the cluster's workers keep each application's folders (dev/stack's start_spark).
SPARK_WORK = Path(os.environ.get("ICESINK_SPARK_WORK", Path.home() / ".cache/icesink/stack/data/spark/work"))
