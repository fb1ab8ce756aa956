"""Tuning: validation, apply/restore with a journal, left-over journals — on fixture sysfs trees (never
this machine's settings). A process killed with SIGKILL while it holds a journal, and real loop
devices, are tests/integration/test_tuning.py's."""

from __future__ import annotations

import fcntl
import json
import os
import struct
from pathlib import Path

import pytest

from iolab.describe import tune
from iolab.errors import SuiteError
from iolab.facts.targets import block_device_facts
from iolab.run import tuning


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


# --- cpu_dma_latency: a request held open, not a value journalled ---------------------------------------


def _fds_on(path: Path) -> list[int]:
    """This process's file descriptors open on ``path``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                out.append(int(fd))
        except OSError:
            continue
    return out


def _pm_qos(tmp_path: Path, value: int = 2_000_000_000) -> Path:
    """A stand-in for /dev/cpu_dma_latency: a file holding a native 32-bit value."""
    path = tmp_path / "cpu_dma_latency"
    path.write_bytes(struct.pack("=i", value))
    return path


def test_cpu_dma_latency_values() -> None:
    assert tune.check_tune({"cpu_dma_latency": [0, " 20 ", "0"]}) == {"cpu_dma_latency": ("0", "20")}
    for bad in (-1, "abc", 2**31, "1.5", True):
        with pytest.raises(ValueError, match="cpu_dma_latency: expected a whole number of microseconds"):
            tune.check_value("cpu_dma_latency", bad)
    assert tune.parse_tune_args(["cpu_dma_latency=0"]) == {"cpu_dma_latency": ("0",)}
    assert tune.label("cpu_dma_latency", "0") == "dmalat0"


def test_cpu_dma_latency_is_held_for_the_block_and_released_after(fake_sysfs, tmp_path: Path) -> None:
    """The request is the open file: written as a native 32-bit value, close-on-exec (fio does not
    inherit it), in force inside the block, closed after it; nothing is journalled for it."""
    dev = _disk(fake_sysfs)
    root, state, pm_qos = str(fake_sysfs.root), tmp_path / "state", _pm_qos(tmp_path)
    assert tuning.snapshot(dev, sysfs=root, pm_qos=str(pm_qos))["cpu_dma_latency"] == "2000000000"
    with tuning.applied({"cpu_dma_latency": "0", "nomerges": "2"}, dev, sysfs=root, directory=state,
                        pm_qos=str(pm_qos)) as in_force:
        assert in_force["cpu_dma_latency"] == "0" and in_force["nomerges"] == "2"
        assert struct.unpack("=i", pm_qos.read_bytes()) == (0,)
        (fd,) = _fds_on(pm_qos)
        assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
        (journal,) = [p for p in state.iterdir() if p.name.startswith("journal-")]
        keys = [json.loads(line).get("key") for line in journal.read_text().splitlines()[1:]]
        assert keys == ["nomerges"]  # the sysfs setting alone is journalled
    assert _fds_on(pm_qos) == [] and list(state.iterdir()) == []
    with tuning.applied({"cpu_dma_latency": "50"}, None, sysfs=root, directory=state, pm_qos=str(pm_qos)):
        assert len(_fds_on(pm_qos)) == 1 and list(state.iterdir()) == []  # held alone: no journal at all
    assert _fds_on(pm_qos) == []


def test_cpu_dma_latency_released_after_an_exception_and_refused_without_the_device(tmp_path: Path) -> None:
    pm_qos = _pm_qos(tmp_path)
    with pytest.raises(KeyboardInterrupt), tuning.applied({"cpu_dma_latency": "0"}, None, directory=tmp_path,
                                                          pm_qos=str(pm_qos)):
        assert _fds_on(pm_qos)
        raise KeyboardInterrupt
    assert _fds_on(pm_qos) == []
    with pytest.raises(tuning.TuningError, match=r"cpu_dma_latency: cpus has no .*/missing"):
        tuning.knobs({"cpu_dma_latency": "0"}, None, pm_qos=str(tmp_path / "missing"))
    os.chmod(pm_qos, 0o444)
    with pytest.raises(tuning.TuningError, match=r"cpu_dma_latency: .* is read-only on cpus"):
        tuning.knobs({"cpu_dma_latency": "0"}, None, pm_qos=str(pm_qos))
    with pytest.raises(tuning.TuningError, match="cpu_dma_latency: cannot open"), \
            tuning.hold_latency(0, str(tmp_path)):  # a directory cannot be opened for writing
        pass
    assert "cpu_dma_latency" not in tuning.snapshot(None, pm_qos=str(tmp_path / "missing"))
