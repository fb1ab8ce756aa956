"""fio's bw/IOPS/latency logs: real log files from fio 3.33 (``tests/data/fio``). The runner asking fio
for them: tests/unit/runner/test_fio_logs.py (fio replayed) and tests/integration/test_fio_logs.py."""

from __future__ import annotations

import shutil

import pytest

from iolab.errors import ParseError
from iolab.fio import logs
from paths import FIO as DATA


def by_key(series):
    return {(s.job, s.job_index, s.direction, s.metric): s for s in series}


def test_averaged_logs_of_a_randrw_job(tmp_path):
    for path in DATA.glob("avg_*.1.log"):
        shutil.copy(path, tmp_path)
    (tmp_path / "avg_clat_hist.1.log").write_text("1000, 0, 4096, 0, 0\n")  # not ours to read
    found = logs.find_logs(tmp_path)
    assert [p.name for p in found] == ["avg_bw.1.log", "avg_clat.1.log", "avg_iops.1.log", "avg_lat.1.log",
                                       "avg_slat.1.log"]
    series = by_key(logs.read_logs(found, job_names=["randrw"]))
    assert len(series) == 10  # 5 logs x read/write
    clat = series[("randrw", 1, "read", "clat_ns")]
    # the file has two read rows at 3000: the full window (67256) and the remnant of the
    # draining I/Os (54256) that finalize_logs() flushes at the same time; the window stays
    assert clat.t_ms == (1000, 2000, 3000) and clat.values == (71565, 69598, 67256)
    assert clat.interval_ms == 1000 and clat.hostname is None
    iops = series[("randrw", 1, "write", "iops")]
    assert iops.t_ms == (1000, 2000) and iops.values == (49136, 51018)  # the final window is missing
    assert series[("randrw", 1, "read", "bw_bytes_s")].values == (197788 * 1024, 203352 * 1024)


def test_client_log_carries_the_host_and_its_interval(tmp_path):
    (series,) = logs.read_logs([DATA / "cslog_iops.1.log.127.0.0.1"])
    assert series.hostname == "127.0.0.1" and series.job == "cslog" and series.job_index == 1
    assert series.interval_ms == 500 and series.t_ms[:3] == (500, 1000, 1500)


def test_per_io_logs_are_averaged_into_windows(tmp_path):
    rows = [(t, 100_000 + t, 0, 4096) for t in range(0, 2000, 2)]  # 500 reads/s for 2 s
    (tmp_path / "p_clat.1.log").write_text("".join(f"{t}, {v}, {d}, {b}, 0\n" for t, v, d, b in rows))
    (tmp_path / "p_iops.1.log").write_text("".join(f"{t}, 1, {d}, {b}, 0\n" for t, _, d, b in rows))
    (tmp_path / "p_bw.1.log").write_text("".join(f"{t}, 9999, {d}, {b}, 0\n" for t, _, d, b in rows))
    series = by_key(logs.read_logs(logs.find_logs(tmp_path, "p"), job_names=["j"]))
    assert series[("j", 1, "read", "iops")].values[0] == pytest.approx(500)
    assert series[("j", 1, "read", "bw_bytes_s")].values[0] == pytest.approx(500 * 4096)
    assert series[("j", 1, "read", "clat_ns")].values[0] == pytest.approx(100_000 + 499)  # mean of t = 0, 2 … 998
    assert series[("j", 1, "read", "clat_ns")].t_ms == (1000, 2000)


def test_a_malformed_log_names_file_and_line(tmp_path):
    (tmp_path / "x_iops.1.log").write_text("1000, 5, 0, 0, 0\nnot a row\n")
    with pytest.raises(ParseError) as info:
        logs.read_logs(logs.find_logs(tmp_path))
    assert "x_iops.1.log:2:" in info.value.message


def test_thread_numbers_follow_numjobs_in_file_order():
    text = "[global]\nnumjobs=2\n[a]\nrw=read\n[b]\nnumjobs=3\n[c]\nnumjobs=bogus\n"
    assert logs.thread_names(text) == ["a", "a", "b", "b", "b", "c"]
    assert not logs.sets_own_logging(text)
    assert logs.sets_own_logging("[a]\nwrite_bw_log=mine\n")


@pytest.mark.parametrize(("row", "line"), [
    ("2000, 5, 3, 0, 0", 2),          # a data direction fio has not
    ("2000, -5, 0, 0, 0", 2),         # a negative value
    ("-1000, 5, 0, 0, 0", 2),         # a negative time
    ("2000, 5, 0, -4096, 0", 2),      # a negative block size
    ("2000, 5.5, -1, 0, 0", 2),       # a float file takes the exact checks too
    ("2000, inf, 0, 0, 0", 2),
])
def test_rows_fio_cannot_have_written_are_refused_by_row(tmp_path, row, line):
    """An all-integer file is read without the checks its parse makes needless (finite, whole): the
    rest (nothing negative, ddir 0-2) still holds, and names the row (issue 44's fast path)."""
    path = tmp_path / "x_iops.1.log"
    path.write_text(f"1000, 5, 0, 0, 0\n{row}\n3000, 5, 0, 0, 0\n")
    with pytest.raises(ParseError) as info:
        logs.read_log(path)
    assert f"x_iops.1.log:{line}: row {line} is not a fio log row" in info.value.message


def test_the_fast_read_gives_what_the_exact_reader_gives(tmp_path):
    """Columns of fio's own logs (integers; 3-field rows of old fio; floats) match ``parse_log``,
    with the documented dtypes and a block size of 0 where a row gives none."""
    (tmp_path / "f_lat.1.log").write_text("1000, 70.5, 1, 0, 0\n2000, 80, 1, 0, 0\n")
    (tmp_path / "o_bw.1.log").write_text("1000, 7, 0\n2000, 8, 1\n")
    for path in [*DATA.glob("avg_*.1.log"), DATA / "cslog_iops.1.log.127.0.0.1", *tmp_path.iterdir()]:
        log = logs.read_log(path)
        rows = logs.parse_log(path.read_text(), str(path))
        assert [c.dtype.kind for c in (log.t_ms, log.value, log.ddir, log.bs)] == ["i", "f", "i", "i"], path
        assert list(zip(log.t_ms.tolist(), log.value.tolist(), log.ddir.tolist(), log.bs.tolist(),
                        strict=True)) == rows, path
    assert logs.read_log(tmp_path / "o_bw.1.log").directions == {"read", "write"}


def test_an_empty_log_reads_as_no_rows(tmp_path):
    (tmp_path / "e_iops.1.log").write_text("\n")
    log = logs.read_log(tmp_path / "e_iops.1.log")
    assert log.end_ms is None and log.t_ms.size == 0 and log.directions == frozenset()


def test_logs_read_together_are_what_each_read_alone_gives(tmp_path):
    """``read_log_files`` (an import's thousands of logs parsed together) gives what ``read_log`` gives
    for each file, and its error where it raises: fio's own files of three widths side by side with
    floats, a refused row, files with a row short of fields and one with a row too long (their counts
    together are right), a file whose count is right though its rows are not, a number beyond int64,
    an empty file, a name that is no log's, a missing file."""
    files = {"a_iops.1.log": "1000, 5, 0, 0, 0\n2000, 6, 0, 0, 0\n", "b_bw.1.log": "1000, 7, 0\n2000, 8, 1\n",
             "c_lat.2.log": "1000, 70, 1, 4096, 0, 1\n", "d_iops.1.log": "1000, 5, 0, 0, 0\n2000, 5, 0, 0, 0\n",
             "f_lat.1.log": "1000, 70.5, 1, 0, 0\n", "g_iops.1.log": "1000, 5, 3, 0, 0\n",
             "h_iops.1.log": "1000, 5, 0, 0, 0\n2000, 5, 0, 0\n",
             "i_iops.1.log": "1000, 5, 0, 0, 0, 1\n2000, 5, 0, 0\n",
             "j_iops.1.log": "1000, 5, 0, 0\n2000, 5, 0, 0, 0, 0\n", "k_bw.1.log": f"1000, {2 ** 64}, 0, 0, 0\n",
             "l_iops.1.log": "\n", "notes.txt": "1000, 5, 0, 0, 0\n", "m_slat.1.log": "1000, 5, 0, 0, 0\n",
             "n_iops.1.log": "1000, 5, 0, 0, 0\n2000, 5, 0, 0, 0, 0\n",
             "o_iops.1.log": "1000, 5, 0, 0, 0\n2000, 5, 0, 0\n3000, 5, 0, 0, 0, 1\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    paths = [tmp_path / name for name in files] + [tmp_path / "gone_iops.1.log"]

    def alone(path):
        try:
            return logs.read_log(path)
        except ParseError as exc:
            return exc

    def same(a, b):
        if isinstance(a, ParseError) or isinstance(b, ParseError):
            return type(a) is type(b) and a.message == b.message
        return a.path == b.path and a.name == b.name and all(
            x.dtype == y.dtype and x.tolist() == y.tolist()
            for x, y in zip((a.t_ms, a.value, a.ddir, a.bs), (b.t_ms, b.value, b.ddir, b.bs), strict=True))

    together = logs.read_log_files(paths)
    assert list(together) != paths  # some were read alone, after the parse together: the mapping is by path
    assert set(together) == set(paths) and all(same(together[p], alone(p)) for p in paths)
    usual = [tmp_path / n for n in ("a_iops.1.log", "b_bw.1.log", "c_lat.2.log", "d_iops.1.log", "m_slat.1.log")]
    assert all(same(logs.read_log_files(usual)[p], alone(p)) for p in usual)
    integers = [*usual, *(tmp_path / n for n in ("h_iops.1.log", "n_iops.1.log", "o_iops.1.log"))]  # parsed together
    assert all(same(logs.read_log_files(integers)[p], alone(p)) for p in integers)
    assert sum(isinstance(v, ParseError) for v in together.values()) == 3  # ddir 3, notes.txt, the missing file
