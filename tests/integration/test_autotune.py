"""`iolab autotune` with real fio on a loop device: every configuration probed under its host
settings, the best ranked with intervals and written as a suite iolab runs again, and the host
left as it was — after a normal end, after Ctrl-C, and after kill -9 (the next command restores).
The descent's decisions, what is stored and printed, the budget and the refusals are
tests/cli/test_autotune.py's (recorded fio, fio's own axes)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from clirun import iolab, popen
from iolab.describe import suite
from iolab.facts.targets import block_device_facts
from iolab.run import tuning
from loopdev import MiB, loop_device, requires_loop
from restorable import restorable

pytestmark = [pytest.mark.root, requires_loop]


def env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def test_configurations_are_probed_ranked_and_the_best_runs_again(tmp_path):
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        original = restorable(block_device_facts(loop.path))
        schedulers = tuning.scheduler_choices(block_device_facts(loop.path))
        proc = iolab("autotune", "-t", f"dev={loop.path}", "--slo", "p99<=50ms", "--axes", "scheduler,nomerges",
                     "--budget", "5m", "--probe-runtime", "1s", "--runtime", "1s", "--repeat", "2", "--top", "2",
                     "--max-iodepth", "16", "--max-numjobs", "1", "ramp_time=0",  # the point: not what is tested
                     "--write-suite", str(tmp_path / "best.yaml"),
                     db=db, env=env(tmp_path), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert restorable(block_device_facts(loop.path)) == original  # left as it was
        doc = json.loads(iolab("show", "1", "--format", "json", db=db).stdout)
        found = doc["run"]["options"]["autotune"]
        other = [s for s in schedulers if s != original["scheduler"]]
        assert len(found["probes"]) == 1 + len(other) + 1  # as it is, each other scheduler, nomerges=2 (or 0)
        configs = [r["config"] for r in found["ranking"]]  # the best two, and as it is to judge the best against
        assert not found["cut_by_budget"] and {} in configs and len(configs) in (2, 3)
        if configs[0]:
            judged = found["against_as_is"]
            said = "is better than as it is" if judged["distinguishable"] else "is not distinguishable from as it is"
            assert f"the best ({', '.join(f'{k}={v}' for k, v in configs[0].items())}) {said}" in \
                " ".join(proc.stdout.split())
        else:
            assert found["against_as_is"] is None
        for rank in found["ranking"]:
            assert rank["n"] == 2 and rank["ci95"][0] <= rank["iops"] <= rank["ci95"][1] and rank["feasible"]
        # each probe ran under the settings it names, as the stored tuning in force says
        for result in doc["results"]:
            requested = result["extra"].get("tuning", {}).get("requested", {})
            for key, value in requested.items():
                assert result["extra"]["tuning"]["in_force"][key] == value
        assert "autotune: clat p99 ≤ 50.0 ms" in proc.stdout
        best = suite.load_yaml((tmp_path / "best.yaml").read_text(), "best.yaml")
        assert dict(found["ranking"][0]["config"]) == {k: v[0] for k, v in best.tune.items()}
        again = iolab("run", str(tmp_path / "best.yaml"), "--dry-run", db=db, env=env(tmp_path), cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        assert restorable(block_device_facts(loop.path)) == original


def _tuning_in_force(device: str, original: dict[str, str], timeout_s: float = 90) -> None:
    """Until a probe runs with the scheduler changed."""
    path = f"/sys/block/{Path(device).name}/queue/scheduler"
    deadline = time.monotonic() + timeout_s
    while tuning.read_value(path) == original["scheduler"]:
        assert time.monotonic() < deadline, "no probe changed the scheduler"
        time.sleep(0.05)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_the_host_is_left_as_it_was_after_ctrl_c_or_kill(tmp_path, sig):
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        dev = block_device_facts(loop.path)
        original = restorable(dev)
        proc = popen("autotune", "-t", f"dev={loop.path}", "--axes", "scheduler", "--budget", "10m",
                     "--probe-runtime", "3s", "--max-iodepth", "1", "--max-numjobs", "1", "ramp_time=0",
                     db=db, env=env(tmp_path), cwd=tmp_path)
        try:
            _tuning_in_force(loop.path, original)
            proc.send_signal(sig)
            _, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        if sig == signal.SIGINT:
            assert proc.returncode == 130, stderr
            assert restorable(dev) == original  # restored before iolab exits
        else:
            time.sleep(0.5)  # fio got SIGTERM from the kernel (PR_SET_PDEATHSIG)
            assert restorable(dev)["scheduler"] != original["scheduler"]  # left behind by the kill
            after = iolab("runs", db=db, env=env(tmp_path))
            assert f"Restored host tuning left by iolab (pid {proc.pid}" in after.stderr
            assert restorable(dev) == original
