"""docker-compose.yml, conf/ and catalog/ agree with each other and with the local stack.

No Docker engine runs here, so this checks what can be checked without one: the files parse,
images are pinned, health checks gate start-up, and every endpoint a config names is a service
and port the compose file (or dev/stack) really provides.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

import icesink
from icesink.config import load_config, parse_config
from icesink.job.session import (
    DRIVER_LOG_OPTIONS,
    JIT_OPTIONS,
    WORKER_DAEMON,
    jvm_conf,
    session_conf,
    with_jit_options,
    with_worker_daemon,
)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
from spark_packages import coordinates  # noqa: E402


def compose() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]  # type: ignore[no-any-return]


def properties(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def env_file(path: Path) -> dict[str, str]:
    return properties(path)


def published(service: str) -> dict[int, int]:
    """container port -> host port."""
    out = {}
    for spec in services()[service].get("ports", []):
        host, container = str(spec).split(":")
        out[int(container)] = int(host)
    return out


def hostport(url: str) -> tuple[str, int]:
    u = urlparse(url if "://" in url else f"x://{url}")
    assert u.hostname is not None
    assert u.port is not None, f"{url} names no port"
    return u.hostname, u.port


def test_the_services_of_the_deployment() -> None:
    assert set(services()) == {"kafka", "schema-registry", "minio", "minio-init", "rest-catalog", "icesink", "trino"}


def test_images_are_pinned() -> None:
    for name, svc in services().items():
        image = svc.get("image")
        assert image, f"{name}: no image"
        repo, _, tag = image.rpartition(":")
        assert repo, f"{name}: {image} has no tag"
        assert tag != "latest", f"{name}: {image}"
        assert re.search(r"\d", tag), f"{name}: {image} is not a version"
    assert services()["icesink"]["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (REPO / "deploy" / "Dockerfile").is_file()
    base = re.search(r"^FROM (\S+)", (REPO / "deploy" / "Dockerfile").read_text(), re.M)
    assert base is not None
    assert re.search(r":\d+\.\d+\.\d+", base.group(1)), "the job image's base is pinned"


def test_start_up_is_gated_by_health_checks() -> None:
    svcs = services()
    for name, svc in svcs.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in svcs, f"{name} depends on unknown {dep}"
            condition = cond["condition"]
            if condition == "service_healthy":
                assert "healthcheck" in svcs[dep], f"{name} waits for {dep}, which has no health check"
            else:
                assert condition == "service_completed_successfully", f"{name} -> {dep}: {condition}"
                assert "healthcheck" not in svcs[dep]
    one_shot = {"minio-init", "icesink"}
    for name in set(svcs) - one_shot:
        assert "healthcheck" in svcs[name], f"{name} has no health check"
    assert svcs["icesink"]["depends_on"].keys() >= {"kafka", "schema-registry", "rest-catalog"}


def test_host_ports_do_not_clash() -> None:
    hosts = [h for name in services() for h in published(name).values()]
    assert len(hosts) == len(set(hosts))


def test_the_job_config_names_the_compose_services() -> None:
    svcs = services()
    job = svcs["icesink"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in job["volumes"] if v.startswith("./")}
    assert mounts["/opt/icesink/conf"] == "./conf"
    assert "--config /opt/icesink/conf/compose.yaml" in job["command"]
    cfg = load_config(REPO / "conf" / "compose.yaml", environ={})

    kafka_env = svcs["kafka"]["environment"]
    internal = re.search(r"INTERNAL://([^,]+)", kafka_env["KAFKA_ADVERTISED_LISTENERS"])
    assert internal is not None
    assert cfg.kafka.bootstrap_servers == internal.group(1)
    assert hostport(cfg.kafka.bootstrap_servers)[0] == "kafka"

    assert hostport(cfg.catalog.uri) == ("rest-catalog", int(svcs["rest-catalog"]["environment"]["REST_PORT"]))
    assert cfg.s3.endpoint is not None
    assert hostport(cfg.s3.endpoint) == ("minio", 9000)
    assert 9000 in published("minio")
    assert cfg.decode.registry is not None
    listener = svcs["schema-registry"]["environment"]["SCHEMA_REGISTRY_LISTENERS"]
    assert hostport(cfg.decode.registry.url) == ("schema-registry", hostport(listener)[1])
    assert cfg.job.checkpoint_location.startswith("/var/lib/icesink/checkpoints/")
    assert "checkpoints:/var/lib/icesink/checkpoints" in job["volumes"]


def test_mounted_and_referenced_files_exist() -> None:
    for name, svc in services().items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (REPO / source).exists(), f"{name} mounts missing {source}"
        for f in svc.get("env_file", []):
            assert (REPO / f).is_file(), f"{name}: env_file {f} missing"


def test_the_catalog_server_settings_are_shared_with_the_local_stack() -> None:
    shared = env_file(REPO / "catalog" / "rest-catalog.env")
    rest = services()["rest-catalog"]
    assert rest["env_file"] == ["catalog/rest-catalog.env"]
    assert not set(shared) & set(rest["environment"]), "compose adds endpoints only, it does not override"
    assert "catalog/rest-catalog.env" in (REPO / "dev" / "stack").read_text()
    bucket = urlparse(shared["CATALOG_WAREHOUSE"]).netloc
    assert f"mc mb --ignore-existing local/{bucket}" in services()["minio-init"]["entrypoint"]
    assert hostport(rest["environment"]["CATALOG_S3_ENDPOINT"]) == ("minio", 9000)


def test_trino_reads_the_same_catalog_in_both_stacks() -> None:
    local = properties(REPO / "catalog" / "trino" / "iceberg.properties")
    deployed = properties(REPO / "catalog" / "trino" / "compose" / "iceberg.properties")
    assert set(local) == set(deployed)
    assert hostport(deployed["iceberg.rest-catalog.uri"]) == ("rest-catalog", 8181)
    assert hostport(deployed["s3.endpoint"]) == ("minio", 9000)
    assert deployed["s3.aws-secret-key"] == "${ENV:AWS_SECRET_ACCESS_KEY}", "no secret in the file"
    trino = services()["trino"]
    assert "./catalog/trino/compose/iceberg.properties:/etc/trino/catalog/iceberg.properties:ro" in trino["volumes"]
    assert published("trino") == {8080: 8088}, "the same host port as the local stack's Trino"


def stack_env() -> dict[str, str]:
    out = subprocess.run(["bash", str(REPO / "dev" / "stack"), "env"], capture_output=True, text=True, check=True)
    env = {}
    for line in out.stdout.splitlines():
        key, _, value = line.removeprefix("export ").partition("=")
        env[key] = value
    return env


def test_local_configs_match_the_local_stack() -> None:
    env = stack_env()
    cfg = load_config(REPO / "conf" / "local.yaml", environ={})
    assert cfg.kafka.bootstrap_servers == env["ICESINK_KAFKA_BOOTSTRAP"]
    assert cfg.catalog.uri == env["ICESINK_CATALOG_URI"]
    assert cfg.s3.endpoint == env["ICESINK_S3_ENDPOINT"]
    assert cfg.decode.registry is not None
    assert cfg.decode.registry.url == env["ICESINK_REGISTRY_URL"]
    spark_local = properties(REPO / "catalog" / "spark-local.properties")
    assert spark_local["spark.sql.catalog.icesink.uri"] == env["ICESINK_CATALOG_URI"]
    assert spark_local["spark.sql.catalog.icesink.s3.endpoint"] == env["ICESINK_S3_ENDPOINT"]
    trino_local = properties(REPO / "catalog" / "trino" / "iceberg.properties")
    assert trino_local["iceberg.rest-catalog.uri"] == env["ICESINK_CATALOG_URI"]
    assert trino_local["s3.endpoint"] == env["ICESINK_S3_ENDPOINT"]


def test_host_side_spark_sql_uses_the_published_ports() -> None:
    props = properties(REPO / "catalog" / "spark-compose.properties")
    assert hostport(props["spark.sql.catalog.icesink.uri"]) == ("localhost", published("rest-catalog")[8181])
    assert hostport(props["spark.sql.catalog.icesink.s3.endpoint"]) == ("localhost", published("minio")[9000])
    local = properties(REPO / "catalog" / "spark-local.properties")
    assert set(props) == set(local)


def test_spark_packages_match_the_pinned_pyspark() -> None:
    coords = coordinates(REPO / "dev" / "maven" / "spark.xml")
    pin = re.search(r'"pyspark==([\d.]+)"', (REPO / "pyproject.toml").read_text())
    assert pin is not None
    kafka = [c for c in coords if ":spark-sql-kafka-0-10_2.13:" in c]
    assert kafka == [f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pin.group(1)}"]
    assert any(c.startswith("org.apache.iceberg:iceberg-spark-runtime-") for c in coords)


def submit(*args: str) -> str:
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "submit"), "--dry-run", "--packages", *args],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize(
    ("args", "expected", "absent"),
    [
        (
            [],
            [
                "--master 'local[2]'",
                "--py-files dist/icesink-",
                "run --config conf/local.yaml",
                "spark.pyspark.python=",
            ],
            ["spark.kubernetes"],
        ),
        (
            ["--master", "spark://m:7077", "--config", "conf/compose.yaml"],
            ["--deploy-mode client", "--py-files dist/icesink-0.1.0.zip", "run --config conf/compose.yaml"],
            ["spark.pyspark.python"],
        ),
        (
            # Spark's PythonRunner as the JVM application the master starts on a worker.
            ["--master", "spark://m:7077", "--deploy-mode", "cluster", "--config", "conf/compose.yaml"],
            [
                "--deploy-mode cluster",
                f"--files {REPO}/conf/log4j2.properties,{REPO}/dist/icesink-0.1.0.zip",
                f"spark.submit.pyFiles={REPO}/dist/icesink-0.1.0.zip",
                "spark.standalone.submit.waitAppCompletion=true",
                f"--class org.apache.spark.deploy.PythonRunner {REPO}/dist/icesink-driver.jar "
                f"{REPO}/dist/icesink-main.py {REPO}/dist/icesink-0.1.0.zip run --config {REPO}/conf/compose.yaml",
            ],
            ["--py-files", "spark.kubernetes"],
        ),
        (
            [
                "--master",
                "k8s://https://k:6443",
                "--deploy-mode",
                "cluster",
                "--image",
                "icesink:0.1.0",
                "--config",
                "conf/compose.yaml",
            ],
            [
                "spark.kubernetes.container.image=icesink:0.1.0",
                "local:///opt/icesink/main.py",
                "--deploy-mode cluster",
                "--files conf/log4j2.properties,conf/compose.yaml",
                "run --config compose.yaml",
            ],
            ["--py-files"],
        ),
    ],
)
def test_submit_builds_the_command_for_each_master(args: list[str], expected: list[str], absent: list[str]) -> None:
    cmd = submit(*args)
    assert "--packages org.apache.iceberg:iceberg-spark-runtime-" in cmd
    assert "--exclude-packages software.amazon.awssdk:bundle" in cmd
    assert "--properties-file conf/spark-defaults.conf" in cmd
    for e in expected:
        assert e in cmd, cmd
    for a in absent:
        assert a not in cmd, cmd
    assert "icesink-local-secret" not in cmd
    # Both JVMs compile the decode's huge generated methods (icesink.job.session.JIT_OPTIONS).
    assert cmd.count("-XX:-DontCompileHugeMethods") == 2, cmd


def test_submit_refuses_what_cannot_work() -> None:
    for args, message in [
        (["--master", "k8s://https://k:6443"], "needs --image"),
        (["--deploy-mode", "cluster"], "local masters run in client mode"),
        (["--config", "nope.yaml"], "no config file nope.yaml"),
    ]:
        out = subprocess.run(
            ["bash", str(REPO / "scripts" / "submit"), "--dry-run", *args], capture_output=True, text=True
        )
        assert out.returncode == 2
        assert message in out.stderr


def test_a_session_that_launches_its_jvm_adds_the_jit_option_to_the_users_own() -> None:
    conf = jvm_conf({"spark.executor.extraJavaOptions": "-Dfoo=1", "spark.driver.extraJavaOptions": "-Xlog:gc"})
    assert conf == {
        # The driver JVM's warnings go to stderr; the user's -Xlog comes after and still applies.
        "spark.driver.extraJavaOptions": f"{DRIVER_LOG_OPTIONS} {JIT_OPTIONS} -Xlog:gc",
        "spark.executor.extraJavaOptions": f"{JIT_OPTIONS} -Dfoo=1",
    }
    # A user who decided it keeps their choice.
    assert with_jit_options("-XX:+DontCompileHugeMethods") == "-XX:+DontCompileHugeMethods"


# The least config the job takes, for what the session makes of it.
_MINIMAL = {
    "job": {"checkpoint_location": "/tmp/cp"},
    "kafka": {"bootstrap_servers": "k:9092", "subscribe_pattern": "events[.][0-9]{8}"},
    "catalog": {"uri": "http://c:8181"},
}


def test_the_python_workers_take_arrow_memory_from_jemalloc_unless_the_config_says_otherwise() -> None:
    """tests/spark/test_worker_imports.py checks what the workers then use."""
    pool = "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"
    assert session_conf(parse_config(_MINIMAL, environ={}))[pool] == "jemalloc"
    own = parse_config({**_MINIMAL, "spark": {"conf": {pool: "system"}}}, environ={})
    assert session_conf(own)[pool] == "system"


def test_the_python_workers_daemon_is_icesinks_where_they_surely_import_it() -> None:
    """tests/spark/test_worker_imports.py checks what the workers then import."""
    installed, here = icesink.__file__, {"PYSPARK_PYTHON": sys.executable}
    submitted = {**here, "PYSPARK_GATEWAY_PORT": "1", "MASTER": "local[2]"}
    conf = {"spark.sql.session.timeZone": "UTC"}
    daemon = {**conf, **WORKER_DAEMON}
    assert with_worker_daemon(conf, "local[2]", here, installed) == daemon
    assert with_worker_daemon(conf, None, submitted, installed) == daemon, "spark-submit's MASTER"
    assert with_worker_daemon(conf, None, {**submitted, "MASTER": "spark://m:7077"}, installed) == conf
    assert with_worker_daemon(conf, None, {**here, "MASTER": "local[2]"}, installed) == conf, "not submitted"
    # The config's spark.conf decides the master (it is applied after the config's spark.master).
    cluster = {**conf, "spark.master": "spark://m:7077"}
    assert with_worker_daemon(cluster, "local[2]", here, installed) == cluster
    assert with_worker_daemon({**conf, "spark.master": "local[1]"}, None, here, installed) == {
        **conf, "spark.master": "local[1]", **WORKER_DAEMON,
    }  # fmt: skip
    # Another interpreter for the workers, or icesink from a zip (--py-files): Spark's own daemon.
    other = shutil.which("sh")
    assert other is not None
    assert with_worker_daemon(conf, "local[2]", {"PYSPARK_PYTHON": other}, installed) == conf
    assert with_worker_daemon(conf, "local[2]", {"PYSPARK_PYTHON": "/no/such/python"}, installed) == conf
    assert with_worker_daemon(conf, "local[2]", here, "/tmp/icesink-0.1.0.zip/icesink/__init__.py") == conf
    # A daemon the config names wins.
    own = {**conf, "spark.python.daemon.module": "pyspark.daemon"}
    assert with_worker_daemon(own, "local[2]", here, installed) == own


def test_the_compose_job_runs_with_the_jit_option() -> None:
    # local[2]: the executors run in the driver's JVM, so its options are the only ones needed.
    command = services()["icesink"]["command"]
    options = re.search(r'--driver-java-options "([^"]*)"', command)
    assert options is not None, command
    assert JIT_OPTIONS in options.group(1).split()
    assert '--master "local[' in command


@pytest.mark.parametrize(
    ("lines", "code", "expected_exit", "message"),
    [
        # The client's last report before Spark exits 255: an exception from the cluster.
        (["State of driver-20261128070204-0012 is ERROR", "Exception from cluster"], 255, 1, "ended ERROR"),
        (["State of driver driver-20261128070204-0012 is FAILED, exiting spark-submit JVM."], 0, 1, "ended FAILED"),
        (["State of driver driver-20261128070204-0012 is FINISHED, exiting spark-submit JVM."], 0, 0, "finished"),
    ],
)
def test_in_standalone_cluster_mode_the_submission_fails_unless_the_driver_finished(
    tmp_path: Path, lines: list[str], code: int, expected_exit: int, message: str
) -> None:
    # spark-submit itself exits 0 for a FAILED driver; scripts/submit reads the state it logs.
    stub = tmp_path / "spark-submit"
    logged = ["Driver successfully submitted as driver-20261128070204-0012", *lines]
    stub.write_text(
        "#!/bin/sh\n" + "".join(f"echo '2026-11-28 07:02:04 INFO ClientEndpoint: {line}' >&2\n" for line in logged)
        + f"exit {code}\n"
    )  # fmt: skip
    stub.chmod(0o755)
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "submit"), "--master", "spark://m:7077", "--deploy-mode", "cluster",
         "--packages", "--config", "conf/compose.yaml"],
        capture_output=True, text=True, cwd=REPO, env={**os.environ, "SPARK_SUBMIT": str(stub)},
    )  # fmt: skip
    assert out.returncode == expected_exit, out.stderr[-2000:]
    assert message in out.stderr.splitlines()[-1], out.stderr[-2000:]
    assert "driver-20261128070204-0012" in out.stderr.splitlines()[-1]
