"""The edge to Iceberg: the only part of icesink that reads or writes tables' metadata. The job
creates, evolves and commits through Iceberg's Java API in Spark's JVM (tables.py, commit.py and
its fence, ancestry.py); the CLI reads through PyIceberg (pyiceberg.py, live_rows.py). Both read a
table's offsets with the one rule and codec of snapshot_offsets.py.
"""
