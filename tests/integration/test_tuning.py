"""Tuning across the process boundary: the left-over journal of a process killed with SIGKILL (on a
fixture sysfs tree), and every value of a real loop device back to its original after a normal end,
an exception and a kill. Validation and apply/restore in-process are tests/unit/run/test_tuning.py's."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.facts.targets import block_device_facts
from iolab.run import tuning
from loopdev import MiB, loop_device, requires_loop
from restorable import restorable


def _disk(fake_sysfs, **queue: str):
    fake_sysfs.disk("nvme0n1", devnum="259:0", queue={"scheduler": "[none] mq-deadline kyber", **queue})
    fake_sysfs.cpus("0-1", governors={0: "powersave", 1: "powersave"})
    return block_device_facts("nvme0n1", sysfs=str(fake_sysfs.root))


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
    before = restorable(dev, sysfs=root)
    journals = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, "nvme0n1", root, str(journals)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "tuned"
    assert tuning.restore_leftovers(journals) == []  # alive: untouched
    assert restorable(dev, sysfs=root)["rq_affinity"] == "2"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (left,) = tuning.restore_leftovers(journals)
    assert left.owner["pid"] == proc.pid and not left.kept
    assert left.restored[0].key == "scheduler"  # first: it resets nr_requests
    assert {(r.key, r.was, r.value) for r in left.restored} >= {("rq_affinity", "2", "1"), ("nomerges", "1", "0")}
    assert restorable(dev, sysfs=root) == before
    assert list(journals.iterdir()) == []
    assert tuning.restore_leftovers(journals) == []


@pytest.mark.root
@requires_loop
def test_loop_device_values_restored_normal_exception_and_kill(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        dev = block_device_facts(loop.path)
        original = restorable(dev)
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
        assert restorable(dev) == original

        with pytest.raises(RuntimeError), tuning.applied(tune, dev, directory=tmp_path / "state"):
            raise RuntimeError("fio failed")
        assert restorable(dev) == original

        proc = subprocess.Popen([sys.executable, "-c", _KILLED, loop.name, "/sys", str(tmp_path / "state"),
                                 json.dumps(tune)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "tuned"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert all(v != original[k] for k, v in restorable(dev).items() if k in tune)
        (left,) = tuning.restore_leftovers(tmp_path / "state")
        assert restorable(dev) == original and not left.kept
