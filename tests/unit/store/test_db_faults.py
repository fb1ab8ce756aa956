"""The store's own answer to a database fault, in-process on SQLite: an error is one line without SQL, and a
lock is waited for within the bound and told (``store.faults.Guard``). Faults during runs:
``tests/cli/test_db_faults.py`` and the integration and system tiers' ``test_db_faults.py``."""

from __future__ import annotations

import time

import pytest

from faultedruns import Lock
from iolab.errors import StoreError
from iolab.store import faults as dbfaults
from iolab.store.database import Store


def test_database_errors_are_one_line_without_sql(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/t.db", wait_s=0.5)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE run_tags")
    with pytest.raises(StoreError) as raised:
        store.create_run(suite_name="s", suite_text="", tags={"k": "v"})
    assert raised.value.message == (f"the results database sqlite:///{tmp_path}/t.db: cannot store the run: "
                                    "no such table: run_tags")
    assert "SQL" not in raised.value.message and "bug" not in (raised.value.hint or "")


def test_a_lock_is_waited_for_within_the_bound_and_told(tmp_path):
    db = tmp_path / "t.db"
    waits: list[dbfaults.Wait] = []
    store = Store(f"sqlite:///{db}", wait_s=1.0)
    store.guard.on_wait = waits.append
    lock = Lock(db)
    started = time.monotonic()
    with pytest.raises(dbfaults.DatabaseUnavailable) as raised:
        store.create_run(suite_name="s", suite_text="")
    assert 1.0 <= time.monotonic() - started < 4.0  # the bound, and one SQLite lock wait at most
    assert raised.value.reason == "database is locked"
    assert waits and all(w.reason == "database is locked" and not w.back for w in waits)
    lock.release()
    assert store.create_run(suite_name="s", suite_text="") == 1
