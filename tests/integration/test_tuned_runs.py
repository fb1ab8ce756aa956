"""Tuned runs end to end on loop devices: a tuning axis side by side in `show`, every value back to
its original after a normal end, Ctrl-C, and kill -9 followed by the next command; `--pin`,
`host`, `restore`; the issue's "Done when" lint plan on a 1 TiB device."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirun import iolab, popen
from iolab.facts.sysfs import parse_cpu_list
from iolab.facts.targets import block_device_facts
from iolab.run import tuning
from iolab.store.database import Store
from loopdev import MiB, loop_device, requires_loop
from restorable import restorable

pytestmark = [pytest.mark.root, requires_loop]

AXIS = """\
name: sched
targets: {{dev: {device}}}
defaults: {{ioengine: libaio, direct: 1, time_based: 1, runtime: {runtime}, size: 16m, randrepeat: 0}}
tune: {{scheduler: [{a}, {b}], nomerges: {nomerges}}}
workloads:
  - {{rw: randread, bs: 4k, iodepth: [1, 8]}}
"""


def _suite(tmp_path: Path, device: str, original: dict[str, str], runtime: str = "1s") -> tuple[Path, dict]:
    """A suite tuning two settings away from their original values."""
    a, b = ("mq-deadline", "none") if original["scheduler"] == "none" else ("none", "mq-deadline")
    nomerges = "2" if original["nomerges"] != "2" else "1"
    path = tmp_path / "sched.yaml"
    path.write_text(AXIS.format(device=device, runtime=runtime, a=a, b=b, nomerges=nomerges))
    return path, {"a": a, "b": b, "nomerges": nomerges}


def _env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def _wait_for(path: str, value: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if tuning.read_value(path) == value:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never became {value!r}")


def test_tuning_axis_side_by_side_and_restored(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        dev = block_device_facts(loop.path)
        original = restorable(dev)
        suite, chosen = _suite(tmp_path, loop.path, original)
        proc = iolab("run", str(suite), db=db, env=_env(tmp_path))
        assert proc.returncode == 0, proc.stderr
        assert restorable(dev) == original
        run = Store(f"sqlite:///{db}").get_run(1)
        names = [r.workload for r in run.results]
        a, b = chosen["a"], chosen["b"]
        assert names == [f"randread-4k-qd1-sched_{a}", f"randread-4k-qd1-sched_{b}",
                         f"randread-4k-qd8-sched_{a}", f"randread-4k-qd8-sched_{b}"]
        first, second = run.results[:2]
        assert first.extra["tuning"]["in_force"]["scheduler"] == a
        assert second.extra["tuning"]["in_force"]["scheduler"] == b
        assert first.extra["tuning"]["in_force"]["nomerges"] == chosen["nomerges"]
        assert first.target_facts.device.scheduler == a  # the facts stored are those in force
        # Comparability: the same fio job, parameters equal except for the tuning.
        assert first.params.pop("tune.scheduler") == a and second.params.pop("tune.scheduler") == b
        assert first.params == second.params and first.job_hash != second.job_hash
        assert "[randread-4k-qd1-sched_" in first.job_text
        shown = iolab("show", "1", db=db, env=_env(tmp_path)).stdout
        rows = [line for line in shown.splitlines()  # the results table's rows (the cost table names them too)
                if line.startswith("  dev ") and "-qd1-sched_" in line and line.split()[2] == "read"]
        assert len(rows) == 2 and f"sched_{a}" in rows[0] and f"sched_{b}" in rows[1]
        assert (f"tuning scheduler={b}, nomerges={chosen['nomerges']}: dev/randread-4k-qd1-sched_{b}, "
                f"dev/randread-4k-qd8-sched_{b}") in shown
        # compare inside the run: a side per tuning value, each queue depth paired with its own
        by_value = iolab("compare", "1", "--by", "tune.scheduler", "--metric", "iops", "--format", "json", db=db)
        doc = json.loads(by_value.stdout)
        assert [s["selector"] for s in doc["sides"]] == [f"scheduler={a}", f"scheduler={b}"]
        assert [(p["label"], p["comparable"]) for p in doc["comparisons"][0]["pairs"]] == [
            (f"randread-4k-{qd}-sched_{a} / …{b}", True) for qd in ("qd1", "qd8")]


@contextlib.contextmanager
def _tuned_run(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], dict[str, str], dict[str, str], str]]:
    """A 20 s tuned run in the background, once its tuning is in force: (process, the original
    values, the values chosen, the device name)."""
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        original = restorable(block_device_facts(loop.path))
        suite, chosen = _suite(tmp_path, loop.path, original, runtime="20s")
        proc = popen("run", str(suite), db=tmp_path / "db.sqlite", env=_env(tmp_path))
        _wait_for(f"/sys/block/{loop.name}/queue/nomerges", chosen["nomerges"])
        yield proc, original, chosen, loop.path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_restore_every_value(tmp_path: Path, sig: signal.Signals) -> None:
    with _tuned_run(tmp_path) as (proc, original, chosen, device):
        time.sleep(1)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert restorable(block_device_facts(device)) == original
        assert not list((tmp_path / "state" / "iolab" / "tuning").iterdir())
        (result, *_) = Store(f"sqlite:///{tmp_path / 'db.sqlite'}").get_run(1).results
        assert result.status == "interrupted" and result.extra["tuning"]["requested"]["scheduler"] == chosen["a"]


def test_kill_9_then_the_next_command_restores(tmp_path: Path) -> None:
    with _tuned_run(tmp_path) as (proc, original, chosen, device):
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        time.sleep(0.5)  # fio got SIGTERM from the kernel (PR_SET_PDEATHSIG)
        dev = block_device_facts(device)
        assert restorable(dev)["nomerges"] == chosen["nomerges"]  # left behind
        after = iolab("runs", db=tmp_path / "db.sqlite", env=_env(tmp_path))
        assert after.returncode == 0, after.stderr
        assert f"Restored host tuning left by iolab (pid {proc.pid}" in after.stderr
        assert f"{dev.name} nomerges {chosen['nomerges']} -> {original['nomerges']}" in after.stderr
        assert restorable(dev) == original
        again = iolab("restore", db=tmp_path / "db.sqlite", env=_env(tmp_path))
        assert again.returncode == 0 and again.stdout.startswith("Nothing to restore")


def test_tune_and_pin_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        dev = block_device_facts(loop.path)
        original = restorable(dev)
        rqa = "2" if original["rq_affinity"] != "2" else "1"
        job = tmp_path / "job.fio"
        job.write_text("[j]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\niodepth=4\nnumjobs=2\nsize=16m\n"
                       "time_based\nruntime=1\n")
        proc = iolab("run", str(job), "--target", f"dev={loop.path}", "--tune", f"rq_affinity={rqa}", "--pin", "mq",
                     db=db, env=_env(tmp_path))
        assert proc.returncode == 0, proc.stderr
        (result,) = Store(f"sqlite:///{db}").get_run(1).results
        queue_cpus = set().union(*(parse_cpu_list(c) for c in dev.queues.values())) & os.sched_getaffinity(0)
        assert result.extra["tuning"]["in_force"]["rq_affinity"] == rqa and result.params["tune.rq_affinity"] == rqa
        assert result.extra["pin"]["mode"] == "mq" and "cpus_allowed_policy=split" in result.job_text
        assert f"cpus_allowed={result.extra['pin']['cpus']}" in result.job_text
        assert set(parse_cpu_list(result.extra["pin"]["cpus"])) == queue_cpus and queue_cpus  # the queues' CPUs
        assert restorable(dev) == original
        bad = iolab("run", str(job), "--target", f"dev={loop.path}", "--tune", "scheduler=nonesuch", db=db,
                    env=_env(tmp_path))
        assert bad.returncode == 2 and "scheduler=nonesuch is not available on" in bad.stderr  # a refused plan


def test_host_command(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        proc = iolab("host", "--device", loop.path, "--format", "json", db=tmp_path / "db", env=_env(tmp_path))
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["host"]["cpu_count"] >= 1 and doc["target"]["device"]["name"] == loop.name
        assert doc["tuning_in_force"]["scheduler"] == block_device_facts(loop.path).scheduler
        assert doc["pin"]["mq"]
        table = iolab("host", "--device", loop.path, db=tmp_path / "db", env=_env(tmp_path)).stdout
        assert "device.queues" in table and "pin.mq" in table and "host.kernel" in table


def test_done_when_lint_plan_on_a_1_tib_device(tmp_path: Path) -> None:
    """randwrite 4k QD32 ×4 jobs, a 2 GiB file on a 1 TB device, 60 s, no ramp: P1 and P4 with remedies."""
    with loop_device(tmp_path, size_bytes=1024**4, name="tib.img") as loop:
        subprocess.run(["mkfs.ext4", "-q", "-E", "lazy_itable_init=1,lazy_journal_init=1", loop.path], check=True)
        mnt = loop.mount(tmp_path / "mnt", options="noinit_itable")
        job = tmp_path / "plan.fio"
        job.write_text("[global]\nioengine=libaio\ndirect=1\ntime_based\nruntime=60s\n\n"
                       "[randwrite]\nrw=randwrite\nbs=4k\niodepth=32\nnumjobs=4\nsize=2g\n")
        proc = iolab("lint", str(job), "--target", f"data={mnt}/test.bin", "--format", "json", db=tmp_path / "db",
                     env=_env(tmp_path))
        found = {f["id"]: f for f in json.loads(proc.stdout)["findings"]}
        assert {"P1", "P4"} <= set(found)
        assert "the working set (2.00 GiB) is 0.2 % of the device (1.00 TiB)" in found["P1"]["message"]
        assert found["P1"]["remedy"].startswith("test the whole device") and "ramp_time" in found["P4"]["remedy"]
