"""A class-data-sharing archive of the job's driver JVM, for the job processes tests start.

Every `icesink run` a test starts (the fault suite starts about 70) is a new driver JVM that loads
the classes of Spark, Iceberg, Hadoop and Kafka before its first batch, and compiles them with
both JIT tiers. Measured on the 2-core machine, a 10-record job: 32 s end to end; with the
classes mapped from an archive an earlier run made (the JDK's AppCDS, `-XX:SharedArchiveFile`)
and the C1 compiler alone (a test job's few records never pay back C2), 18.5 s.

The archive is made once per machine, Java and classpath (`archive_path`'s key): one small job run
with `-XX:ArchiveClassesAtExit`, kept in the cache. A JVM whose classpath does not match an archive
warns (on stderr: icesink.job.session.DRIVER_LOG_OPTIONS; a `maintain` job, whose classpath is
shorter, always does) and runs without it, so a stale one costs speed, never a result. Test processes
only: the options reach a job through its written config (`Scenario.write_config`), never the product's
defaults.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ENV = "ICESINK_TEST_JAVA_OPTIONS"  # the options test job processes get (set by the tests' session)
CACHE = Path(os.environ.get("ICESINK_CACHE", Path.home() / ".cache" / "icesink"))
C1_ONLY = "-XX:TieredStopAtLevel=1"


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def archive_path() -> Path:
    """Where the archive of this machine's Java and pyspark jars is (made or not)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    version = subprocess.run([_java(), "-version"], capture_output=True, text=True, timeout=60).stderr
    key = hashlib.sha256(version.encode())
    for jar in sorted(jars.glob("*.jar")):
        key.update(f"{jar.name}:{jar.stat().st_size}".encode())
    return CACHE / "cds" / f"driver-{key.hexdigest()[:16]}.jsa"


def making_options(target: Path) -> str:
    """The options of the job run that makes the archive at `target`."""
    return f"-XX:ArchiveClassesAtExit={target} {C1_ONLY}"


def using_options(archive: Path) -> str:
    """The options of a job run that maps its classes from `archive`."""
    return f"-XX:SharedArchiveFile={archive} {C1_ONLY}"
