"""The runner's part in fio's 1-second logs, with fio replayed (``fake_fio``): the options it adds to
fio's command (``local.prepare``), the job file left as written, and the series it reads from the logs
fio left (``local.collect``); a job that logs by itself gets none of ours. The same against real fio:
tests/integration/test_fio_logs.py."""

from __future__ import annotations

from pathlib import Path

from iolab.runner import local


def by_key(series):
    return {(s.job, s.job_index, s.direction, s.metric): s for s in series}


def job(tmp_path: Path, extra: str = "", runtime: str = "3", ramp_time: str = "1") -> str:
    return (f"[global]\nfilename={tmp_path / 'data'}\nsize=16m\nioengine=libaio\ndirect=1\ntime_based\n"
            f"runtime={runtime}\nramp_time={ramp_time}\n{extra}\n"
            "[mix]\nrw=randrw\nbs=4k\niodepth=4\nnumjobs=2\n[seq]\nrw=read\nbs=64k\n")


def test_runner_asks_fio_for_logs_without_touching_the_job_file(tmp_path, fake_fio):
    text = job(tmp_path)
    outcome = local.run(text, tmp_path / "w")
    assert [run.job_text for run in fake_fio.runs] == [text]
    assert outcome.status == "ok", outcome.error
    assert (tmp_path / "w" / "job.fio").read_text() == text
    assert "--log_avg_msec=1000" in outcome.command
    series = by_key(outcome.time_series)
    assert {(j, i) for j, i, _, _ in series} == {("mix", 1), ("mix", 2), ("seq", 3)}
    assert ("seq", 3, "write", "iops") not in series and ("mix", 2, "write", "clat_ns") in series
    iops = series[("mix", 1, "read", "iops")]
    assert 2 <= len(iops.t_ms) <= 3 and max(iops.t_ms) < 3500  # the 1 s ramp is not logged
    assert all(v > 0 for v in iops.values)
    assert not list(Path.cwd().glob("iolab_*.log"))  # logs stay in the work directory


def test_a_job_with_its_own_logging_gets_none_of_ours(tmp_path):
    outcome = local.run(job(tmp_path, f"write_iops_log={tmp_path / 'mine'}\nlog_avg_msec=500", runtime="1",
                            ramp_time="0"), tmp_path / "w")
    assert outcome.status == "ok", outcome.error
    assert outcome.time_series == () and not any("log_avg_msec" in c for c in outcome.command)
    assert (tmp_path / "mine_iops.1.log").exists()
