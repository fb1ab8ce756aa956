"""Method helpers: the SNIA PTS steady-state rule on constructed series, fio's steadystate block,
preconditioning settings and job texts. Dropping caches on a real file and preconditioning rounds on
a loop device are tests/integration/test_method.py's."""

from __future__ import annotations

import pytest

from iolab.describe.method import Precondition, check_precondition
from iolab.fio import jobfile, parse_output
from iolab.fio.json import parse_json
from iolab.run import method
from iolab.run.method import steady_state, window_verdict
from paths import FIO

SAMPLES = FIO


def test_flat_window_is_steady() -> None:
    verdict = steady_state([100, 101, 99, 100, 100])
    assert verdict.attained and verdict.round == 5
    assert verdict.range_pct == pytest.approx(2.0) and verdict.excursion_pct < 1


def test_range_over_20_percent_is_not_steady() -> None:
    # average 100, range 22 (> 20 %), no trend: the range criterion alone fails.
    values = [89, 111, 100, 100, 100]
    verdict = window_verdict(values)
    assert not verdict.attained and verdict.range_pct == pytest.approx(22.0)
    assert verdict.excursion_pct <= 10
    assert window_verdict([90, 110, 100, 100, 100]).attained  # exactly 20 %: allowed


def test_trend_over_10_percent_is_not_steady() -> None:
    # A steady climb: range 12 % passes, but the fitted line rises 12 % of the average over the window.
    values = [94.0, 97.0, 100.0, 103.0, 106.0]
    verdict = window_verdict(values)
    assert verdict.range_pct == pytest.approx(12.0) and verdict.excursion_pct == pytest.approx(12.0)
    assert not verdict.attained
    gentle = [97.5, 98.75, 100.0, 101.25, 102.5]  # excursion 5 %
    assert window_verdict(gentle).attained


def test_first_steady_window_is_reported() -> None:
    # A fresh SSD: fast first rounds, falling to steady state from round 4 on.
    series = [300, 220, 150, 104, 100, 98, 101, 99, 100, 100]
    verdict = steady_state(series)
    assert verdict.attained and verdict.round == 8  # rounds 4-8
    assert "attained at round 8" in verdict.describe() and "rounds 4-8" in verdict.describe()
    assert not steady_state(series[:7]).attained
    assert steady_state([1, 2, 3]).describe().startswith("not judged")
    assert steady_state([100, 200, 100, 200, 100, 200]).describe() == (
        "not attained in 6 rounds (rounds 2-6: range 62.5 % (limit 20 %), excursion 0.0 % (limit 10 %))")


def test_fio_steadystate_block_from_a_real_report() -> None:
    path = SAMPLES / "fio-3.33_steadystate_json_plus_normal.txt"
    if not path.exists():
        pytest.skip("the sample is missing")
    report = parse_json(path.read_text())
    ss = method.fio_steady_state(report.jobs[0].steadystate)
    assert ss is not None and ss.attained and ss.metric == "iops" and ss.limit == "20%"
    assert ss.duration_s == 3 and ss.data_iops == (98172.0, 100975.0, 96131.0)
    assert ss.bw_mean_bytes_s == 403153310  # bytes/s in this block, unlike bw elsewhere
    assert ss.describe() == ("fio steady state (iops:20% over 3 s): attained, iops mean deviation 2.589763%, "
                             "mean 98,426 IOPS")
    assert method.fio_steady_state(None) is None
    text = path.read_text()
    from_normal = method.fio_steady_state(parse_output(text[text.rindex("}") + 1:]).jobs[0].steadystate)
    assert from_normal is not None and from_normal.attained and from_normal.criterion == "2.590%"
    assert from_normal.describe() == "fio steady state: attained, iops mean deviation 2.590%"
    normal = method.fio_steady_state({"attained": 0, "criterion": "0.512%", "metric": "bw slope",
                                      "bw_display": "384MiB/s (394MB/s)", "iops_display": "98.4k"})
    assert normal is not None and normal.metric == "bw_slope" and not normal.attained
    assert normal.describe() == "fio steady state: not attained, bw slope 0.512%"


def test_precondition_settings() -> None:
    assert check_precondition({"fill": "2x", "bs": "128k"}) == Precondition(fill=2)
    assert check_precondition({"rounds": True}).rounds == 25
    for bad, message in (({"fill": "1.5x"}, "fill"), ({"rounds": 3}, "rounds"), ({"fill": 1, "track": "x"}, "track"),
                         ({}, "nothing to do"), ({"fill": 1, "speed": 2}, "speed: unknown")):
        with pytest.raises(ValueError, match=message):
            check_precondition(bad)


def test_fill_and_round_job_texts() -> None:
    measured = ("[global]\nfilename=/dev/loop9\n[randwrite-4k]\nrw=randwrite\nbs=4k\niodepth=32\nnumjobs=4\n"
                "size=1g\nverify=crc32c\nruntime=60s\ntime_based\n")
    fill = dict(jobfile.effective_jobs(jobfile.parse(method.fill_job_text(measured, Precondition(fill=2), "block"))))
    assert fill["randwrite-4k"] == {"filename": "/dev/loop9", "size": "1g", "rw": "write", "bs": "128k",
                                    "ioengine": "libaio", "iodepth": "32", "direct": "1", "loops": "2"}
    in_dir = method.fill_job_text(measured, Precondition(fill=1), "directory")
    assert "numjobs=4" in in_dir  # each clone has its own file there
    rounds = dict(jobfile.effective_jobs(jobfile.parse(method.round_job_text(measured, "5s"))))
    assert rounds["randwrite-4k"]["runtime"] == "5s" and rounds["randwrite-4k"]["ramp_time"] == "0"
