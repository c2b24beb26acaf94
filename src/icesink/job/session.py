"""The SparkSession the job runs in: Iceberg extensions, the REST catalog on S3, the extra jars."""

from __future__ import annotations

import glob
import os
import shutil
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

import icesink
from icesink.config import Config
from icesink.errors import ConfigError
from icesink.runtime.jvm_lookups import keep_jvm_lookups

JARS_ENV = "ICESINK_JARS_DIR"

# Defaults sized for small clusters and the 2-core local stack; spark.conf in the config wins.
_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    # Each batch is cached once for its planning pass and its write: Kafka values are binary and
    # gain nothing from the cache's compression, which costs 10-30% of that first pass.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.ui.showConsoleProgress": "false",
    # The JVM and its Python workers talk over a Unix domain socket, not TCP on localhost: over TCP
    # a task's first input waited on a delayed ACK, 40-50 ms a Python job (a one-task mapInArrow
    # job took 104-121 ms against 68), which a small batch's one-pass job paid every trigger.
    "spark.python.unix.domain.socket.enabled": "true",
    # The tables of a batch are written side by side, each table's job in its own pool
    # (runtime/parallel.py): a big table's job does not hold every core while small ones wait.
    "spark.scheduler.mode": "FAIR",
    # Metrics (job/metrics.py and Spark's streaming source) on the driver's Prometheus endpoint,
    # /metrics/prometheus on the Spark UI's port, named after the job rather than the app id.
    "spark.metrics.namespace": "${spark.app.name}",
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.ui.prometheus.enabled": "true",
    "spark.sql.streaming.metricsEnabled": "true",
    # The only join icesink plans (changes ordered across batches against the rows a table holds)
    # has nothing to prune, and pruning would trace its key back through every alias of the
    # decode (a Connect envelope: thousands of expressions, rewritten at each level) until the
    # driver's memory is gone. Off for the session: the write plans are run by several threads.
    "spark.sql.optimizer.dynamicPartitionPruning.enabled": "false",
}

# The Python workers' environment (`spark.executorEnv.*`, which PySpark's daemon and its workers get).
# Arrow's memory from jemalloc rather than pyarrow's default pool (mimalloc), which holds on to more
# of what a task frees: a 300,000-record batch's workers peaked 80-230 MB lower (by shape), for the
# same CPU a record but a few per cent more for Debezium's (docs/performance.md). Arrow reads the
# variable once, at its first allocation, which comes before a task's code runs: hence the
# environment, not the tasks' code. A pyarrow without jemalloc warns and keeps its default.
WORKER_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
_DEFAULTS.update({f"spark.executorEnv.{k}": v for k, v in WORKER_ENV.items()})

# PySpark's daemon run by icesink's module, which has the workers import PySpark's installed
# bytecode rather than compile pyspark.zip's sources at each executor's start, where the two are
# one (icesink/worker_daemon.py); only where the workers can import it (`with_worker_daemon`).
WORKER_DAEMON = {"spark.python.daemon.module": "icesink.worker_daemon"}


def with_worker_daemon(
    conf: dict[str, str], config_master: str | None, environ: Mapping[str, str], icesink_file: str
) -> dict[str, str]:
    """`conf` with `WORKER_DAEMON` under it (a setting of its own wins) where the Python workers
    surely import icesink when their daemon starts: a local master, whose workers run this
    process's interpreter, which imports icesink from an installed package (`icesink_file`, not
    in a zip). Elsewhere, Spark's own daemon: a cluster's executors may have icesink only from
    `--py-files`, which PySpark puts on a worker's path for each task, after its daemon started.

    The master is the session's: `conf`'s (the config's spark.conf, applied last), the config's
    `spark.master`, or under spark-submit the MASTER it gives its Python driver. The workers'
    interpreter is PYSPARK_PYTHON's, which PySpark's context alone reads (spark-submit turns
    `spark.pyspark.python` into it)."""
    submitted = "PYSPARK_GATEWAY_PORT" in environ
    master = conf.get("spark.master") or config_master or (environ.get("MASTER") if submitted else None)
    if not master or not master.startswith("local"):
        return conf
    python = shutil.which(environ.get("PYSPARK_PYTHON", "python3"))
    if python is None or os.path.abspath(python) != os.path.abspath(sys.executable):
        return conf
    return {**WORKER_DAEMON, **conf} if os.path.isfile(icesink_file) else conf


def catalog_conf(config: Config) -> dict[str, str]:
    """Spark settings that register the Iceberg REST catalog. Keys with secrets are redacted by Spark."""
    prefix = f"spark.sql.catalog.{config.catalog.name}"
    c = config.catalog
    out = {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": c.uri,
        f"{prefix}.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        f"{prefix}.client.region": config.s3.region,
        f"{prefix}.s3.path-style-access": str(config.s3.path_style_access).lower(),
        # Other clients (maintenance, a second job) change the tables: never serve stale metadata.
        f"{prefix}.cache-enabled": "false",
    }
    if c.warehouse:
        out[f"{prefix}.warehouse"] = c.warehouse
    if c.credential:
        out[f"{prefix}.credential"] = c.credential.get_secret_value()
    if config.s3.endpoint:
        out[f"{prefix}.s3.endpoint"] = config.s3.endpoint
    access, secret = config.s3.resolved_keys()
    if access and secret:
        out[f"{prefix}.s3.access-key-id"] = access
        out[f"{prefix}.s3.secret-access-key"] = secret
    for k, v in c.properties.items():
        out[f"{prefix}.{k}"] = v
    return out


def s3a_conf(config: Config) -> dict[str, str]:
    """Hadoop's S3A file system (an `s3a://` checkpoint) on the same S3 as the tables: derived from
    the one `s3` section. Keys only when the config names them; else S3A's own chain finds them in
    the environment, as PyIceberg and the executors' writer do. Spark redacts `*.secret.key`."""
    s3 = config.s3
    out = {
        "spark.hadoop.fs.s3a.endpoint.region": s3.region,
        "spark.hadoop.fs.s3a.path.style.access": str(s3.path_style_access).lower(),
    }
    if s3.endpoint:
        out["spark.hadoop.fs.s3a.endpoint"] = s3.endpoint
        out["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(s3.endpoint.startswith("https://")).lower()
    if s3.access_key_id and s3.secret_access_key:
        out["spark.hadoop.fs.s3a.access.key"] = s3.access_key_id.get_secret_value()
        out["spark.hadoop.fs.s3a.secret.key"] = s3.secret_access_key.get_secret_value()
    return out


def extra_jars(config: Config) -> list[str]:
    folder = config.spark.jars_dir or os.environ.get(JARS_ENV)
    if not folder:
        return []
    jars = sorted(glob.glob(os.path.join(os.path.expanduser(folder), "*.jar")))
    if not jars:
        raise ConfigError(f"spark.jars_dir: no jars in {folder} (run `dev/stack jars`)")
    return jars


# HotSpot never JIT-compiles a method of more than 8,000 bytes of bytecode, and Spark's whole-stage
# code for a decode (a record's schema-id lookup, from_avro, the row and the error of each writer
# schema) is bigger than that: it ran in the bytecode interpreter. 300,000 Avro records, warm: the
# decode alone into Spark's noop sink 1.6 -> 0.75 s, the batch's whole write 1.93 -> 1.73 s.
JIT_OPTIONS = "-XX:-DontCompileHugeMethods"
_JVM_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def with_jit_options(options: str) -> str:
    """`options` (a JVM's extra options) with `JIT_OPTIONS`, unless they already decide it."""
    return options if "DontCompileHugeMethods" in options else f"{JIT_OPTIONS} {options}".strip()


# The JVM writes its own warnings (an option it ignores, a class-data archive it cannot map) to
# stdout by default, where a command's answer goes: one such line made `icesink maintain --json`
# print what is not JSON. They go to stderr, with the job's log; -Xlog options of the user's own
# come after these and still apply.
DRIVER_LOG_OPTIONS = "-Xlog:disable -Xlog:all=warning:stderr"


def jvm_conf(conf: dict[str, str]) -> dict[str, str]:
    """The JVMs' extra options of `conf` with `JIT_OPTIONS`, the driver's with `DRIVER_LOG_OPTIONS`
    first: for a session that launches its own driver JVM. Under spark-submit the JVM already runs
    and these keys came from its command line (scripts/submit sets them), so the job leaves them
    alone."""
    out = {k: with_jit_options(conf.get(k, "")) for k in _JVM_OPTIONS}
    out["spark.driver.extraJavaOptions"] = f"{DRIVER_LOG_OPTIONS} {out['spark.driver.extraJavaOptions']}"
    return out


def session_conf(config: Config) -> dict[str, str]:
    conf = dict(_DEFAULTS)
    conf.update(catalog_conf(config))
    conf.update(s3a_conf(config))
    jars = extra_jars(config)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    conf.update(config.spark.conf)
    return conf


def build_session(config: Config) -> SparkSession:
    # Python workers must import icesink: by default use the interpreter running this process.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(config.job.name)
    if config.spark.master:
        builder = builder.master(config.spark.master)
    conf = session_conf(config)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: this launches the JVM
        conf.update(jvm_conf(conf))
    conf = with_worker_daemon(conf, config.spark.master, os.environ, icesink.__file__)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    keep_jvm_lookups(spark)
    return spark
