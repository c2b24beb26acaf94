"""What runs inside the Python tasks (Spark's executors): pure work over Arrow data and plain
values, importing nothing of the driver's steps (`batch/`), the catalog or Spark. The driver hands
these modules their inputs pickled into the task."""

from icesink.tasks.worker_imports import arrow_without_pandas, in_a_worker

if in_a_worker():
    # Before any of the tasks' modules converts a value (some do at import).
    arrow_without_pandas()
