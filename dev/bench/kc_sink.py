"""The Apache Iceberg Kafka Connect sink on the benchmark's topics: what users would pick instead
of icesink (issue 36, item 4).

Each run launches its own Kafka Connect worker (standalone, the stack's Kafka version; the sink
1.11.0, the Spark runtime's Iceberg, as a plugin: `dev/stack kc-sink`) as a child of the benchmark's
worker process, so that its peak memory and CPU are measured as icesink's are. Once its REST API
answers, the connector is created: 2 tasks (the topics have 2 partitions), the table created by
the sink (`auto-create-enabled`, partitioned as the part asks), a commit every
`COMMIT_INTERVAL_MS`, the topic read from its start. The run ends when the table's snapshot holds
every record (the catalog's own table metadata, polled; nothing else reads the table meanwhile).

Figures per run: seconds and CPU-seconds from the connector's creation (icesink's counterpart:
from its query's start) and from the worker's launch (icesink's: from its process's start), the
table's rows, data files and bytes from its snapshot summary, the snapshots it committed.

Avro values go through Apicurio's AvroConverter (Confluent's is not on Maven Central) reading the
stack's registry with the Confluent frame; JSON through Connect's JsonConverter with schemas off
(the sink infers the table from the first records, as icesink does).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from dev.bench import REPO
from dev.bench.measure import emit
from dev.bench.spec import WorkerSpec
from dev.kit.endpoints import CATALOG_URI, KAFKA, REGISTRY_URL, S3_ENDPOINT

# The setting: the sink's default is 5 minutes, which a catch-up of a minute would wait out.
COMMIT_INTERVAL_MS = 10_000
# As Kafka's bin/connect-standalone.sh starts a worker.
HEAP = ("-Xms256M", "-Xmx2G")
LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %X{connector.context}%m (%c:%L)%n
rootLogger.level = info
rootLogger.appenderRef.console.ref = console
logger.consumerconfig.name = org.apache.kafka.clients.consumer.ConsumerConfig
logger.consumerconfig.level = warn
logger.producerconfig.name = org.apache.kafka.clients.producer.ProducerConfig
logger.producerconfig.level = warn
logger.adminconfig.name = org.apache.kafka.clients.admin.AdminClientConfig
logger.adminconfig.level = warn
"""


def provisioned() -> tuple[str, str]:
    """(the worker's classpath folder, its plugin.path): resolved from Maven Central once, cached."""
    out = subprocess.run([str(REPO / "dev" / "stack"), "kc-sink"], check=True, capture_output=True, text=True)
    classpath, plugins = out.stdout.split()
    return classpath, plugins


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker_properties(folder: Path, plugins: str, port: int, variant: str) -> str:
    registry = REGISTRY_URL.split("/apis/")[0] + "/apis/registry/v2"
    if variant == "json":
        value = ["value.converter=org.apache.kafka.connect.json.JsonConverter", "value.converter.schemas.enable=false"]
    else:
        value = [
            "value.converter=io.apicurio.registry.utils.converter.AvroConverter",
            f"value.converter.apicurio.registry.url={registry}",
            # The Confluent frame: a 4-byte id, the registry's content id (its ccompat API's ids).
            "value.converter.apicurio.registry.as-confluent=true",
            "value.converter.apicurio.registry.use-id=contentId",
            "value.converter.apicurio.registry.headers.enabled=false",
        ]
    lines = [
        f"bootstrap.servers={KAFKA}",
        "key.converter=org.apache.kafka.connect.storage.StringConverter",
        *value,
        f"offset.storage.file.filename={folder / 'offsets'}",
        "offset.flush.interval.ms=1000",
        f"plugin.path={plugins}",
        "plugin.discovery=hybrid_warn",
        f"listeners=http://127.0.0.1:{port}",
        "connector.client.config.override.policy=All",
    ]
    return "\n".join(lines) + "\n"


def connector(name: str, topic: str, table: str, spec: WorkerSpec) -> dict[str, Any]:
    config = {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "tasks.max": "2",
        "topics": topic,
        "consumer.override.auto.offset.reset": "earliest",
        "iceberg.tables": table,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.topic": f"{name}_control",
        "iceberg.control.commit.interval-ms": str(COMMIT_INTERVAL_MS),
        "iceberg.catalog.type": "rest",
        "iceberg.catalog.uri": CATALOG_URI,
        "iceberg.catalog.io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "iceberg.catalog.s3.endpoint": S3_ENDPOINT,
        "iceberg.catalog.s3.path-style-access": "true",
        "iceberg.catalog.client.region": os.environ.get("AWS_REGION", "us-east-1"),
    }
    if spec.tables.get("partition_by"):
        config["iceberg.tables.default-partition-by"] = ",".join(spec.tables["partition_by"])
    return {"name": name, "config": config}


def http(method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def snapshot_summary(namespace: str, table: str) -> dict[str, str] | None:
    """The table's current snapshot summary, from the catalog; None before the sink's first commit."""
    try:
        metadata = http("GET", f"{CATALOG_URI}/v1/namespaces/{namespace}/tables/{table}")["metadata"]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise
    current = metadata.get("current-snapshot-id")
    for s in metadata.get("snapshots", []):
        if s["snapshot-id"] == current:
            return {**s["summary"], "snapshots": str(len(metadata["snapshots"]))}
    return None


def process_cpu(pid: int) -> float:
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def one_run(spec: WorkerSpec, classpath: str, plugins: str, folder: Path) -> dict[str, Any]:
    name = f"{spec.tag}_kc_{uuid.uuid4().hex[:6]}"
    namespace, table = name, spec.topic
    port = free_port()
    (folder / "worker.properties").write_text(worker_properties(folder, plugins, port, spec.variant))
    (folder / "log4j2.properties").write_text(LOG4J)
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    logging = f"-Dlog4j2.configurationFile={folder / 'log4j2.properties'}"
    main = "org.apache.kafka.connect.cli.ConnectStandalone"
    command = [java, *HEAP, logging, "-cp", f"{classpath}/*", main, str(folder / "worker.properties")]
    log = open(folder / "worker.log", "wb")  # noqa: SIM115 (closed after the worker stops)
    launched = time.perf_counter()
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = launched + 120
        while True:
            try:
                http("GET", f"http://127.0.0.1:{port}/")
                break
            except (urllib.error.URLError, ConnectionError):
                if proc.poll() is not None or time.perf_counter() > deadline:
                    raise SystemExit("the Connect worker did not start (its log follows)") from None
                time.sleep(0.1)
        cpu_at_start = process_cpu(proc.pid)
        created = time.perf_counter()
        http("POST", f"http://127.0.0.1:{port}/connectors", connector(name, spec.topic, f"{namespace}.{table}", spec))
        deadline = created + max(600, spec.records / 1_000)
        summary: dict[str, str] | None = None
        while True:
            summary = snapshot_summary(namespace, table)
            if summary is not None and int(summary["total-records"]) >= spec.records:
                break
            if proc.poll() is not None or time.perf_counter() > deadline:
                status = http("GET", f"http://127.0.0.1:{port}/connectors/{name}/status") if proc.poll() is None else {}
                raise SystemExit(f"the sink did not commit {spec.records:,} records ({summary}; {status})")
            time.sleep(0.25)
        done = time.perf_counter()
        cpu = process_cpu(proc.pid)
    except SystemExit:
        print((folder / "worker.log").read_text(errors="replace")[-20_000:], file=sys.stderr)  # into bench.log
        raise
    finally:
        stop(proc)
        log.close()
    return {
        "seconds": done - created,
        "process_seconds": done - launched,
        "cpu": cpu - cpu_at_start,
        "process_cpu": cpu,
        "records": spec.records,
        "rows": int(summary["total-records"]),
        "batches": [],
        "n_batches": int(summary["snapshots"]),
        "data_bytes": int(summary["total-files-size"]),
        "data_files": int(summary["total-data-files"]),
        "table": f"{namespace}.{table}",
    }


def run_kc_sink(spec: WorkerSpec) -> None:
    """`repeat` runs, each a fresh worker into a fresh table (no warm-up: each launch is cold, as a
    user's is; the seconds from the connector's creation leave the JVM's start out)."""
    classpath, plugins = provisioned()
    for _ in range(spec.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-kc-") as tmp:
            emit(kind="run", **one_run(spec, classpath, plugins, Path(tmp)))
