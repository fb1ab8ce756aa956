"""What every command used to pay again: the schema check (Alembic only when the stored revision
differs) and fio's ``--parse-only`` (once per distinct job text). Real SQLite and PostgreSQL, real fio."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

import pg
from iolab.describe import suite as suite_mod
from iolab.run import execute
from iolab.runner import local
from iolab.store import database as store_mod
from iolab.store.database import Store


def _config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(store_mod._MIGRATIONS))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


def test_the_head_revision_is_alembic_s():
    assert store_mod.head_revision() == ScriptDirectory.from_config(_config()).get_current_head()


def test_an_up_to_date_database_opens_without_alembic(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    Store(url).create_run(suite_name="s", suite_text="")
    code = textwrap.dedent(f"""
        import sys
        from iolab.store.database import Store
        store = Store({url!r})
        assert len(store.list_runs()) == 1
        print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_older_database_is_upgraded_when_opened(tmp_path, backend):
    if backend == "postgresql" and not pg.pg_bin():
        pytest.skip("PostgreSQL server binaries are not installed (Debian package postgresql)")
    server = pg.start() if backend == "postgresql" else None
    try:
        url = server.url if server else f"sqlite:///{tmp_path}/t.db"
        store = Store(url)
        run_id = store.create_run(suite_name="s", suite_text="")
        newest = store_mod.head_revision()
        previous = ScriptDirectory.from_config(_config()).get_revision(newest).down_revision
        with store.engine.begin() as conn:
            config = _config()
            config.attributes["connection"] = conn
            command.downgrade(config, previous)
        with store.engine.connect() as conn:
            assert store_mod._stored_revision(conn) == previous
        store.close()
        reopened = Store(url)
        with reopened.engine.connect() as conn:
            assert store_mod._stored_revision(conn) == newest
            assert set(store_mod.metadata.tables) <= set(sa.inspect(conn).get_table_names())
        assert [r.id for r in reopened.list_runs()] == [run_id]
        reopened.close()
    finally:
        if server:
            server.stop()


def test_fio_checks_each_distinct_job_text_once(tmp_path, monkeypatch):
    calls: list[str] = []
    real = local.check_job

    def counted(text, workdir, fio="fio", fence=None):
        calls.append(text)
        return real(text, workdir, fio, fence)

    monkeypatch.setattr(local, "check_job", counted)
    suite = suite_mod.load_yaml(
        f"targets: {{t: {{path: {tmp_path / 'data'}, size: 4m}}}}\n"
        "defaults: {ioengine: psync, time_based: 1, runtime: 1s}\n"
        "workloads:\n  - {rw: randread, bs: [4k, 8k], unique_option_for_this_test: 1}\n", "s.yaml")
    with pytest.raises(Exception, match=r"workloads\[0\] \(randread-4k-qd1\): fio rejects the job"):
        execute.prepare(suite, execute.RunOptions())  # the first rejected job in plan order is named
    assert len(calls) == 2
    suite = suite_mod.load_yaml(suite.text.replace(", unique_option_for_this_test: 1", ""), "s.yaml")
    first = execute.prepare(suite, execute.RunOptions(), repeat=3)
    assert len(first.items) == 6 and len(calls) == 4  # each block size once, not per repeat
    execute.prepare(suite, execute.RunOptions())  # a workflow's next step: the same texts
    assert len(calls) == 4
