"""PostgreSQL's pgbench captured on ext4 on a loop device (fsync on, so commits reach the device as
flushes), and its trace replayed on a second loop device with every request.

The test starts a server of its own for the application it captures (its data on the captured
device), on a Unix socket in a directory of its own (no TCP port): parallel-safe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
import tracing
from clirun import iolab
from loopdev import MiB, loop_device, requires_loop


@pytest.fixture(autouse=True)
def _tracefs_clean() -> Iterator[None]:
    """No ftrace instance of a capture made here outlives the test."""
    with tracing.cleaned_up():
        yield


def _as_postgres(*argv: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv]


@requires_loop
@pytest.mark.skipif(pg.pg_bin() is None, reason="PostgreSQL server binaries are not installed")
def test_pgbench_captured_and_replayed(tmp_path: Path) -> None:
    bindir = pg.pg_bin()
    assert bindir is not None
    base = Path(tempfile.mkdtemp(prefix="iolab-pgcap-"))  # postgres must reach it: not under pytest's 0700 dirs
    shutil.chown(base, "postgres")
    sock, data, port = base / "sock", base / "mnt" / "data", str(50000 + os.getpid() % 10000)
    db = tmp_path / "iolab.db"
    try:
        with loop_device(tmp_path, size_bytes=256 * MiB, name="pg.img") as disk, \
                loop_device(tmp_path, size_bytes=256 * MiB, name="target.img") as target:
            disk.make_ext4()
            disk.mount(base / "mnt")
            shutil.chown(base / "mnt", "postgres")
            sock.mkdir()
            shutil.chown(sock, "postgres")
            subprocess.run(_as_postgres(f"{bindir}/initdb", "-D", str(data), "-U", "postgres", "--auth=trust"),
                           check=True, capture_output=True)
            subprocess.run(_as_postgres(f"{bindir}/pg_ctl", "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                                        f"-p {port} -k {sock} -c listen_addresses=''", "start"),
                           check=True, capture_output=True)
            try:
                pgbench = [f"{bindir}/pgbench", "-h", str(sock), "-p", port, "-U", "postgres"]
                subprocess.run(_as_postgres(*pgbench, "-i", "-s", "2", "postgres"), check=True, capture_output=True)
                done = iolab("capture", disk.path, "--label", "pgbench", "--format", "json", "--",
                             *_as_postgres(*pgbench, "-T", "3", "-c", "2", "postgres"), db=db)
            finally:
                subprocess.run(_as_postgres(f"{bindir}/pg_ctl", "-D", str(data), "-m", "immediate", "stop"),
                               check=False, capture_output=True)
            assert done.returncode == 0, done.stderr
            fp = json.loads(done.stdout[done.stdout.index("{"):])["fingerprint"]
            assert fp["ios"]["write"] > 50 and fp["ios"].get("flush", 0) > 0  # commits are durable
            assert any(name.startswith("postgres") for name in fp["processes"])
            traced = fp["ios"].get("read", 0) + fp["ios"]["write"]
            replayed = iolab("replay", "pgbench", "--target", f"t={target.path}", "--destroy", target.path,
                             "--as-fast-as-possible", "--format", "json", db=db,
                             env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
            assert replayed.returncode == 0, replayed.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)
    doc = json.loads(replayed.stdout)
    assert sum(d["total_ios"] for job in doc["results"][0]["jobs"] for k, d in job["directions"].items()
               if k in ("read", "write")) == traced
