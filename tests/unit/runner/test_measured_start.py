"""When fio's measured phase began (``runner.local.measured_start_ms``), which the observers' window
stands on: from the report whose runtimes are freshest."""

from __future__ import annotations

from iolab.runner.local import measured_start_ms


def _report(timestamp_ms: int, *runtimes: int) -> str:
    """A JSON report as fio writes it (its spacing: ``"key" : value``), one job per runtime."""
    jobs = ",\n".join(f'    {{\n      "jobname" : "bs-4k",\n      "job_runtime" : {r * 60},\n      "write" : {{\n'
                      f'        "runtime" : {r}\n      }}\n    }}' for r in runtimes)
    return f'{{\n  "fio version" : "fio-3.33",\n  "timestamp_ms" : {timestamp_ms},\n  "jobs" : [\n{jobs}\n  ]\n}}'


def test_a_replays_stale_interim_runtime_does_not_shorten_the_window() -> None:
    """A replay's jobs sleep until their next logged I/O and note their runtime only when they wake:
    measured with fio 3.33 (--status-interval=1), a 2.76 s replay's one interim report said 890 ms
    66 ms before the final one said 2,758 ms. The start is the final report's (2.7 s earlier), not
    the interim's (which made the observers' window 985 ms of a 2.9 s replay: "not measured")."""
    text = "\n".join((_report(1_000_000, 885, 890), _report(1_000_066, 2_734, 2_758)))
    assert measured_start_ms(text) == 1_000_066 - 2_758


def test_a_fresh_interim_report_gives_the_exact_start() -> None:
    """A job that noted its time at the interim report: its timestamp less its runtime is exact, and the
    final report, written up to ~0.1 s after the jobs ended, would put the start that much later."""
    text = "\n".join((_report(1_000_000, 1_000), _report(1_002_090, 3_000)))
    assert measured_start_ms(text) == 1_000_000 - 1_000


def test_no_runtime_no_start() -> None:
    assert measured_start_ms(_report(1_000_000, 0)) is None


def test_a_report_in_the_ramp_does_not_pull_the_start_into_it() -> None:
    """During ``ramp_time`` a report's runtimes count from the job's start (measured with fio 3.33:
    871 ms into a 1 s ramp, numjobs=4 and group_reporting): an interim report before the last is not
    used, and the final report (written 64 ms after the last) is later than the last's start."""
    text = "\n".join((_report(1_000_000, 871), _report(1_001_136, 1_002), _report(1_004_136, 4_005),
                      _report(1_004_200, 4_037)))
    assert measured_start_ms(text) == 1_004_136 - 4_005
