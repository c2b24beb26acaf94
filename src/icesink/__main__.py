"""`python -m icesink` and `spark-submit .../icesink/__main__.py run --config FILE`."""

from icesink.ops.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
