"""`iolab saturate` in-process on recorded fio: which probe comes next, the knee and the chosen point,
what the run stores, what is printed and the exit codes. The device's own answer (Little's law on a
throttled loop device) is tests/system/test_saturate_throttled.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from inprocess import iolab
from iolab.analyze import saturation
from iolab.analyze.saturation import Point

#: Short probes and repetitions; the numjobs bound is given so that the search (and so the jobs) does
#: not depend on the CPUs of the machine that replays the recordings.
FAST = ("--probe-runtime", "1s", "--runtime", "1s", "--repeat", "2", "--max-numjobs", "2", "ramp_time=0", "size=16m")


def saturation_of(db: Path, run: str = "latest") -> dict:  # type: ignore[type-arg]
    doc = json.loads(iolab("show", run, "--format", "json", db=db).stdout)
    return doc


def points(found: dict) -> list[Point]:  # type: ignore[type-arg]
    return [Point(p["iodepth"], p["numjobs"], p["iops"], p["lat_mean_ns"], p["slo_ns"], p["cpu_pct"])
            for p in found["probes"]]


def test_a_mean_slo_search_probes_chooses_repeats_stores_and_prints(tmp_path, fake_fio):
    db = tmp_path / "iolab.db"
    slo_ms = 5
    proc = iolab("saturate", "-t", f"ssd={tmp_path / 'data.bin'}", "--slo", f"mean<={slo_ms}ms", *FAST, db=db,
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = saturation_of(db)
    found = doc["run"]["options"]["saturation"]
    knee, chosen = found["knee"], found["chosen"]
    # the decisions, replayed over what the probes measured: each probe is the one the search asks
    # for after the ones before it, and it stops where the search is done
    slo = saturation.parse_slo(f"mean<={slo_ms}ms")
    search = saturation.Search(256, 2, slo)
    probed = points(found)
    for i, p in enumerate(probed):
        assert search.next(probed[:i]) == (p.iodepth, p.numjobs), i
    assert search.next(probed) is None
    best = search.chosen(probed)
    found_knee = saturation.knee(probed)
    assert best is not None and found_knee is not None
    assert (chosen["iodepth"], chosen["numjobs"]) == (best.iodepth, best.numjobs)
    assert (knee["iodepth"], knee["numjobs"]) == (found_knee.iodepth, found_knee.numjobs)
    assert chosen["slo_ns"] <= slo_ms * 1e6  # the chosen probe met the SLO
    assert found["slo"] == {"metric": "clat_mean", "limit_ns": slo_ms * 1e6, "text": str(slo), "strict": False}
    results = doc["results"]
    assert len(results) == len(found["probes"]) + 2 and all(r["status"] == "ok" for r in results)
    assert [r["repeat"] for r in results[-2:]] == [0, 1] and results[-1]["workload"].endswith("-final")
    assert found["final_results"] == [r["id"] for r in results[-2:]]
    # every probe and repetition is a job iolab ran in its fence
    assert len(fake_fio.runs) == len(results) and all(r.fenced for r in fake_fio.runs)
    assert all(f"iodepth={p.iodepth}\nnumjobs={p.numjobs}\nruntime=1s" in r.job_text
               for p, r in zip(probed, fake_fio.runs, strict=False))
    shown = proc.stdout
    assert f"most IOPS with clat mean ≤ {slo_ms}.0 ms" in shown and "knee (most IOPS per ms of latency)" in shown
    header = next(line for line in shown.splitlines() if "iodepth × numjobs" in line)
    assert header.count("clat mean") == 1  # the SLO's metric is that column: not printed twice
    assert re.search(r"the chosen point.s row is the mean of its repetitions: [\d.]+ IOPS, 95% CI [\d.]+–[\d.]+ "
                     r"\(t on log", shown)
    text = " ".join(shown.split())
    assert re.search(r"the chosen point (meets clat mean ≤ 5\.0 ms: clat mean over its 2 repetition\(s\): "
                     r"[\d.]+ [mu]s, [\d.]+ [mu]s, geometric mean [\d.]+ [mu]s, 95% CI"
                     r"|is at the SLO's edge|DOES NOT MEET)", text), text
    assert f"{len(probed)} probes of 1s each; the chosen point repeated 2× at 1s" in text
    assert "[probe 1 · most IOPS with clat mean ≤ 5.0 ms]" in proc.stderr  # progress: the search, not [1/1]
    assert f"[probe {len(probed)} · most IOPS" in proc.stderr and f"[probe {len(probed) + 1} " not in proc.stderr
    assert re.search(r"\[QD\d+ ×\d+ chosen after \d+ probes · repetition 2/2\]", proc.stderr)


def test_a_p99_slo_with_fios_own_search_and_two_runs_compared(tmp_path, fake_fio):
    db = tmp_path / "iolab.db"
    for name, fio_too in (("a", ("--fio-latency-target",)), ("b", ())):
        proc = iolab("saturate", "-t", f"{name}={tmp_path / f'{name}.bin'}", "--slo", "p99<=150ms", "--label",
                     f"run-{name}", *fio_too, *FAST, db=db, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        found = saturation_of(db)["run"]["options"]["saturation"]
        assert found["chosen"]["slo_ns"] <= 150e6
        assert found["slo"]["metric"] == "clat_p99"
    own = saturation_of(db, "run-a")
    target = own["run"]["options"]["saturation"]["fio_latency_target"]
    assert 1 <= target["depth"] <= 256 and target["iops"] > 0  # the depth fio settled on, for comparison
    fio_job = next(r for r in own["results"] if r["id"] == target["result"])
    assert fio_job["workload"] == "randread-4k-fio-latency-target"
    assert "latency_target=150000us" in fio_job["job_text"] and "latency_percentile=99" in fio_job["job_text"]
    assert "fio's latency_target row" in " ".join(iolab("show", "run-a", db=db).stdout.split())
    assert saturation_of(db, "run-b")["run"]["options"]["saturation"]["fio_latency_target"] is None
    compared = iolab("compare", "run-a", "run-b", db=db)
    assert compared.returncode == 0, compared.stderr
    text = " ".join(compared.stdout.split())
    assert "Saturation: the most IOPS under the SLO" in text
    assert re.search(r"run-b: ×[\d.]+ IOPS at clat p99 ≤ 150\.0 ms against run-a \(95% CI [\d.e+-]+–[\d.e+-]+, p ",
                     text), text


def test_options_the_search_sets_or_an_slo_fio_cannot_judge_are_refused(tmp_path, fake_fio):
    db = tmp_path / "iolab.db"
    target = ("-t", f"ssd={tmp_path / 'data.bin'}")
    proc = iolab("saturate", *target, "iodepth=4", db=db)
    assert proc.returncode == 2 and "iodepth is what the search sets" in proc.stderr
    proc = iolab("saturate", *target, "--slo", "mean<=5ms", "--fio-latency-target", db=db)
    assert proc.returncode == 2 and "--fio-latency-target needs a percentile --slo" in proc.stderr
    proc = iolab("saturate", *target, "--ramp-time", "1s", "ramp_time=2s", db=db)
    assert proc.returncode == 2 and "give the probes' ramp once" in proc.stderr
    assert fake_fio.runs == [] and not db.exists()


def test_a_probe_that_fails_ends_the_search_and_the_run_says_so(tmp_path, fake_fio):
    db = tmp_path / "iolab.db"
    fake_fio.fault("fail", at=1)  # the second probe: fio reports EIO
    proc = iolab("saturate", "-t", f"ssd={tmp_path / 'data.bin'}", "--slo", "mean<=5ms", *FAST, db=db, cwd=tmp_path)
    doc = saturation_of(db)
    found = doc["run"]["options"]["saturation"]
    # no third probe: the chosen point is the one probe that ran, repeated
    assert [r.fault for r in fake_fio.runs] == [None, "fail", None, None]
    assert [(r["workload"], r["status"]) for r in doc["results"]] == [
        ("randread-4k-qd1-j1", "ok"), ("randread-4k-qd4-j1", "failed"),
        ("randread-4k-qd1-j1-final", "ok"), ("randread-4k-qd1-j1-final", "ok")]
    assert "errno 5 (Input/output error)" in doc["results"][1]["error"]
    assert len(found["probes"]) == 1 and found["knee"]["iodepth"] == found["chosen"]["iodepth"] == 1
    assert found["final_results"] == [r["id"] for r in doc["results"][2:]]
    assert doc["run"]["status"] == "failed"  # a failed result fails the run
    assert "failed: ssd/randread-4k-qd4-j1 repeat 1: randread-4k-qd4-j1: errno 5 (Input/output error)" in \
        " ".join(proc.stdout.split())
    assert "[probe 2 · most IOPS with clat mean ≤ 5.0 ms] ssd · randread-4k-qd4-j1: failed after" in proc.stderr
    assert "1 probes of 1s each" in " ".join(proc.stdout.split())


def test_a_failed_probe_fails_the_command(tmp_path, fake_fio):
    """As ``iolab run`` exits 1 when a job failed, so does a search one of whose probes failed (it exited 0);
    what it found is shown and stored all the same."""
    fake_fio.fault("fail", at=1)
    proc = iolab("saturate", "-t", f"ssd={tmp_path / 'data.bin'}", "--slo", "mean<=5ms", *FAST, db=tmp_path / "db",
                 cwd=tmp_path)
    assert proc.returncode == 1 and "Some jobs failed" in proc.stderr
    assert "knee (most IOPS per ms of latency)" in proc.stdout


def test_without_an_slo_the_knee_is_chosen_and_quiet_prints_no_progress(tmp_path):
    db = tmp_path / "iolab.db"
    proc = iolab("saturate", "-t", f"ssd={tmp_path / 'data.bin'}", *FAST, "--quiet", db=db, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[probe" not in proc.stderr and "chosen after" not in proc.stderr  # progress: see the SLO's test
    found = saturation_of(db)["run"]["options"]["saturation"]
    assert found["slo"] is None and found["chosen"] == found["knee"]
    probed = points(found)
    assert saturation.knee(probed) == next(p for p in probed if (p.iodepth, p.numjobs) == (
        found["knee"]["iodepth"], found["knee"]["numjobs"]))
    search = saturation.Search(256, 2, None)
    assert all(search.next(probed[:i]) == (p.iodepth, p.numjobs) for i, p in enumerate(probed))
    assert search.next(probed) is None
    assert "knee (most IOPS per ms of latency)" in proc.stdout
