from icesink.runtime.timings import BatchTimings


def test_laps_charge_the_time_since_the_previous_one_and_add_up(monkeypatch):
    clock = iter([10.0, 10.0, 11.5, 11.75, 13.0, 14.0])
    monkeypatch.setattr("icesink.runtime.timings.time.monotonic", lambda: next(clock))
    t = BatchTimings(7)
    t.lap("read")
    t.lap("plan")
    t.lap("read")  # a step that runs twice adds up
    t.lap("commit")
    assert t.steps == {"read": 1.5 + 1.25, "plan": 0.25, "commit": 1.0}
    assert t.total == 4.0
    t.records = 100
    assert t.line() == "batch 7 timings: 100 record(s) in 4.00s: read 2.75s, plan 0.25s, commit 1.00s"


def test_the_line_counts_spark_jobs_and_catalog_requests_when_known() -> None:
    t = BatchTimings(3, records=10, spark_jobs=4, catalog_requests=3)
    assert t.line().endswith("; 4 Spark job(s); 3 catalog request(s)")
    assert "Spark job" not in BatchTimings(3).line()
