"""What is stored always reads back: a round-trip property over the stored report model (anything the
store accepts loads back equal; on PostgreSQL: ``tests/system/test_store_read_postgresql.py``), and
tolerant reading (a run that does not load is reported with its id and reason, the others load)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings

from iolab.store.database import Store
from iolab.store.records import UnreadableRun
from iolab.store.schema import results, runs
from reportstrategies import REAL, near_real, reports, store_and_read, store_report


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory):
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('roundtrip')}/t.db")
    yield store
    store.close()


PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.function_scoped_fixture])


@PROPERTY
@given(reports | near_real())
def test_what_the_store_accepts_reads_back_equal(sqlite_store, report):
    read_back = store_and_read(sqlite_store, report)
    assert read_back is None or read_back == report


def test_the_property_stores_many_reports(sqlite_store):
    """The rules must not refuse everything, or the property above would test nothing."""
    stored = [store_and_read(sqlite_store, report) for report in REAL]
    assert stored == REAL


# -- reading is tolerant ------------------------------------------------------------------------------------


@pytest.fixture
def damaged(tmp_path):
    """Runs 1-5 of one report; 2-5 then damaged as an older iolab or a hand edit could leave them."""
    store = Store(f"sqlite:///{tmp_path}/t.db")
    assert [store_report(store, REAL[0]) for _ in range(5)] == [1, 2, 3, 4, 5]
    with store.engine.begin() as conn:
        report = conn.execute(sa.select(results.c.report).where(results.c.run_id == 2)).scalar()
        report["jobs"][0]["latency_dist_pct"]["2000ms"] = None  # what a stored infinity became
        conn.execute(results.update().where(results.c.run_id == 2).values(report=report))
        report["jobs"][0]["latency_dist_pct"]["2000ms"] = 0.0
        report["jobs"][0]["directions"]["read"]["iops"] = -5.0
        conn.execute(results.update().where(results.c.run_id == 3).values(report=report))
        conn.execute(runs.update().where(runs.c.id == 4).values(host={"cpu_count": "many"}))
        conn.exec_driver_sql("UPDATE runs SET warnings = '[not json' WHERE id = 5")
    yield store
    store.close()


def test_a_run_that_does_not_load_is_reported_with_its_id_and_reason(damaged):
    assert damaged.get_run(1).results[0].report == REAL[0]
    reasons = {}
    for run_id in (2, 3, 4, 5):
        with pytest.raises(UnreadableRun) as caught:
            damaged.get_run(run_id)
        assert caught.value.run_id == run_id and caught.value.message.startswith(f"run {run_id} cannot be read: ")
        reasons[run_id] = caught.value.reason
    assert reasons[2] == \
        "result 0 (local / w): report: jobs.0.latency_dist_pct.2000ms: Input should be a valid number, got None"
    assert reasons[3] == "result 0 (local / w): report: jobs[0].read.iops = -5.0: cannot be negative"
    assert reasons[4].startswith("host: cpu_count: Input should be a valid integer")
    assert reasons[5].startswith("JSONDecodeError: ")


def test_listing_puts_each_unreadable_run_in_its_place(damaged):
    listed = damaged.list_runs()
    assert [r.run_id if isinstance(r, UnreadableRun) else r.id for r in listed] == [5, 4, 3, 2, 1]
    assert [type(r).__name__ for r in listed] == ["UnreadableRun", "UnreadableRun", "RunInfo", "RunInfo", "RunInfo"]
    assert len(damaged.list_runs(limit=2)) == 2
