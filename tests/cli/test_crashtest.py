"""`iolab crash-test` in-process on recorded fio, on a local file: each cut's phases (wipe, write with fio's
trigger, verify with the state fio saved at the cut), the verdicts (intact, lost, no cut, failed), what
is stored and printed, and the exit codes. The recordings were made by real fio writing the file with
direct I/O; the "cut" of the lost case zeroes the file from fio's --trigger, as a cache that forgets
its acknowledged writes would. Real cuts (fio servers killed in network namespaces, a cache restored
from a snapshot) and the destructive guard on a block device are tests/system/test_crashtest.py's and
tests/integration/test_crashtest_guard.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inprocess import iolab
from iolab.run import crashphase
from iolab.store.database import Store
from iolab.workflows import crashtest
from iolab.workflows.crashtest import CutVerdict

#: fio's write rate: 16 MiB of 4 KiB blocks take 8 s at it, so the trigger at 1 s cuts every write phase.
RATE = 500
CUT = ("size=16m", f"rate_iops={RATE}", "--trigger-timeout", "1s")


@pytest.fixture(autouse=True)
def _binary_files_replayed(fake_fio, monkeypatch: pytest.MonkeyPatch) -> None:
    """fio's verify states are binary files of its work directory, which the fake's replay passes through
    its placeholder replacement for text (a TypeError on bytes): here bytes are left as they are (they
    hold no path). To go once tests/support/fakefio.py's ``_replay`` does the same."""
    unplace = fake_fio._unplace
    monkeypatch.setattr(fake_fio, "_unplace",
                        lambda text, workdir: text if isinstance(text, bytes) else unplace(text, workdir))


def crash(tmp_path: Path, *args: str, db: Path | None = None):  # type: ignore[no-untyped-def]
    return iolab("crash-test", "-t", f"data={tmp_path / 'data.bin'}", *args, db=db or tmp_path / "db.sqlite",
                 cwd=tmp_path)


def outcomes(db: Path) -> list[crashtest.CutOutcome]:
    return crashtest.cut_outcomes(Store(f"sqlite:///{db}").get_run(1))


def test_two_cuts_that_lose_nothing_are_intact_each_with_its_own_sequence(tmp_path, fake_fio):
    db = tmp_path / "db.sqlite"
    proc = crash(tmp_path, *CUT, "--cuts", "2", "--trigger", "true")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    found = outcomes(db)
    assert [o.verdict for o in found] == [CutVerdict.INTACT, CutVerdict.INTACT]
    for o in found:
        assert o.issued is not None and RATE // 2 <= o.issued <= 4 * RATE  # about a second of writes at RATE
        assert o.checked is not None and o.issued - 8 <= o.checked <= o.issued and (o.lost, o.corrupt) == (0, 0)
        assert o.waited_s is not None and o.waited_s < 5  # a local file: back at once
    run = Store(f"sqlite:///{db}").get_run(1)
    assert [(r.workload, r.repeat) for r in run.results] == [
        ("crash-wipe", 0), ("crash-write", 0), ("crash-verify", 0), ("crash-wipe", 1), ("crash-write", 1),
        ("crash-verify", 1)]
    assert run.info.status == "complete" and all(r.status == "ok" for r in run.results)
    assert not [w for w in run.info.warnings if w.startswith(("P4", "P5"))]  # iolab's own phase choices
    # what fio was told: the wipe zeroes the region; the write saves its state and cuts at 1 s, the
    # marker touched before the user's command; the verify loads that state; each cut its own seed
    wipe, write, verify = fake_fio.runs[:3]
    assert "zero_buffers=1" in wipe.job_text and wipe.extra_args == ()
    assert f"--aux-path={write.workdir}" in write.extra_args and "--trigger-timeout=1" in write.extra_args
    assert f"--trigger=touch {write.workdir / crashphase.MARKER} && true" in write.extra_args
    assert "verify_state_save=1" in write.job_text and "do_verify=0" in write.job_text
    assert "verify_only=1" in verify.job_text and "verify_state_load=1" in verify.job_text
    assert [f"--aux-path={verify.workdir}"] == list(verify.extra_args)
    seeds = [next(line for line in r.job_text.splitlines() if line.startswith("randseed=")) for r in fake_fio.runs
             if "[crash]" in r.job_text]
    assert seeds == ["randseed=3141"] * 2 + ["randseed=3142"] * 2  # write and verify of cut 1, then cut 2
    assert len(fake_fio.runs) == 6 and all(r.fenced for r in fake_fio.runs)
    text = " ".join(proc.stdout.split())
    assert "crash test: cuts" in text and "intact" in text
    assert "loss rate: 0 of 2 verified cut(s)" in text
    document = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)["crash_test"]
    assert [c["verdict"] for c in document["cuts"]] == ["intact", "intact"]
    assert document["loss_rate"]["ci95"] == pytest.approx([0.0, 0.658], abs=1e-3)
    assert json.loads(iolab("show", "1", "--format", "json", db=db).stdout)["run"]["options"]["crash_test"][
        "settings"]["trigger_timeout"] == "1s"


def test_a_cut_that_loses_acknowledged_writes_is_lost_and_fails_only_when_asked(tmp_path, fake_fio):
    """The trigger zeroes the whole file after fio saved its state: every write fio acknowledged reads
    back as the wipe left it (lost, never corrupt), each with its offset. (Its own randseed: a recording
    is found by the job's text and fio's arguments, not by what the file holds, and the verify phase's
    text does not name the trigger.)"""
    zero = f"dd if=/dev/zero of={tmp_path / 'data.bin'} bs=1M count=16 conv=notrunc status=none"
    for db, asked, code in ((tmp_path / "a.sqlite", (), 0), (tmp_path / "b.sqlite", ("--fail-on-loss",), 3)):
        proc = crash(tmp_path, *CUT, "randseed=100", "--trigger", zero, *asked, db=db)
        assert proc.returncode == code, proc.stderr + proc.stdout
        (outcome,) = outcomes(db)
        assert outcome.verdict == CutVerdict.LOST and outcome.corrupt == 0
        assert outcome.checked is not None and outcome.lost == outcome.checked > 0  # every acknowledged write
        assert outcome.lost == len({offset for offset, _, _ in outcome.bad})
        assert all(reason.startswith("verify: bad magic header 0,") for _, reason, _ in outcome.bad)
        rate = crashtest.loss_rate([outcome])
        assert rate.with_loss == 1 and rate.ci95 is not None and rate.ci95[0] > 0.2
        assert "lost" in proc.stdout and str(outcome.bad[0][0]) in proc.stdout
        assert "loss rate: 1 of 1 verified cut(s)" in " ".join(proc.stdout.split())


def test_a_write_that_ends_before_the_trigger_is_no_cut_and_is_not_verified(tmp_path, fake_fio):
    proc = crash(tmp_path, "size=1m", "--trigger-timeout", "5s", "--trigger", "true")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (outcome,) = outcomes(tmp_path / "db.sqlite")
    assert outcome.verdict == CutVerdict.NO_CUT
    assert "finished writing before the trigger fired" in (outcome.detail or "")
    assert [r.job_text.split("\n")[0] for r in fake_fio.runs] == [
        "; iolab: workload crash-wipe on target data", "; iolab: workload crash-write on target data"]
    assert "no cut" in proc.stdout


@pytest.mark.parametrize(("at", "phase"), [(0, "wipe"), (2, "verify")])
def test_a_phase_that_fails_fails_its_cut_and_the_command(tmp_path, fake_fio, at, phase):
    fake_fio.fault("fail", at=at)
    proc = crash(tmp_path, *CUT, "--trigger", "true")
    assert proc.returncode == 1, proc.stderr + proc.stdout
    (outcome,) = outcomes(tmp_path / "db.sqlite")
    assert outcome.verdict == CutVerdict.FAILED
    assert outcome.detail == f"{phase}: crash{'-wipe' if phase == 'wipe' else ''}: errno 5 (Input/output error)"
    assert len(fake_fio.runs) == at + 1  # nothing runs after the failed phase
    assert f"failed: {outcome.detail}" in " ".join(proc.stdout.split())  # the cuts table says why
    assert Store(f"sqlite:///{tmp_path / 'db.sqlite'}").get_run(1).info.status == "failed"


def test_a_write_phase_whose_fio_fails_once_the_trigger_fired_is_a_cut(tmp_path, fake_fio):
    """fio losing its job at the cut is what a cut looks like: the state it saved is verified."""
    fake_fio.fault("fail", at=1)
    proc = crash(tmp_path, *CUT, "--trigger", "true")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (outcome,) = outcomes(tmp_path / "db.sqlite")
    assert outcome.verdict == CutVerdict.INTACT and len(fake_fio.runs) == 3
    write = Store(f"sqlite:///{tmp_path / 'db.sqlite'}").get_run(1).results[1]
    assert write.status == "ok" and write.extra["crash"]["fired"]
    assert write.extra["crash"]["fio_status"] == "failed" and "errno 5" in write.extra["crash"]["fio_error"]


def test_what_cannot_give_a_verified_crash_test_is_refused_before_anything_runs(tmp_path, fake_fio):
    proc = crash(tmp_path, "--trigger-timeout", "1s")
    assert proc.returncode == 2 and "nothing would cut" in proc.stderr and "--trigger CMD" in proc.stderr
    proc = crash(tmp_path, "--trigger-timeout", "1s", "--trigger-remote", "kill -9 1")
    assert proc.returncode == 2 and "--trigger-remote runs on fio servers" in proc.stderr
    proc = crash(tmp_path, "verify=md5", "rw=randread", "--trigger-timeout", "1s", "--trigger", "true")
    assert proc.returncode == 2 and "a crash test writes" in proc.stderr
    proc = crash(tmp_path, "verify_only=1", "--trigger-timeout", "1s", "--trigger", "true")
    assert proc.returncode == 2 and "verify_only: the crash test sets these itself" in proc.stderr
    proc = crash(tmp_path, "verify=md5", "norandommap=1", "--trigger-timeout", "1s", "--trigger", "true")
    assert proc.returncode == 2 and "false verify failures" in proc.stderr
    assert fake_fio.runs == [] and not (tmp_path / "db.sqlite").exists()


def test_an_option_the_crash_test_sets_itself_is_named_so(tmp_path, fake_fio):
    proc = crash(tmp_path, "runtime=10", "--trigger-timeout", "1s", "--trigger", "true")
    assert proc.returncode == 2 and "runtime: the crash test sets these itself" in proc.stderr
