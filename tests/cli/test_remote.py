"""Remote targets in a dry run, in-process: what the plan refuses or says without contacting any host
(a dry run contacts no fio server, exporter or ssh host). The real runs on hosts: tests/system/test_remote_*.py."""

from __future__ import annotations

import json
from pathlib import Path

from inprocess import iolab

#: Loopback: nothing is contacted in a dry run, and nothing but loopback may be named here.
HOST = "127.0.0.1"


def ssh_suite(path: Path | str, extra: str = "") -> str:
    return (f"name: ssh\ntargets:\n  many:\n    hosts: {json.dumps([f'ssh://root@{HOST}'])}\n    path: {path}\n"
            f"    size: 8m\n{extra}defaults: {{ioengine: libaio, direct: 1, iodepth: 4, time_based: 1, runtime: 2s}}\n"
            "workloads:\n  - {rw: randread, bs: 4k}\n")


def test_tuning_or_pinning_a_target_on_hosts_is_refused(tmp_path):
    """``tune:`` and ``pin:`` set this machine's block queues and CPUs (the governor too), never a host's:
    a suite asking for them on a target on hosts is refused by the plan, a dry run included."""
    for extra, said in (("tune: {nomerges: 2}\n", "tuning (nomerges) sets this machine's"),
                        ("pin: mq\n", "pin: mq: target many runs on its hosts")):
        suite = tmp_path / "s.yaml"
        suite.write_text(ssh_suite(tmp_path / "f.bin", extra=extra))
        proc = iolab("run", str(suite), "--dry-run", db=tmp_path / "r.db")
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr


def test_a_dry_run_calls_no_ssh(tmp_path):
    """A dry run of a suite on ssh hosts starts no ssh (``IOLAB_SSH`` notes each call); with ``--probe``
    it does: tests/system/test_remote_ssh.py."""
    marker = tmp_path / "ssh-called"
    wrapper = tmp_path / "ssh"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexit 255\n")
    wrapper.chmod(0o755)
    suite = tmp_path / "s.yaml"
    suite.write_text(ssh_suite(tmp_path / "f.bin"))
    dry = iolab("run", str(suite), "--dry-run", db=tmp_path / "r.db", env={"IOLAB_SSH": str(wrapper)})
    assert dry.returncode == 0, dry.stderr
    assert "hosts not checked (a dry run contacts no host" in dry.stderr and not marker.exists()


def test_a_remote_jobs_log_names_cannot_lead_the_local_client_out_of_its_work_directory(tmp_path):
    """fio's client, on this machine and outside the fence, writes the logs its servers send under
    the job's log names: an absolute name or one that climbs out with ``..`` is refused by the plan, a
    dry run included (exit 2). A run on a real server: tests/system/test_remote_hosts.py."""
    db = tmp_path / "t.db"
    for log in ("/tmp/iolab-test-victim", "../../iolab-test-victim"):
        suite = tmp_path / "s.yaml"
        suite.write_text(
            f"name: remote\ntargets:\n  many:\n    hosts: ['{HOST}:8765']\n    path: {tmp_path / 'remote.bin'}\n"
            "    size: 16m\ndefaults: {ioengine: libaio, direct: 1, time_based: 1, runtime: 1s}\n"
            f"workloads:\n  - {{rw: randread, bs: 4k, write_bw_log: '{log}', log_avg_msec: 500}}\n")
        proc = iolab("run", str(suite), "--no-observe", "--dry-run", db=db, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert f"the log '{log}' would be written by fio's client on this machine outside" in proc.stderr
