"""Runs to report on, built once per test session from real fio output (1-second jobs on small
files, with their time series) and stored in a real SQLite database under hostile names.

Suites only allow plain target names, but a database can hold anything (imports, older
versions, other tools), so the report must survive these: every user string carries HTML,
a ``</script>`` or quotes.

``hostile_runs`` runs real fio; ``replayed_hostile_runs`` replays it from the recordings in
``tests/data/fio-runs/support/reportrun.jsonl.xz`` (the fast tier and the browser tests; ``make record``
makes them again if that book is deleted).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import fakefio
from iolab.fio import jobfile
from iolab.runner import local
from iolab.runner.outcome import Outcome
from iolab.store.database import Store
from iolab.store.records import PendingResult

EVIL_TARGET = "<img src=x onerror=alert(1)>"
EVIL_LABEL = "base</script><script>alert(2)</script>"
EVIL_WORKLOAD = "rand\"read' & <b>"
EVIL_TAG = ("<i>k</i>", "</script><img src=y onerror=alert(3)>")


@dataclass(frozen=True)
class Reported:
    db: Path
    run_ids: tuple[int, int]


def _job(path: Path, name: str, iodepth: int, rw: str = "randread") -> str:
    # the comment line is job-file text a report must show as text
    return (f"; {EVIL_LABEL} <img src=z onerror=alert(4)>\n[{name}]\nfilename={path}\nsize=16m\nrw={rw}\nbs=4k\n"
            f"ioengine=libaio\ndirect=1\niodepth={iodepth}\ntime_based=1\nruntime=2\nnumjobs=2\n")


#: The book of recordings ``replayed_hostile_runs`` replays (``fakefio``).
BOOK = "support/reportrun"

#: Run B's qd4 workload runs with this on fio's command line: a real, large slowdown without
#: changing the job file, so the comparison at the top of the report has real verdicts.
CAP = "--rate_iops=500"


@functools.cache
def hostile_runs(base: Path) -> Reported:
    """Two runs: run A on targets ``EVIL_TARGET`` and ``fast`` with an iodepth sweep (qd1,
    qd4) of a hostile workload name plus a randrw workload; run B on ``fast`` only, its qd4
    workload capped at 500 IOPS per job (``CAP``; the others are run A's fio runs again)."""
    base.mkdir(parents=True, exist_ok=True)
    store = Store(f"sqlite:///{base / 'report.db'}")
    ids = []
    outcomes: dict[str, Outcome] = {}  # run B reuses run A's other fio runs on "fast": 7 in all
    for label, tags, targets in ((EVIL_LABEL, dict([EVIL_TAG]), (EVIL_TARGET, "fast")), ("other", {}, ("fast",))):
        run_id = store.create_run(suite_name="hostile<suite>", suite_text="", label=label, tags=tags,
                                  warnings=[f"P3: runtime too short for {EVIL_TARGET}"], fio_version="3.33")
        planned = []
        for target in targets:
            path = base / ("data-fast" if target == "fast" else "data-evil")
            for workload, iodepth, rw in ((f"{EVIL_WORKLOAD}-qd1", 1, "randread"),
                                          (f"{EVIL_WORKLOAD}-qd4", 4, "randread"), ("mixed", 2, "randrw")):
                text = _job(path, workload, iodepth, rw)
                params = jobfile.workload_params(jobfile.parse(text))
                planned.append(PendingResult(seq=len(planned), target=target, target_path=str(path),
                                             workload=workload, repeat=0, job_text=text,
                                             job_hash=jobfile.params_hash(params), params=params))
        for result_id, p in zip(store.add_pending(run_id, planned), planned, strict=True):
            capped = label == "other" and p.workload.endswith("-qd4")
            if capped:
                outcome = local.run(p.job_text, base / "work", extra_args=(CAP,))
            else:
                if p.job_text not in outcomes:
                    outcomes[p.job_text] = local.run(p.job_text, base / "work")
                outcome = outcomes[p.job_text]
            store.save_result(result_id, status=outcome.status, command=" ".join(outcome.command),
                              started_at=outcome.started_at, ended_at=outcome.ended_at, error=outcome.error,
                              report=outcome.report, raw_json=outcome.raw_json, series=outcome.time_series)
        store.finish_run(run_id, "complete")
        ids.append(run_id)
    store.close()
    return Reported(db=base / "report.db", run_ids=(ids[0], ids[1]))


def replayed_hostile_runs(basetemp: Path) -> Reported:
    """``hostile_runs`` in ``basetemp / "hostile-runs"`` (``basetemp``: pytest's base temporary
    directory) with fio replayed from the recordings of the same jobs run by real fio (``BOOK``): no
    fio starts, unless recording (``IOLAB_RECORD=1``)."""
    with fakefio.replayed(BOOK, {str(basetemp): "@BASE@"}):
        return hostile_runs(basetemp / "hostile-runs")
