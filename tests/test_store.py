"""The store against real databases: SQLite and a PostgreSQL server started for the session."""

from __future__ import annotations

import zlib
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import pg
from iolab.errors import StoreError, UsageError
from iolab.facts import targets
from iolab.fio.json import parse_json
from iolab.model import HostFacts, TargetFacts, TimeSeries
from iolab.store import codecs as store_codecs
from iolab.store import schema
from iolab.store.codecs import compress_raw, decode_series, encode_series
from iolab.store.database import Store
from iolab.store.records import DuplicateSource, FinishedResult, FinishedRun, ImportedFile, PendingResult
from iolab.store.schema import metadata
from iolab.workflows.capture import record
from iolab.workflows.capture import trace as trace_mod
from paths import ROOT, TESTS

SAMPLE = "data/fio/fio-3.33_randrw_libaio.jsonplus.json"


@pytest.fixture(scope="module")
def postgres():
    if not pg.pg_bin():
        pytest.skip("PostgreSQL server binaries are not installed (Debian package postgresql)")
    server = pg.start()
    yield server.url
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    url = f"sqlite:///{tmp_path}/t.db" if request.param == "sqlite" else request.getfixturevalue("postgres")
    s = Store(url)
    yield s
    if request.param == "postgresql":
        with s.engine.begin() as conn:  # each test starts from an empty schema
            for table in [*reversed(metadata.sorted_tables), "alembic_version"]:
                conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")
    s.close()


def pending(seq: int, workload: str = "w") -> PendingResult:
    return PendingResult(seq=seq, target="t", target_path="/dev/x", workload=workload, repeat=0,
                         job_text=f"[{workload}]\nrw=read\n", job_hash="h", params={"rw": "read"})


def test_roundtrip_of_a_run_with_a_real_fio_report(store, request):
    text = (request.path.parent / SAMPLE).read_text()
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


def test_time_series_roundtrip_and_replace(store):
    run_id = store.create_run(suite_name="s", suite_text="")
    a, b = store.add_pending(run_id, [pending(0), pending(1)])
    series = (TimeSeries("w", 1, "read", "iops", (1000, 2000), (5.0, 7.5), 1000),
              TimeSeries("w", 2, "write", "clat_ns", (1000,), (125000.0,), 1000, hostname="h1"))
    store.save_result(a, status="ok", series=series)
    store.save_time_series(b, series[:1])
    assert store.time_series(run_id) == {a: list(series), b: list(series[:1])}
    store.save_result(a, status="ok", series=())  # a resumed job replaces what it had
    assert store.time_series(run_id) == {b: list(series[:1])}


def test_selectors(store):
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


def imported(digit_pair: str, path: str = "f.json") -> ImportedFile:
    return ImportedFile(digit_pair * 32, f"/data/{path}", "json", 100)


def test_finished_run_in_one_transaction_and_duplicate_source_refused(store, request):
    text = (request.path.parent / SAMPLE).read_text()
    report = parse_json(text)
    now = datetime.now(UTC)
    results = [FinishedResult(seq=0, target="local", target_path=None, workload="randrw", repeat=0, job_text="[r]\n",
                              job_hash="h", params={"rw": "randrw"}, report=report, raw_text=text, ended_at=now,
                              extra={"unknown_options": ["*"]}),
               FinishedResult(seq=1, target="local", target_path=None, workload="x", repeat=0, job_text="[x]\n",
                              job_hash="h", params={}, status="failed", error="fio error 5")]
    source = {"name": "a.json", "sha256": "ab" * 32}
    first = FinishedRun(suite_name="a.json", origin="imported", source=source, files=(imported("ab", "a.json"),),
                        results=tuple(results), label="imp", tags={"k": "v"}, fio_version="3.33", warnings=("w1",))
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


def _schema(conn: sa.Connection) -> dict[str, Any]:
    inspector = sa.inspect(conn)
    return {t: ([(c["name"], str(c["type"]), c["nullable"], c["default"]) for c in inspector.get_columns(t)],
                sorted((i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(t)),
                inspector.get_pk_constraint(t)["constrained_columns"],
                sorted((tuple(f["constrained_columns"]), f["referred_table"], f["options"].get("ondelete"))
                       for f in inspector.get_foreign_keys(t)))
            for t in sorted(inspector.get_table_names())}


def test_a_new_database_has_the_schema_the_migrations_build(store):
    """A new database is created from the table definitions and stamped (``Store._migrate``); the
    migrations, run one by one from an empty schema, must build the same tables."""
    from alembic import command
    from alembic.config import Config
    with store.engine.begin() as conn:
        created = _schema(conn)
        assert schema.stored_revision(conn) == schema.head_revision()
        for table in [*reversed(metadata.sorted_tables), "alembic_version"]:
            conn.exec_driver_sql(f"DROP TABLE {table}{' CASCADE' if conn.dialect.name == 'postgresql' else ''}")
        config = Config()
        config.set_main_option("script_location", str(schema.MIGRATIONS))
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        assert _schema(conn) == created


def test_integrity_problems_reports_stuck_results(store):
    run_id = store.create_run(suite_name="s", suite_text="")
    (rid,) = store.add_pending(run_id, [pending(0)])
    assert store.integrity_problems() == []
    store.save_result(rid, status="running")
    assert store.integrity_problems() == ["1 result(s) left in state 'running'"]


def _head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    config = Config()
    config.set_main_option("script_location", str(ROOT / "src/iolab/store/migrations"))
    return ScriptDirectory.from_config(config).get_current_head()  # type: ignore[return-value]


HEAD = _head()  # Alembic's own head (store.head_revision reads the file names)


def test_reopening_does_not_migrate_again(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    Store(url).create_run(suite_name="s", suite_text="")
    again = Store(url)
    assert len(again.list_runs()) == 1
    with again.engine.connect() as conn:
        assert conn.execute(sa.text("select version_num from alembic_version")).scalar() == HEAD


def test_unusable_database_is_a_clear_error(tmp_path):
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{tmp_path}/dir.db")
    assert "cannot open the results database" in info.value.message


def test_a_database_claiming_a_schema_it_lacks_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path}/t.db"
    Store(url).close()
    with sa.create_engine(url).begin() as conn:  # what a development build's renumbered migration left behind
        conn.exec_driver_sql("DROP TABLE time_series")
    with pytest.raises(StoreError) as info:
        Store(url)
    assert "lacks the table(s) time_series" in info.value.message


@pytest.mark.parametrize("codec", ["in use", "zlib"])
def test_stored_text_is_a_zlib_stream_whatever_the_codec(codec, monkeypatch, tmp_path):
    """ISA-L (when installed) and zlib write the same format; raw_json reads either with zlib."""
    if codec == "zlib":
        monkeypatch.setattr(store_codecs, "raw_codec", zlib)
    text = (TESTS / SAMPLE).read_text()
    assert zlib.decompress(compress_raw(text.encode())) == text.encode()
    store = Store(f"sqlite:///{tmp_path}/t.db")
    result = FinishedResult(seq=0, target="local", target_path=None, workload="w", repeat=0, job_text="[w]\n",
                            job_hash="h", params={}, raw_text=text)
    given = FinishedResult(seq=0, target="local", target_path=None, workload="w", repeat=0, job_text="[w]\n",
                           job_hash="h", params={}, raw_gz=compress_raw(text.encode()))
    ids = store.add_finished_runs([FinishedRun(suite_name="a", origin="imported", source={}, files=(imported("aa"),),
                                               results=(result,)),
                                   FinishedRun(suite_name="b", origin="imported", source={}, files=(imported("bb"),),
                                               results=(given,), tags={"k": "v"})])
    assert [store.raw_json(store.get_run(i).results[0].id) for i in ids] == [text, text]
    assert [store.get_run(i).info.tags for i in ids] == [{}, {"k": "v"}]
    store.close()


@pytest.mark.parametrize("values", [
    (5.0, 7.0, 7.0, 1e12), (0.5, 1 / 3, 2.0, 1e-9), (), (3.0,), (float("nan"), 1.0, float("inf"), 2.0 ** 60)])
def test_time_series_encoding_is_exact_and_compact(values):
    times = tuple(range(500, 500 * (len(values) + 1), 500))
    t_ms, decoded = decode_series(encode_series(times, values))
    assert t_ms == times and len(decoded) == len(values)
    assert all(a == b or (a != a and b != b) for a, b in zip(decoded, values, strict=True))  # NaN stays NaN
    steady = encode_series(range(1000, 61000, 1000), [100_000 + i % 7 for i in range(60)])
    assert len(steady) < 200  # a minute of 1 s IOPS windows; fio's log text of it is ~1.2 kB
    with pytest.raises(ValueError):
        encode_series((1, 2), (1.0,))


def test_migration_0004_moves_checksums_and_encodes_stored_series(tmp_path):
    """A database written before 0004 (checksums on runs, series as JSON points) reads back the same."""
    from alembic import command
    from alembic.config import Config

    url = f"sqlite:///{tmp_path}/old.db"
    config = Config()
    config.set_main_option("script_location", str(Path(schema.__file__).parent / "migrations"))
    with sa.create_engine(url).begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0003")
        conn.exec_driver_sql(
            "INSERT INTO runs (id, created_at, status, origin, suite_name, suite_text, source, source_sha256) VALUES "
            "(1, '2026-11-01 10:00:00', 'complete', 'imported', 'a.json', '', "
            "'{\"path\": \"/x/a.json\", \"format\": \"json\", \"size_bytes\": \"123\"}', '" + "ab" * 32 + "')")
        conn.exec_driver_sql("INSERT INTO results (id, run_id, seq, target, workload, repeat, status, job_text, "
                             "job_hash) VALUES (1, 1, 0, 'local', 'w', 0, 'ok', '[w]', 'h')")
        conn.exec_driver_sql("INSERT INTO time_series (result_id, job, job_index, direction, metric, interval_ms, "
                             "points) VALUES (1, 'w', 1, 'read', 'iops', 1000, '[[1000, 5], [2000, 7.5]]')")
    store = Store(url)
    assert [r.workload for r in store.get_run(1).results] == ["w"]  # nothing cascaded away with a table copy
    assert store.find_sources(["ab" * 32]) == {"ab" * 32: 1}
    (series,) = store.time_series(1)[1]
    assert (series.t_ms, series.values, series.interval_ms) == ((1000, 2000), (5.0, 7.5), 1000)
    with store.engine.connect() as conn:
        assert conn.execute(sa.text("select path, format, size_bytes from imported_files")).one() == (
            "/x/a.json", "json", 123)


def test_a_capture_trace_is_stored_whole_and_read_back(store, tmp_path):
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
