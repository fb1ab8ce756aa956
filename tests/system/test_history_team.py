"""A team's database: two machines run the same suite at the same time into one real PostgreSQL server,
then history over it, each machine's series apart (``--host``). The second machine is this one in its
own UTS namespace (its own host name, as ``uname`` reports it), started as a separate process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iolab.store.database import Store

ROUNDS = 3
WORKLOADS = ("w0", "w1", "w2", "w3")
OTHER = "lab-b"


@pytest.fixture
def url(postgres_url: str) -> str:
    """A database of its own on the test run's PostgreSQL server; a second host name needs root."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a second host name")
    return postgres_url


def suite(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "team.yaml"
    workloads = "".join(f"  - {{name: {w}, rw: {'randread' if i % 2 else 'randwrite'}, bs: 4k}}\n"
                        for i, w in enumerate(WORKLOADS))
    path.write_text(f"name: team\ntargets: {{data: {directory / 'data.bin'}}}\n"
                    f"defaults: {{ioengine: psync, size: 4m, time_based: 1, runtime: 1s}}\nworkloads:\n{workloads}")
    return path


def start(url: str, directory: Path, hostname: str | None) -> subprocess.Popen[str]:
    """``iolab run`` of the suite in ``directory``; with ``hostname``, in a UTS namespace of that name."""
    argv = [sys.executable, "-m", "iolab", "run", str(suite(directory)), "--no-observe", "--label", "team"]
    if hostname:
        argv = ["unshare", "--uts", "sh", "-c", f'hostname {hostname} && exec "$@"', "sh", *argv]
    env = {**os.environ, "IOLAB_DB": url, "XDG_STATE_HOME": str(directory / "state"), "COLUMNS": "200"}
    return subprocess.Popen(argv, cwd=directory, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.postgres
def test_two_machines_store_at_once_and_history_keeps_their_series_apart(tmp_path, url):
    here = os.uname().nodename
    for _ in range(ROUNDS):
        both = [start(url, tmp_path / "a", None), start(url, tmp_path / "b", OTHER)]
        for proc in both:
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err
    store = Store(url)
    try:
        runs = [store.get_run(info.id) for info in reversed(store.list_runs())]  # type: ignore[union-attr]
    finally:
        store.close()
    assert len(runs) == 2 * ROUNDS
    hosts = {}
    for run in runs:  # nothing lost, nothing stored under the other machine's run
        assert run.info.host is not None
        hosts[run.info.id] = run.info.host.hostname
        own_dir = tmp_path / ("b" if run.info.host.hostname == OTHER else "a")
        assert [(r.workload, r.status) for r in run.results] == [(w, "ok") for w in WORKLOADS]
        assert {r.target_path for r in run.results} == {str(own_dir / "data.bin")}
        assert all(r.report is not None and r.report.jobs[0].name == r.workload for r in run.results)
    assert sorted(hosts.values()) == sorted([here] * ROUNDS + [OTHER] * ROUNDS)

    env = {**os.environ, "IOLAB_DB": url}
    every = subprocess.run([sys.executable, "-m", "iolab", "history", "team", "--metric", "iops", "--format", "json"],
                           env=env, capture_output=True, text=True, check=False)
    assert every.returncode == 0, every.stderr
    series = json.loads(every.stdout)["series"]
    assert sorted((s["workload"], s["host"]) for s in series) == sorted(
        (w, h) for w in WORKLOADS for h in (here, OTHER))
    for s in series:
        assert [hosts[p["run"]] for p in s["points"]] == [s["host"]] * ROUNDS
    one = subprocess.run([sys.executable, "-m", "iolab", "history", "--host", OTHER, "--metric", "iops",
                          "--format", "json"], env=env, capture_output=True, text=True, check=False)
    assert one.returncode == 0, one.stderr
    only = json.loads(one.stdout)["series"]
    assert {s["host"] for s in only} == {OTHER} and {s["workload"] for s in only} == set(WORKLOADS)
    assert {p["run"] for s in only for p in s["points"]} == {i for i, h in hosts.items() if h == OTHER}
