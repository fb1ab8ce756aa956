"""``iolab gate`` and ``iolab accept`` over imported histories: real fio output (a 70/30 randrw libaio job,
fio 3.33) scaled run by run (``historydata``) and imported a run at a time, as a CI job stores a nightly run
and gates it."""

from __future__ import annotations

import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import historydata
from inprocess import iolab
from iolab.report.table import read_csv
from paths import FIO

DAY = 86_400
T0 = 1_780_000_000  # 2026-05-28
BASE = json.loads((FIO / "fio-3.33_randrw_libaio.jsonplus.json").read_text())


class Nightly:
    """A CI job's database: ``store(level)`` imports one night's run at ``level`` × the real output's
    throughput (3 % noise); ``gate(run, *options)`` gates it."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp, self.db, self.night = tmp_path, tmp_path / "ci.db", 0
        self.rng = random.Random(41)

    def store(self, level: float, *options: str, steady: bool = False) -> int:
        """One night: the job ``randrw`` at ``level``, and with ``steady`` a job ``steady`` at 1.0."""
        jobs = {"randrw": (level * self.rng.gauss(1, 0.03), {})}
        if steady:
            jobs["steady"] = (self.rng.gauss(1, 0.03), {})
        doc = historydata.output(BASE, jobs, T0 + self.night * DAY)
        (path,) = historydata.write_runs(self.tmp / f"night-{self.night}", [doc])
        self.night += 1
        done = iolab("import", str(path), "--format", "json", *options, db=self.db)
        assert done.returncode == 0, done.stderr
        return int(json.loads(done.stdout)["run"]["id"])

    def gate(self, run: int | str, *options: str):  # type: ignore[no-untyped-def]
        return iolab("gate", str(run), "--metric", "iops", *options, db=self.db)


def test_a_regression_fails_every_night_until_it_is_accepted(tmp_path):
    """Six nights at one level, then the disk at half speed: the gate fails run 7, 8 and 9 (on main it
    passed 8 and 9: run 7 had joined the baseline and its spread excused the rest). Once accepted, the new
    level is the baseline and the next night passes."""
    ci = Nightly(tmp_path)
    for _ in range(6):
        ci.store(1.0)
    exits = []
    for _ in range(3):
        run = ci.store(0.5)
        exits.append(ci.gate(run).returncode)
    assert exits == [3, 3, 3]
    ninth = ci.gate(9, "--format", "json")
    rows = json.loads(ninth.stdout)["rows"]
    assert {r["verdict"] for r in rows} == {"regression"}
    assert all(r["baseline"]["runs"] == [1, 2, 3, 4, 5, 6] and r["baseline"]["left_out"] == [7, 8] for r in rows)
    assert all(-55 < r["change_pct"] < -45 for r in rows)
    assert "iolab accept 9 --reason" in ci.gate(9).stderr

    accepted = iolab("accept", "9", "--reason", "new controller firmware: half the IOPS by design", db=ci.db)
    assert accepted.returncode == 0, accepted.stderr
    assert "run 9: change accepted as intended: new controller firmware" in accepted.stdout
    tenth = ci.store(0.5)
    passed = ci.gate(tenth, "--all", "--format", "csv")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    (_, rows), = read_csv(passed.stdout)
    assert [r[rows[0].index("verdict")] for r in rows[1:]] == ["accepted", "accepted"]
    baseline = rows[1][rows[0].index("baseline")]
    assert baseline.startswith("runs 7–9: ") and "since accepted at run 9 by " in baseline
    assert baseline.endswith(": new controller firmware: half the IOPS by design, 3 of the 5 runs needed to test: "
                             "held to the bound until then")
    history_csv = iolab("history", "--metric", "iops", "--format", "csv", db=ci.db)
    ((_, levels),), (_, (_, changed)) = read_csv(history_csv.stdout), read_csv(history_csv.stderr)
    assert all(r[levels[0].index("last_change")].startswith("accepted at run 9 by ") for r in levels[1:])
    accepted_rows = [r for r in changed[1:] if r[changed[0].index("verdict")] == "accepted"]
    assert len(accepted_rows) == 2 and all(r[changed[0].index("run")] == "9" for r in accepted_rows)
    back = ci.store(1.0)  # the old level again, now off the accepted one: not silently good
    assert ci.gate(back, "--format", "json").returncode == 0
    assert {r["verdict"] for r in json.loads(ci.gate(back, "--format", "json").stdout)["rows"]} == {"better"}


def test_an_accepted_level_holds_to_the_bound_before_it_has_the_runs_to_test(tmp_path):
    """After an accept the new level has too few runs for a test, but it is a level: a run at a tenth of it
    fails (on main it passed as "accepted", joined the baseline, and its spread excused a −50 % run two
    nights later), and the next usual run is judged without it."""
    ci = Nightly(tmp_path)
    for _ in range(6):
        ci.store(1.0)
    for _ in range(3):
        ci.store(0.5)
    assert iolab("accept", "9", "--reason", "slower by design", db=ci.db).returncode == 0
    crash = ci.store(0.05)
    failed = ci.gate(crash, "--format", "json")
    assert failed.returncode == 3, failed.stderr
    rows = json.loads(failed.stdout)["rows"]
    assert {r["verdict"] for r in rows} == {"regression"} and all(r["p_value"] is None for r in rows)
    assert all(-92 < r["change_pct"] < -88 for r in rows)
    usual = ci.gate(ci.store(0.5), "--format", "json")
    assert usual.returncode == 0, usual.stdout
    assert all(r["verdict"] == "accepted" and r["baseline"]["left_out"] == [crash]
               for r in json.loads(usual.stdout)["rows"])
    for _ in range(4):  # the level measured: the test takes over, and a halving fails it
        ci.store(0.5)
    assert ci.gate(ci.store(0.25)).returncode == 3


def test_accept_refuses_a_run_that_shows_no_change(tmp_path):
    """Accepting a usual run would restart the baseline at it and let the next regression through (on main
    it was taken, and a −50 % run two nights later passed)."""
    ci = Nightly(tmp_path)
    for _ in range(6):
        ci.store(1.0)
    refused = iolab("accept", "6", "--reason", "oops", db=ci.db)
    assert refused.returncode == 2
    assert "run 6 is within 5% of its baseline in each of its 8 series judged: it shows no change to accept" in \
        " ".join(refused.stderr.split())
    assert ci.gate(ci.store(0.5)).returncode == 3
    assert iolab("accept", "7", "--reason", "half by design", db=ci.db).returncode == 0


def test_a_run_off_the_level_once_does_not_join_and_the_next_usual_run_passes(tmp_path):
    ci = Nightly(tmp_path)
    for _ in range(6):
        ci.store(1.0)
    slow = ci.store(0.7)
    assert ci.gate(slow).returncode == 3
    usual = ci.store(1.0)
    done = ci.gate(usual, "--format", "json")
    assert done.returncode == 0, done.stdout
    assert all(r["baseline"]["left_out"] == [slow] and r["verdict"] == "ok" for r in json.loads(done.stdout)["rows"])


def test_failing_series_are_shown_first_and_alone_unless_all(tmp_path):
    ci = Nightly(tmp_path)
    for _ in range(6):
        ci.store(1.0, steady=True)
    run = ci.store(0.5, steady=True)
    failing = ci.gate(run, "--format", "csv")
    (_, rows), = read_csv(failing.stdout)
    assert failing.returncode == 3
    assert [r[1].split("/")[-1] for r in rows[1:]] == ["randrw (read)", "randrw (write)"]
    assert "4 series: 2 regression, 2 ok (2 not shown: --all shows every series)" in ci.gate(run).stdout
    usual = ci.gate(ci.store(1.0, steady=True)).stdout  # nothing failing: no empty grid
    shown = [line.rstrip() for line in usual.splitlines()[:2]]
    assert shown == ["gate: run 8 against its history", "  4 series: 4 ok (4 not shown: --all shows every series)"]
    (_, every), = read_csv(ci.gate(run, "--all", "--format", "csv").stdout)
    verdicts = [r[every[0].index("verdict")] for r in every[1:]]
    assert verdicts == ["regression", "regression", "ok", "ok"]  # failing first


def test_junit_has_a_test_case_per_series_and_a_failure_per_regression(tmp_path):
    ci = Nightly(tmp_path)
    for _ in range(6):
        ci.store(1.0)
    run = ci.store(0.5)
    done = iolab("gate", str(run), "--metric", "iops,bw", "--format", "junit", db=ci.db)
    assert done.returncode == 3
    suite = ET.fromstring(done.stdout)
    cases = suite.findall("testcase")
    assert suite.tag == "testsuite" and suite.get("tests") == "4" and len(cases) == 4
    assert suite.get("failures") == "4" and all(c.find("failure") is not None for c in cases)
    (target,) = {c.get("classname") for c in cases}  # the device fio's disk statistics name
    assert target not in ("", "local")
    assert {c.get("name") for c in cases} == {"randrw (read) iops", "randrw (write) iops", "randrw (read) bw",
                                              "randrw (write) bw"}
    assert "regression: run" in (cases[0].find("failure").text or "")
    early = Nightly(tmp_path / "early")
    early.store(1.0)
    second = early.store(1.0)
    too_soon = early.gate(second, "--format", "junit")
    assert too_soon.returncode == 2
    skipped = ET.fromstring(too_soon.stdout)
    assert skipped.get("skipped") == skipped.get("tests") == "2"
    assert all(c.find("skipped") is not None for c in skipped.findall("testcase"))


def test_a_pinned_baseline_and_a_label_choose_what_the_run_is_judged_against(tmp_path):
    ci = Nightly(tmp_path)
    for _ in range(3):
        ci.store(1.0, "--label", "nightly")
    for _ in range(6):
        ci.store(0.5, "--label", "experiment")
    run = ci.store(0.5, "--label", "nightly")
    pinned = ci.gate(run, "--baseline", "nightly", "--format", "json")
    assert pinned.returncode == 3
    assert {tuple(r["baseline"]["runs"]) for r in json.loads(pinned.stdout)["rows"]} == {(1, 2, 3)}
    assert all(r["baseline"]["pinned"] for r in json.loads(pinned.stdout)["rows"])
    everything = ci.gate(run, "--format", "json")  # every import: the experiment's six runs are the level
    assert everything.returncode == 0, everything.stdout
    labelled = ci.gate(run, "--label", "nightly")
    assert labelled.returncode == 2 and "at most 3 comparable run(s)" in labelled.stderr


def test_accept_needs_a_reason_and_one_run(tmp_path):
    ci = Nightly(tmp_path)
    ci.store(1.0)
    ci.store(1.0)
    assert iolab("accept", "1", db=ci.db).returncode == 2
    assert "--reason is empty" in iolab("accept", "1", "--reason", " ", db=ci.db).stderr
    several = iolab("accept", "local=x", "--reason", "r", db=ci.db)
    assert several.returncode == 2
    again = iolab("accept", "2", "--reason", "first", db=ci.db), iolab("accept", "2", "--reason", "second", db=ci.db)
    assert all(a.returncode == 0 for a in again) and "was accepted before ('first'" in again[1].stderr


@pytest.mark.parametrize("after", [3, 4])
def test_a_short_step_is_shown_unconfirmed_with_the_runs_that_would_confirm_it(tmp_path, after):
    ci = Nightly(tmp_path)
    for _ in range(5):
        ci.store(1.0)
    for _ in range(after):
        ci.store(0.5)
    shown = iolab("history", "--metric", "iops", db=ci.db)
    needed = {3: 3, 4: 2}[after]
    assert f"run 6: -50.0% (worse), unconfirmed: {needed} more runs at this level would confirm it" \
        in shown.stdout.replace("−", "-").replace("\u2212", "-") or "unconfirmed" in shown.stdout
    doc = json.loads(iolab("history", "--metric", "iops", "--format", "json", db=ci.db).stdout)
    for series in doc["series"]:
        (change,) = series["change_points"]
        assert (change["run"], change["confirmed"], change["runs_needed"]) == (6, False, needed)
        assert len(series["segments"]) == 2  # the chart's means split there
