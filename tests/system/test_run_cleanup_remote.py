"""What a run leaves behind on remote hosts: scratch files iolab lays out there are removed, files that
were there before are kept (network-namespace hosts, ssh facts). Real fio, the CLI in a subprocess, a
real SQLite database."""

from __future__ import annotations

import os

import pytest

from clirun import iolab
from iolab.store.database import Store
from netns import lab, requires_netns, requires_sshd, start_sshd


@requires_netns
@pytest.mark.root
@requires_sshd
def test_scratch_files_iolab_lays_out_on_remote_hosts_are_removed(tmp_path):
    db = tmp_path / "db.sqlite"
    missing = tmp_path / "remote-scratch.bin"
    directory = tmp_path / "dir"
    directory.mkdir()
    (directory / "keep.0.0").write_bytes(b"there before the run")  # named like fio's files, yet not iolab's
    with lab(1) as (host,):
        host.start_fio_server()
        env = start_sshd(host, tmp_path)
        suite = tmp_path / "suite.yaml"
        suite.write_text(
            "name: scratch\ntargets:\n"
            f"  file: {{hosts: ['{host.spec()}'], path: {missing}, ssh: true, size: 4m}}\n"
            f"  dir: {{hosts: ['{host.spec()}'], path: {directory}/, ssh: true, size: 4m}}\n"
            "defaults: {ioengine: psync, time_based: 1, runtime: 1s}\n"
            "workloads:\n  - {name: w, rw: randwrite, bs: 4k}\n  - {name: keep, rw: randread, bs: 4k}\n")
        proc = iolab("run", str(suite), "--no-observe", db=db, cwd=tmp_path, env=env)
        assert proc.returncode == 0, proc.stderr
    assert not missing.exists()
    assert sorted(os.listdir(directory)) == ["keep.0.0"]  # fio's w.0.0 removed, the earlier file kept
    assert Store(f"sqlite:///{db}").get_run(1).info.options["remote_scratch"]["file"] == {
        host.spec(): {"host": f"ip:{host.address},8765", "files": [str(missing)], "dirs": {}}}
