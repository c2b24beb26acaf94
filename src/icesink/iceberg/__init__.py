"""The edge to Iceberg: where icesink creates, evolves and commits tables and reads their offsets
(the write step reads a table's data at a snapshot through Spark, maintenance runs Iceberg's
Spark procedures). The job
creates, evolves and commits through Iceberg's Java API in Spark's JVM (tables.py, commit.py and
its fence, ancestry.py); the CLI reads through PyIceberg (pyiceberg.py, live_rows.py). Both read a
table's offsets with the one rule and codec of snapshot_offsets.py.
"""
