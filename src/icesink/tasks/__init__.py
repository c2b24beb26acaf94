"""What runs inside the Python tasks (Spark's executors): pure work over Arrow data and plain
values, importing nothing of the driver's steps (`batch/`), the catalog or Spark. The driver hands
these modules their inputs pickled into the task."""
