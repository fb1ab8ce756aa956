"""`iolab autotune` in-process on recorded fio, on a file target with fio's own axes (ioengine, numjobs):
the descent's order, the ranking and its judgement against as it is, what is stored, printed and written
as a suite, the budget, the refusals. Host settings (scheduler, nomerges …) written to a real device
and restored after Ctrl-C or kill -9 are tests/integration/test_autotune.py's (a loop device)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from inprocess import iolab
from iolab.analyze import saturation
from iolab.analyze.saturation import Point
from iolab.describe import suite
from iolab.workflows.autotune import Axis, Descent, Measured

FAST = ("--probe-runtime", "1s", "--runtime", "1s", "--repeat", "2", "--max-numjobs", "2", "ramp_time=0", "size=16m")


@pytest.fixture(autouse=True)
def two_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numjobs axis and the search's bound come from the online CPUs: as on the machine that
    recorded the jobs, so that the jobs (and their recordings) do not depend on the one replaying them."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)


def autotune_of(db: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(iolab("show", "latest", "--format", "json", db=db).stdout)


def test_configurations_are_probed_in_the_descents_order_ranked_and_the_best_written(tmp_path, fake_fio):
    db = tmp_path / "db.sqlite"
    best_yaml = tmp_path / "best.yaml"
    proc = iolab("autotune", "-t", f"ssd={tmp_path / 'data.bin'}", "--slo", "p99<=50ms", "--axes", "ioengine,numjobs",
                 "--budget", "5m", "--top", "2", "--max-iodepth", "16", *FAST, "--write-suite", str(best_yaml),
                 db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = autotune_of(db)
    found = doc["run"]["options"]["autotune"]
    assert found["settings"]["axes"] == ["ioengine", "numjobs"] and found["settings"]["top"] == 2
    point = found["operating_point"]
    assert point is not None and point["iodepth"] * point["numjobs"] >= 1
    # the descent, replayed over what its probes measured: each configuration is the one it asks for
    # next, and the pass ends where it says (the operating point's own numjobs is "as it is")
    slo = saturation.parse_slo("p99<=50ms")
    axes = [Axis("ioengine", ("io_uring",)), Axis("numjobs", tuple(v for v in ("2",) if v != str(point["numjobs"])))]
    descent = Descent(tuple(a for a in axes if a.values), slo)
    measured = [Measured(tuple(p["config"].items()), Point(point["iodepth"], point["numjobs"], p["iops"],
                                                               slo_ns=p["slo_ns"])) for p in found["probes"]]
    for i, m in enumerate(measured):
        assert descent.next(measured[:i]) == m.config, i
    assert descent.next(measured) is None and len(measured) == 1 + sum(len(a.values) for a in descent.axes)
    assert measured[0].config == ()  # as it is, first
    configs = [r["config"] for r in found["ranking"]]  # the best two, and as it is to judge the best against
    assert not found["cut_by_budget"] and {} in configs and len(configs) in (2, 3)
    assert [tuple(c.items()) for c in configs[:2]] == descent.best(measured, 2)[:2] or len(configs) == 2
    text = " ".join(proc.stdout.split())
    if configs[0]:
        judged = found["against_as_is"]
        said = "is better than as it is" if judged["distinguishable"] else "is not distinguishable from as it is"
        assert f"the best ({', '.join(f'{k}={v}' for k, v in configs[0].items())}) {said}" in text
    else:
        assert found["against_as_is"] is None
    for rank in found["ranking"]:
        assert rank["n"] == 2 and rank["feasible"] and rank["slo_ns"] <= 50e6
        low, high = rank["ci95"]
        assert low <= rank["iops"] * (1 + 1e-9) and rank["iops"] <= high * (1 + 1e-9)
    assert [r["iops"] for r in found["ranking"]] == sorted((r["iops"] for r in found["ranking"]), reverse=True)
    assert "autotune: clat p99 ≤ 50.0 ms" in proc.stdout
    assert f"{len(measured)} configurations probed at QD{point['iodepth']} ×{point['numjobs']}" in text
    # the results: the operating point's probes, each configuration's, then the finalists' rounds
    finals = [r for r in doc["results"] if r["workload"].endswith("-final")]
    assert len(finals) == 2 * len(configs) and all(r["status"] == "ok" for r in doc["results"])
    assert [r["repeat"] for r in finals] == [0] * len(configs) + [1] * len(configs)  # rounds, interleaved
    assert all(run.fenced for run in fake_fio.runs) and len(fake_fio.runs) == len(doc["results"])
    # the best configuration as a suite: iolab loads it, and runs it again
    assert f"written to {best_yaml}" in " ".join(proc.stderr.split())
    best = suite.load_yaml(best_yaml.read_text(), "best.yaml")
    assert best.tune == {}  # fio's settings only: nothing of the host's
    (workload,) = yaml.safe_load(best_yaml.read_text())["workloads"]
    options = {**yaml.safe_load(best_yaml.read_text())["defaults"], **workload}
    for key, value in found["ranking"][0]["config"].items():
        assert str(options[key]) == value
    assert int(workload["iodepth"]) * int(workload["numjobs"]) == point["iodepth"] * point["numjobs"]
    again = iolab("run", str(best_yaml), "--dry-run", db=db, cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def test_a_spent_budget_ends_the_descent_before_any_configuration(tmp_path, fake_fio):
    db = tmp_path / "db.sqlite"
    proc = iolab("autotune", "-t", f"ssd={tmp_path / 'data.bin'}", "--axes", "ioengine", "--budget", "0s",
                 "--max-iodepth", "4", *FAST, db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = autotune_of(db)["run"]["options"]["autotune"]
    assert found["cut_by_budget"] and found["probes"] == [] and found["ranking"] == []
    assert found["operating_point"] is not None  # the saturation search ran; the descent did not
    assert "the time budget (0s) ended the search before every axis was tried" in " ".join(proc.stdout.split())
    assert "written to" not in proc.stderr and not list(tmp_path.glob("iolab-autotune-*.yaml"))
    assert not any(r.job_text.count("ioengine=io_uring") for r in fake_fio.runs)


def test_axes_that_cannot_be_tried_are_refused_before_anything_runs(tmp_path, fake_fio):
    db = tmp_path / "db.sqlite"
    target = ("-t", f"ssd={tmp_path / 'data.bin'}")
    proc = iolab("autotune", *target, "--axes", "ioengine,elevator", db=db)
    assert proc.returncode == 2 and "autotune: unknown axis elevator" in proc.stderr
    proc = iolab("autotune", *target, "--host", "10.0.0.5", "--axes", "scheduler,ioengine", db=db)
    assert proc.returncode == 2 and "autotune --axes scheduler: tunes this machine's block queues" in proc.stderr
    proc = iolab("autotune", *target, "numjobs=2", db=db)
    assert proc.returncode == 2 and "numjobs is what the search sets" in proc.stderr
    assert fake_fio.runs == [] and not db.exists()

