"""What every command used to pay again: the schema check (Alembic only when the stored revision
differs). SQLite here; the upgrade on PostgreSQL is ``tests/system/test_store_postgresql.py``, fio's
``--parse-only`` once per job text ``tests/unit/run/test_checked_once.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from iolab.store import schema
from iolab.store.database import Store
from storecontract import UpgradeContract, alembic_config


def test_the_head_revision_is_alembic_s():
    assert schema.head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


def test_an_up_to_date_database_opens_without_alembic(tmp_path, monkeypatch):
    """Every import of Alembic fails while the database opens (as if it were not installed; the
    process's modules put back after): opening an up-to-date database must not ask for it."""
    url = f"sqlite:///{tmp_path}/t.db"
    Store(url).create_run(suite_name="s", suite_text="")
    for name in [m for m in sys.modules if m.split(".")[0] == "alembic"] + ["alembic"]:
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ImportError):  # the trap works
        __import__("alembic.command")
    store = Store(url)
    assert len(store.list_runs()) == 1
    store.close()


class TestSQLite(UpgradeContract):
    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/t.db"
