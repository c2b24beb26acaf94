"""Prints the Maven coordinates of dev/maven/spark.xml (the jars the job needs), comma-separated,
for spark-submit --packages. The one list: the local stack resolves the same file with Maven.

  python scripts/spark_packages.py [path/to/spark.xml]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def coordinates(pom: Path) -> list[str]:
    deps = ET.parse(pom).getroot().findall("./m:dependencies/m:dependency", _NS)
    out = []
    for d in deps:
        parts = [d.findtext(f"m:{t}", namespaces=_NS) for t in ("groupId", "artifactId", "version")]
        if not all(parts):
            raise SystemExit(f"{pom}: a dependency without groupId, artifactId or version")
        out.append(":".join(p for p in parts if p))
    return out


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[1] / "dev" / "maven" / "spark.xml"
    print(",".join(coordinates(Path(sys.argv[1]) if len(sys.argv) > 1 else default)))
