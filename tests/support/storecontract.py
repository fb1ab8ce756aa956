"""What the store must do on every database it supports: test classes that a test file subclasses with
its own ``url`` fixture (a new, empty database), so that SQLite (``tests/unit/store``) and PostgreSQL
(``tests/system``) run the same test bodies.

``StoreContract``: a run's round trip with a real fio report, time series, selectors, finished runs in
one transaction, the schema the migrations build, stuck results, a capture's trace blob.
``UpgradeContract``: a database one migration behind is upgraded when it is opened.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from iolab.errors import UsageError
from iolab.facts import targets
from iolab.fio.json import parse_json
from iolab.model import HostFacts, TargetFacts, TimeSeries
from iolab.store import schema
from iolab.store.database import Store
from iolab.store.records import DuplicateSource, FinishedResult, FinishedRun, ImportedFile, PendingResult
from iolab.store.schema import metadata
from iolab.workflows.capture import record
from iolab.workflows.capture import trace as trace_mod
from paths import FIO

#: A real fio json+ report (fio 3.33, randrw on libaio).
SAMPLE = FIO / "fio-3.33_randrw_libaio.jsonplus.json"


def pending(seq: int, workload: str = "w") -> PendingResult:
    return PendingResult(seq=seq, target="t", target_path="/dev/x", workload=workload, repeat=0,
                         job_text=f"[{workload}]\nrw=read\n", job_hash="h", params={"rw": "read"})


def imported(digit_pair: str, path: str = "f.json") -> ImportedFile:
    return ImportedFile(digit_pair * 32, f"/data/{path}", "json", 100)


def alembic_config(url: str | None = None) -> Config:
    """Alembic's configuration for iolab's migrations (``url``: the database, if any)."""
    config = Config()
    config.set_main_option("script_location", str(schema.MIGRATIONS))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


def _schema(conn: sa.Connection) -> dict[str, Any]:
    inspector = sa.inspect(conn)
    return {t: ([(c["name"], str(c["type"]), c["nullable"], c["default"]) for c in inspector.get_columns(t)],
                sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(t)),
                inspector.get_pk_constraint(t)["constrained_columns"],
                sorted((tuple(f["constrained_columns"]), f["referred_table"], f["options"].get("ondelete"))
                       for f in inspector.get_foreign_keys(t)))
            for t in sorted(inspector.get_table_names())}


class StoreContract:
    """The store on one database; a subclass gives the fixture ``url`` (a new, empty database)."""

    @pytest.fixture
    def store(self, url: str) -> Iterator[Store]:
        s = Store(url)
        yield s
        s.close()

    def test_roundtrip_of_a_run_with_a_real_fio_report(self, store):
        text = SAMPLE.read_text()
        report = parse_json(text)
        host = HostFacts(hostname="h1", cpu_count=2, memory_bytes=1 << 30)
        run_id = store.create_run(suite_name="s", suite_text="yaml", label="base", tags={"path": "virtio"},
                                  host=host, fio_version="3.33", options={"keep_files": False})
        ids = store.add_pending(run_id, [pending(0), pending(1, "v")])
        now = datetime.now(UTC)
        store.save_result(ids[0], status="ok", command="fio x", started_at=now, ended_at=now, report=report,
                          raw_json=text, target_facts=TargetFacts(path="/dev/x", kind="block"))
        store.save_result(ids[1], status="failed", error="fio: engine nope not loadable")
        store.finish_run(run_id, "failed")

        run = store.get_run(run_id)
        assert run.info.label == "base" and run.info.tags == {"path": "virtio"} and run.info.host == host
        assert run.info.status == "failed" and run.info.finished_at is not None
        ok, failed = run.results
        assert ok.report == report  # every field, bins included, survives the database
        assert ok.started_at == now and ok.started_at.tzinfo is not None
        assert ok.target_facts.kind == "block"
        assert failed.status == "failed" and "not loadable" in failed.error
        assert store.raw_json(ok.id) == text and store.raw_json(failed.id) is None

    def test_time_series_roundtrip_and_replace(self, store):
        run_id = store.create_run(suite_name="s", suite_text="")
        a, b = store.add_pending(run_id, [pending(0), pending(1)])
        series = (TimeSeries("w", 1, "read", "iops", (1000, 2000), (5.0, 7.5), 1000),
                  TimeSeries("w", 2, "write", "clat_ns", (1000,), (125000.0,), 1000, hostname="h1"))
        store.save_result(a, status="ok", series=series)
        store.save_time_series(b, series[:1])
        assert store.time_series(run_id) == {a: list(series), b: list(series[:1])}
        store.save_result(a, status="ok", series=())  # a resumed job replaces what it had
        assert store.time_series(run_id) == {b: list(series[:1])}

    def test_selectors(self, store):
        a = store.create_run(suite_name="s", suite_text="", label="base", tags={"path": "a"})
        b = store.create_run(suite_name="s", suite_text="", label="base", tags={"path": "b"})
        assert store.resolve(str(a)) == [a]
        assert store.resolve("latest") == [b]
        assert store.resolve("base") == [a, b]
        assert store.resolve("path=b") == [b]
        for missing in ("999", "nolabel", "path=zzz"):
            with pytest.raises(UsageError):
                store.resolve(missing)
        assert [r.id for r in store.list_runs()] == [b, a]
        with pytest.raises(UsageError):
            store.get_run(999)

    def test_finished_run_in_one_transaction_and_duplicate_source_refused(self, store):
        text = SAMPLE.read_text()
        report = parse_json(text)
        now = datetime.now(UTC)
        results = [FinishedResult(seq=0, target="local", target_path=None, workload="randrw", repeat=0,
                                  job_text="[r]\n", job_hash="h", params={"rw": "randrw"}, report=report,
                                  raw_text=text, ended_at=now, extra={"unknown_options": ["*"]}),
                   FinishedResult(seq=1, target="local", target_path=None, workload="x", repeat=0, job_text="[x]\n",
                                  job_hash="h", params={}, status="failed", error="fio error 5")]
        source = {"name": "a.json", "sha256": "ab" * 32}
        first = FinishedRun(suite_name="a.json", origin="imported", source=source,
                            files=(imported("ab", "a.json"),), results=tuple(results), label="imp", tags={"k": "v"},
                            fio_version="3.33", warnings=("w1",))
        series = (TimeSeries("randrw", 1, "read", "iops", (1000, 2000), (5.0, 7.5), 1000),)
        other = FinishedRun(suite_name="c.json", origin="imported", source={"name": "c.json"},
                            files=(imported("cd", "c.json"), imported("12", "c2.json")),
                            results=(replace(results[0], series=series),))
        run_id, other_id = store.add_finished_runs([first, other])
        run = store.get_run(run_id)
        assert (run.info.origin, run.info.status, run.info.source, run.info.warnings) == (
            "imported", "failed", source, ("w1",))
        assert run.info.tags == {"k": "v"} and run.info.finished_at is not None
        assert store.get_run(other_id).info.status == "complete"
        assert list(store.time_series(other_id).values()) == [list(series)] and store.time_series(run_id) == {}
        ok, failed = run.results
        assert ok.report == report and ok.ended_at == now and ok.extra == {"unknown_options": ["*"]}
        assert store.raw_json(ok.id) == text and failed.error == "fio error 5"
        assert store.find_source("ab" * 32) == run_id and store.find_source("ef" * 32) is None
        assert store.find_sources(["12" * 32, "cd" * 32]) == {"12" * 32: other_id, "cd" * 32: other_id}
        again = FinishedRun(suite_name="b", origin="imported", source={"name": "b"},
                            files=(imported("34", "b1.json"), imported("ab", "b.json")), results=tuple(results))
        new = FinishedRun(suite_name="d.json", origin="imported", source={"name": "d.json"},
                          files=(imported("ef", "d.json"),), results=tuple(results))
        with pytest.raises(DuplicateSource) as info:
            store.add_finished_runs([new, again])
        assert info.value.run_id == run_id and f"b.json is already stored in run {run_id}" in info.value.message
        assert [r.id for r in store.list_runs()] == [other_id, run_id]  # nothing of the refused batch was stored

    def test_a_new_database_has_the_schema_the_migrations_build(self, store):
        """A new database is created from the table definitions and stamped (``Store._migrate``); the
        migrations, run one by one from an empty schema, must build the same tables."""
        with store.engine.begin() as conn:
            created = _schema(conn)
            assert schema.stored_revision(conn) == schema.head_revision()
            for table in [*reversed(metadata.sorted_tables), "alembic_version"]:
                conn.exec_driver_sql(f"DROP TABLE {table}{' CASCADE' if conn.dialect.name == 'postgresql' else ''}")
            config = alembic_config()
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
            assert _schema(conn) == created

    def test_integrity_problems_reports_stuck_results(self, store):
        run_id = store.create_run(suite_name="s", suite_text="")
        (rid,) = store.add_pending(run_id, [pending(0)])
        assert store.integrity_problems() == []
        store.save_result(rid, status="running")
        assert store.integrity_problems() == ["1 result(s) left in state 'running'"]

    def test_a_capture_trace_is_stored_whole_and_read_back(self, store, tmp_path: Path):
        """A capture's trace blob round-trips on both databases (SQLite writes it in place, by
        incremental blob I/O; PostgreSQL binds it): every column equal, its metadata kept."""
        rng = np.random.default_rng(7)
        n = 200_000  # a blob of about 1 MB: several pages of SQLite overflow
        issue = np.cumsum(rng.integers(1, 30, n)) * 1000
        trace = trace_mod.Trace(issue, issue + rng.integers(20, 400, n) * 1000, rng.integers(0, 1 << 20, n) * 8,
                                np.full(n, 4096), rng.integers(0, 2, n).astype(np.uint8), np.zeros(n, np.uint8),
                                np.full(n, 42, dtype=np.int32), comms={42: "fio"}, duration_ns=int(issue[-1]) + 10**6)
        device = tmp_path / "disk.img"
        device.write_bytes(b"\0" * 4096)
        capture = record.Capture(trace=trace, device=targets.inspect(str(device)), started_at=datetime.now(UTC),
                                 how="test")
        back = record.load_trace(store, store.get_run(record.save(store, capture, label="cap")))
        for a, b in zip(trace.columns(), back.columns(), strict=True):
            assert np.array_equal(a, b)
        assert (back.comms, back.duration_ns) == ({42: "fio"}, trace.duration_ns)


class UpgradeContract:
    """Opening a database one migration behind upgrades it; a subclass gives ``url`` (a new, empty
    database)."""

    def test_an_older_database_is_upgraded_when_opened(self, url: str):
        store = Store(url)
        run_id = store.create_run(suite_name="s", suite_text="")
        newest = schema.head_revision()
        previous = ScriptDirectory.from_config(alembic_config()).get_revision(newest).down_revision
        with store.engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, previous)
        with store.engine.connect() as conn:
            assert schema.stored_revision(conn) == previous
        store.close()
        reopened = Store(url)
        with reopened.engine.connect() as conn:
            assert schema.stored_revision(conn) == newest
            assert set(schema.metadata.tables) <= set(sa.inspect(conn).get_table_names())
        assert [r.id for r in reopened.list_runs()] == [run_id]
        reopened.close()
