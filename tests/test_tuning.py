"""Tuning: validation, apply/restore with a journal, left-over journals — on fixture sysfs trees
and on real loop devices (every value back to its original after a normal end, an exception,
and a process killed with SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.describe import tune
from iolab.errors import SuiteError
from iolab.facts.targets import block_device_facts
from iolab.run import tuning
from loopdev import MiB, loop_device, requires_loop


def test_values_are_normalised_and_checked() -> None:
    assert tune.check_tune({"scheduler": ["mq-deadline", "none"], "rq_affinity": 2, "write_cache": "wt"}) == {
        "scheduler": ("mq-deadline", "none"), "rq_affinity": ("2",), "write_cache": ("write through",)}
    for key, bad in (("rq_affinity", 3), ("nr_requests", 0), ("read_ahead_kb", "-1"), ("scheduler", "a b"),
                     ("write_cache", "off"), ("elevator", "none")):
        with pytest.raises(ValueError):
            tune.check_tune({key: bad})
    with pytest.raises(ValueError, match="empty list"):
        tune.check_tune({"scheduler": []})
    assert tune.parse_tune_args(["scheduler=none", "scheduler=mq-deadline", "rq_affinity=2"]) == {
        "scheduler": ("none", "mq-deadline"), "rq_affinity": ("2",)}
    with pytest.raises(SuiteError, match="--tune 'rq_affinity': expected KEY=VALUE"):
        tune.parse_tune_args(["rq_affinity"])
    assert tune.label("scheduler", "none") == "sched_none" and tune.label("write_cache", "write back") == "wc_wb"


def _disk(fake_sysfs, **queue: str):
    fake_sysfs.disk("nvme0n1", devnum="259:0", queue={"scheduler": "[none] mq-deadline kyber", **queue})
    fake_sysfs.cpus("0-1", governors={0: "powersave", 1: "powersave"})
    return block_device_facts("nvme0n1", sysfs=str(fake_sysfs.root))


def test_apply_and_restore_on_fixture_tree(fake_sysfs, tmp_path: Path) -> None:
    dev = _disk(fake_sysfs)
    root = str(fake_sysfs.root)
    before = tuning.snapshot(dev, sysfs=root)
    assert before["governor"] == "powersave" and before["scheduler"] == "none"
    tune = {"scheduler": "mq-deadline", "rq_affinity": "2", "read_ahead_kb": "4096", "governor": "performance"}
    state = tmp_path / "state"
    with tuning.applied(tune, dev, sysfs=root, directory=state) as in_force:
        assert in_force["rq_affinity"] == "2" and in_force["governor"] == "performance"
        (journal,) = [p for p in state.iterdir() if p.name.startswith("journal-")]
        lines = [json.loads(line) for line in journal.read_text().splitlines()]
        assert lines[0]["owner"]["pid"] == os.getpid()
        assert {(e["key"], e["scope"], e["previous"]) for e in lines[1:]} >= {
            ("scheduler", "nvme0n1", "none"), ("nr_requests", "nvme0n1", "1023"), ("governor", "cpu1", "powersave")}
        assert tuning.live_paths(state)  # held by us: not a leftover
        assert tuning.restore_leftovers(state) == []
    assert tuning.snapshot(dev, sysfs=root) == before
    assert list(state.iterdir()) == []


def test_restored_after_an_exception(fake_sysfs, tmp_path: Path) -> None:
    dev = _disk(fake_sysfs)
    root = str(fake_sysfs.root)
    before = tuning.snapshot(dev, sysfs=root)
    with pytest.raises(KeyboardInterrupt), tuning.applied({"nomerges": "2"}, dev, sysfs=root, directory=tmp_path):
        raise KeyboardInterrupt
    assert tuning.snapshot(dev, sysfs=root) == before


def test_refusals(fake_sysfs, tmp_path: Path) -> None:
    dev = _disk(fake_sysfs)
    root = str(fake_sysfs.root)
    with pytest.raises(tuning.TuningError, match="scheduler=bfq is not available on nvme0n1; it offers none, mq-"):
        tuning.knobs({"scheduler": "bfq"}, dev, sysfs=root)
    os.chmod(fake_sysfs.root / "class/block/nvme0n1/queue/write_cache", 0o444)
    with pytest.raises(tuning.TuningError, match="write_cache is read-only on nvme0n1"):
        tuning.knobs({"write_cache": "write through"}, dev, sysfs=root)
    with pytest.raises(tuning.TuningError, match="governor=ondemand is not available"):
        tuning.knobs({"governor": "ondemand"}, dev, sysfs=root)
    with pytest.raises(tuning.TuningError, match="not on a block device"):
        tuning.knobs({"rq_affinity": "2"}, None, sysfs=root)


def test_no_cpufreq(fake_sysfs) -> None:
    fake_sysfs.cpus("0-1")
    with pytest.raises(tuning.TuningError, match="no CPU frequency scaling"):
        tuning.knobs({"governor": "performance"}, None, sysfs=str(fake_sysfs.root))


def test_a_setting_held_by_a_live_run_is_refused(fake_sysfs, tmp_path: Path) -> None:
    dev = _disk(fake_sysfs)
    root = str(fake_sysfs.root)
    # A second, independent holder: the journal's flock belongs to its open file description.
    with tuning.applied({"rq_affinity": "2"}, dev, sysfs=root, directory=tmp_path), \
            pytest.raises(tuning.TuningError, match="being tuned by another iolab run"), \
            tuning.applied({"rq_affinity": "0"}, dev, sysfs=root, directory=tmp_path):
        pass


_KILLED = """
import json, os, sys, time
from iolab.run import tuning
from iolab.facts.targets import block_device_facts
dev = block_device_facts(sys.argv[1], sysfs=sys.argv[2])
tune = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {"scheduler": "mq-deadline", "rq_affinity": "2",
                                                           "nomerges": "1"}
with tuning.applied(tune, dev, sysfs=sys.argv[2], directory=__import__("pathlib").Path(sys.argv[3])):
    print("tuned", flush=True)
    time.sleep(60)
"""


def test_leftover_journal_of_a_killed_process(fake_sysfs, tmp_path: Path) -> None:
    dev = _disk(fake_sysfs)
    root = str(fake_sysfs.root)
    before = tuning.snapshot(dev, sysfs=root)
    journals = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, "nvme0n1", root, str(journals)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "tuned"
    assert tuning.restore_leftovers(journals) == []  # alive: untouched
    assert tuning.snapshot(dev, sysfs=root)["rq_affinity"] == "2"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (left,) = tuning.restore_leftovers(journals)
    assert left.owner["pid"] == proc.pid and not left.kept
    assert left.restored[0].key == "scheduler"  # first: it resets nr_requests
    assert {(r.key, r.was, r.value) for r in left.restored} >= {("rq_affinity", "2", "1"), ("nomerges", "1", "0")}
    assert tuning.snapshot(dev, sysfs=root) == before
    assert list(journals.iterdir()) == []
    assert tuning.restore_leftovers(journals) == []


def test_torn_last_line_and_unrestorable_entries(fake_sysfs, tmp_path: Path) -> None:
    dev = _disk(fake_sysfs)
    root = str(fake_sysfs.root)
    queue = fake_sysfs.root / "class/block/nvme0n1/queue"
    journal = tmp_path / "journal-1-x.jsonl"
    journal.write_text(json.dumps({"owner": {"pid": 1}}) + "\n"
                       + json.dumps({"key": "rq_affinity", "scope": "nvme0n1", "path": str(queue / "rq_affinity"),
                                     "previous": "2"}) + "\n"
                       + json.dumps({"key": "nomerges", "scope": "gone", "path": str(tmp_path / "gone/nomerges"),
                                     "previous": "0"}) + "\n"
                       + '{"key": "nomerg')
    (left,) = tuning.restore_leftovers(tmp_path)
    assert tuning.snapshot(dev, sysfs=root)["rq_affinity"] == "2"
    assert len(left.restored) == 2 and not left.kept  # a vanished device is nothing to restore
    assert not journal.exists()


@pytest.mark.root
@requires_loop
def test_loop_device_values_restored_normal_exception_and_kill(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        dev = block_device_facts(loop.path)
        original = tuning.snapshot(dev)
        assert set(original) >= {"scheduler", "rq_affinity", "nomerges", "nr_requests", "read_ahead_kb"}
        # Loop devices keep their queue settings between attachments: choose values unlike the current.
        tune = {"scheduler": "mq-deadline" if original["scheduler"] != "mq-deadline" else "none",
                "rq_affinity": "2" if original["rq_affinity"] != "2" else "1",
                "nomerges": "1" if original["nomerges"] != "1" else "0",
                "nr_requests": "64" if original["nr_requests"] != "64" else "32",
                "read_ahead_kb": "16" if original["read_ahead_kb"] != "16" else "32",
                "write_cache": "write through" if original["write_cache"] != "write through" else "write back"}
        with tuning.applied(tune, dev, directory=tmp_path / "state") as in_force:
            assert {k: in_force[k] for k in tune} == tune
        assert tuning.snapshot(dev) == original

        with pytest.raises(RuntimeError), tuning.applied(tune, dev, directory=tmp_path / "state"):
            raise RuntimeError("fio failed")
        assert tuning.snapshot(dev) == original

        proc = subprocess.Popen([sys.executable, "-c", _KILLED, loop.name, "/sys", str(tmp_path / "state"),
                                 json.dumps(tune)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "tuned"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert all(v != original[k] for k, v in tuning.snapshot(dev).items() if k in tune)
        (left,) = tuning.restore_leftovers(tmp_path / "state")
        assert tuning.snapshot(dev) == original and not left.kept
