"""The store on SQLite: the contract every database meets (``storecontract.StoreContract``; PostgreSQL's
run is ``tests/system/test_store_postgresql.py``), and what is SQLite's or the database's own: reopening,
unusable files, a schema that lies, stored text's codec, the series encoding, an old migration."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa

from iolab.errors import StoreError
from iolab.outputs import OutputError
from iolab.store import codecs as store_codecs
from iolab.store import schema
from iolab.store.codecs import compress_raw, decode_series, encode_series, encode_series_many
from iolab.store.database import Store
from iolab.store.records import FinishedResult, FinishedRun
from paths import ROOT
from storecontract import SAMPLE, StoreContract, imported


class TestSQLite(StoreContract):
    @pytest.fixture
    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path}/t.db"


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
    with pytest.raises(OutputError) as refused:  # a usage error (exit 2): SQLite is not asked
        Store(f"sqlite:///{tmp_path}/dir.db")
    assert refused.value.message == (f"refusing to write the results database at {tmp_path}/dir.db: it is a "
                                     "directory, not a database file")
    (tmp_path / "unreadable.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 100)  # SQLite's header, then junk
    with pytest.raises(StoreError) as info:
        Store(f"sqlite:///{tmp_path}/unreadable.db")
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
    text = SAMPLE.read_text()
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
    (5.0, 7.0, 7.0, 1e12), (0.5, 1 / 3, 2.0, 1e-9), (), (3.0,), (float("nan"), 1.0, float("inf"), 2.0 ** 60),
    (7.0, -3.0, 2.0 ** 53 - 1, 0.0)])
def test_time_series_encoding_is_exact_and_compact(values):
    import numpy as np
    times = tuple(range(500, 500 * (len(values) + 1), 500))
    blob = encode_series(times, values)
    t_ms, decoded = decode_series(blob)
    v = np.asarray(values, dtype=np.float64)  # the stored format, as numpy.diff writes it (migration 0004 too)
    integral = bool(np.isfinite(v).all() and (np.abs(v) < 2.0 ** 53).all() and (v == np.round(v)).all())
    body = np.diff(v.astype(np.int64), prepend=0).astype("<i8") if integral else v.astype("<f8")
    assert zlib.decompress(blob)[6:] == np.diff(np.asarray(times, dtype=np.int64), prepend=0).astype("<i8").tobytes() \
        + body.tobytes()
    assert t_ms == times and len(decoded) == len(values)
    assert all(a == b or (a != a and b != b) for a, b in zip(decoded, values, strict=True))  # NaN stays NaN
    steady = encode_series(range(1000, 61000, 1000), [100_000 + i % 7 for i in range(60)])
    assert len(steady) < 200  # a minute of 1 s IOPS windows; fio's log text of it is ~1.2 kB
    with pytest.raises(ValueError):
        encode_series((1, 2), (1.0,))


def test_series_encoded_together_are_the_bytes_of_each_encoded_alone():
    """encode_series_many (an import's thousands of series at once) writes what encode_series writes:
    integral and float series side by side, empty ones, NaN, infinities and 2**53 in a series that is
    otherwise integral, times out of order, negative and huge deltas."""
    nan, inf = float("nan"), float("inf")
    series = [((), ()), ((1000,), (5.0,)), ((1000, 2000, 3000), (7.0, -3.0, 2.0 ** 53 - 1)),
              ((5, 1, 3), (0.5, 1 / 3, 2.0)), ((1, 2, 3), (nan, 1.0, 2.0)), ((1, 2), (inf, 3.0)), ((), ()),
              ((1, 2), (2.0 ** 53, 1.0)), ((0, 2 ** 62, -(2 ** 62)), (1e300, -0.0, 4.0)), ((7,), (-(2.0 ** 52),)),
              (tuple(range(1000, 61000, 1000)), tuple(float(100_000 + i % 7) for i in range(60)))]
    assert encode_series_many(series) == [encode_series(t, v) for t, v in series]
    assert encode_series_many(series[2:3]) == [encode_series(*series[2])] and encode_series_many([]) == []
    with pytest.raises(ValueError):
        encode_series_many([((1, 2), (1.0, 2.0)), ((1, 2), (1.0,))])


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
