"""A fenced fio server (`iolab server start --allow FILE`) in a network namespace host (root, iproute2):
its jobs write only what it allows. The fence of local runs: tests/integration/test_fence.py."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clirun import iolab
from iolab.runner import fence
from iolab.store.database import Store
from loopdev import MiB
from netns import lab, requires_netns

pytestmark = pytest.mark.skipif(not fence.status().ok, reason=f"no fence here: {fence.status().reason}")


@pytest.fixture(autouse=True)
def _own_state(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """iolab's state directory of this test, for the server and its client."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@requires_netns
def test_a_fenced_fio_server_writes_only_what_it_allows(tmp_path: Path) -> None:
    """`iolab server start --allow FILE` in a namespace host: a client's job on the allowed file
    runs; one on another file of the same directory fails, the file unchanged."""
    allowed, other = tmp_path / "allowed.bin", tmp_path / "other.bin"
    allowed.write_bytes(b"\0" * MiB)
    other.write_bytes(os.urandom(MiB))
    before = hashlib.md5(other.read_bytes()).hexdigest()
    db = tmp_path / "db.sqlite"
    with lab(1) as (host,):
        pidfile = tmp_path / "srv.pid"
        started = subprocess.run(["ip", "netns", "exec", host.namespace, sys.executable, "-m", "iolab", "server",
                                  "start", "--bind", host.address, "--allow", str(allowed), "--pidfile", str(pidfile)],
                                 capture_output=True, text=True, timeout=60, check=False)
        assert started.returncode == 0, started.stderr
        assert f"its jobs may write only: {allowed} (--allow), {tmp_path / 'srv.work'} (iolab's work directory)" \
            in " ".join(started.stdout.split())
        try:
            for name, path in (("ok", allowed), ("no", other)):
                suite = tmp_path / f"{name}.yaml"
                suite.write_text(f"targets:\n  t: {{hosts: ['{host.spec()}'], path: {path}}}\n"
                                 "workloads:\n  - {rw: write, bs: 64k, size: 1m}\n")
                proc = iolab("run", str(suite), "--label", name, "--no-observe", db=db, cwd=tmp_path)
                assert proc.returncode == (0 if name == "ok" else 1), proc.stderr
        finally:
            subprocess.run([sys.executable, "-m", "iolab", "server", "stop", "--pidfile", str(pidfile)],
                           capture_output=True, timeout=60, check=False)
    assert hashlib.md5(other.read_bytes()).hexdigest() == before
    failed = Store(f"sqlite:///{db}").get_run(2).results[0]
    assert failed.status in ("failed", "partial") and "Read-only file system" in (failed.error or "")
