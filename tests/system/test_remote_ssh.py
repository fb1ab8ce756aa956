"""ssh:// hosts end to end: network namespaces as hosts, a real sshd in each (``sshlab``), real fio and
bubblewrap there, the CLI in a subprocess, a real SQLite database.

Tests that leave the hosts as they found them share the module's lab (``shared``: three hosts, one per
xdist worker that runs them); a test that changes sshd's keys or configuration, or kills the hosts'
processes, has a lab of its own. Host specs: tests/unit/remote/test_hosts.py; what a dry run refuses
or leaves alone: tests/cli/test_remote.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clirun import iolab, popen, wait_for
from iolab.store.database import Store
from iolab.workflows import crashtest
from loopdev import MiB, loop_device, requires_loop
from netns import Host, listening_tcp, requires_netns, requires_sshd
from remoteruns import check_aggregates
from sshlab import SshLab, ssh_lab

pytestmark = [requires_netns, requires_sshd, pytest.mark.root]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    """Three ssh hosts for the tests that leave them as they found them (each test's own files live in
    its tmp_path; the hosts' TMPDIR is the lab's)."""
    with ssh_lab(3, tmp_path_factory.mktemp("ssh")) as found:
        yield found


def ssh_suite(hosts: list[Host], path: Path | str, runtime: str = "2s", workloads: str = "  - {rw: randread, bs: 4k}\n",
              extra: str = "") -> str:
    specs = [f"ssh://root@{h.address}" for h in hosts]
    return (f"name: ssh\ntargets:\n  many:\n    hosts: {json.dumps(specs)}\n    path: {path}\n    size: 8m\n{extra}"
            f"defaults: {{ioengine: libaio, direct: 1, iodepth: 4, time_based: 1, runtime: {runtime}}}\n"
            f"workloads:\n{workloads}")


def namespace_commands(host: Host) -> list[str]:
    """The command lines of every process in the host's namespace."""
    out = []
    for pid in subprocess.run(["ip", "netns", "pids", host.namespace], capture_output=True, text=True,
                              check=True).stdout.split():
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip())
        except OSError:
            continue
    return out


def test_three_ssh_hosts_no_open_port_aggregate_and_nothing_left(tmp_path, shared):
    before = shared.remote_dirs()
    hosts, env = shared.hosts, shared.env
    data = tmp_path / "data"
    data.mkdir()
    suite = tmp_path / "s.yaml"
    suite.write_text(ssh_suite(hosts, f"{data}/", runtime="4s"))
    db = tmp_path / "r.db"
    proc = popen("run", str(suite), db=db, env=env)  # observed: this host and every ssh host
    started = time.monotonic()
    # while the job runs: fio servers run on every host, and only sshd listens on TCP there
    wait_for(lambda: all(any("--server=sock:" in c for c in namespace_commands(h)) for h in hosts), 60)
    during = {h.address: listening_tcp(h) for h in hosts}
    fenced = [c for h in hosts for c in namespace_commands(h) if c.startswith("bwrap ")]
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert during == {h.address: [f"{h.address}:2222"] for h in hosts}
    assert len(fenced) == 3 and all("--unshare-net" in c and "--ro-bind / /" in c for c in fenced)
    for h in hosts:
        assert f"ssh://root@{h.address} — " in err and "ssh connected in" in err
        assert re.search(rf"ssh://root@{re.escape(h.address)}: fio may write only: {data} \(new files only", err)
    assert "fence on each ssh host: bubblewrap" in err
    assert "fence: none" not in err and "fence on this machine" not in err  # no job runs fio here: not said
    # the servers and their directories are gone with the run
    assert all(not any("fio" in c for c in namespace_commands(h)) for h in hosts)
    assert shared.remote_dirs() == before
    assert time.monotonic() - started < 60
    store = Store(f"sqlite:///{db}")
    run_id = store.list_runs()[0].id
    doc = json.loads(iolab("show", str(run_id), "--format", "json", db=db).stdout)
    check_aggregates(store, run_id, doc)
    assert {r["host"] for r in doc["summary"]} == {*(f"ssh://root@{h.address}" for h in hosts), "all hosts"}
    # every host's cost, sampled over its ssh connection: its own network namespace's interface only
    costs = {c["host"]: c for c in doc["host_costs"]}
    for h in hosts:
        cost = costs[f"ssh://root@{h.address}"]
        assert cost["role"] == "server" and cost["gaps"] == 0 and cost["cpu_us_per_io"] > 0
        assert set(cost["nics"]) == {"eth0"} and cost["nics"]["eth0"]["bytes_s"] > 0  # fio's protocol over ssh
    assert f"ssh://root@{hosts[0].address} (server) from /proc and /sys over ssh — vm" in err


def test_dry_run_contacts_no_ssh_host(tmp_path, shared):
    hosts, env = shared.hosts[:1], shared.env
    marker = tmp_path / "ssh-called"
    wrapper = tmp_path / "ssh"
    wrapper.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexec {env['IOLAB_SSH']} \"$@\"\n")
    wrapper.chmod(0o755)
    suite = tmp_path / "s.yaml"
    suite.write_text(ssh_suite(hosts, tmp_path / "f.bin"))
    dry = iolab("run", str(suite), "--dry-run", db=tmp_path / "r.db", env={"IOLAB_SSH": str(wrapper)})
    assert dry.returncode == 0, dry.stderr
    assert "hosts not checked (a dry run contacts no host" in dry.stderr and not marker.exists()
    probe = iolab("run", str(suite), "--dry-run", "--probe", db=tmp_path / "r.db", env={"IOLAB_SSH": str(wrapper)})
    assert probe.returncode == 0, probe.stderr
    assert marker.exists() and "ssh connected in" in probe.stderr


def test_an_unknown_host_key_and_a_refused_key_are_named_with_sshs_reason(tmp_path):
    with ssh_lab(2, tmp_path, strict=True) as own:
        hosts, env = own.hosts, own.env
        suite = tmp_path / "s.yaml"
        suite.write_text(ssh_suite(hosts, tmp_path / "f.bin"))
        done = iolab("run", str(suite), db=tmp_path / "r.db", env=env)
        assert done.returncode == 1, done.stderr
        for h in hosts:
            assert re.search(rf"ssh://root@{re.escape(h.address)}: connecting and logging in over ssh failed: "
                             r".*Host key verification failed\.", done.stderr)
        assert "preflight failed for 2 of 2 host(s)" in done.stderr and "Hint: an ssh:// host needs ssh" in done.stderr
        # the first host's key known, the second host refuses the client's key
        scan = subprocess.run(["ssh-keyscan", "-p", "2222", hosts[0].address], capture_output=True, text=True)
        (tmp_path / "known_hosts").write_text(scan.stdout)
        (tmp_path / "authorized_keys").write_text("")
        done = iolab("run", str(suite), db=tmp_path / "r.db", env=env)
        assert done.returncode == 1
        assert re.search(rf"ssh://root@{re.escape(hosts[0].address)}: connecting and logging in over ssh failed: "
                         r".*Permission denied \(publickey\)\.", done.stderr), done.stderr
        assert re.search(rf"ssh://root@{re.escape(hosts[1].address)}: .*Host key verification failed\.", done.stderr)
        assert not (tmp_path / "r.db").exists()


def test_a_host_without_bubblewrap_is_refused_unless_no_fence(tmp_path):
    with ssh_lab(2, tmp_path, hide={2: "/usr/bin/bwrap"}) as own:
        hosts, env = own.hosts, own.env
        suite = tmp_path / "s.yaml"
        suite.write_text(ssh_suite(hosts, tmp_path / "f.bin", runtime="1s"))
        done = iolab("run", str(suite), "--no-observe", db=tmp_path / "r.db", env=env)
        assert done.returncode == 2, done.stderr  # refused before fio starts, as a local job without a fence
        assert f"ssh://root@{hosts[1].address}: no fence can be set up there: bubblewrap (bwrap) is not installed" \
               in done.stderr and "apt-get install bubblewrap, or pass --no-fence" in done.stderr
        assert f"ssh://root@{hosts[0].address}:" not in done.stderr.split("Hint:")[0].split("preflight refused")[1]
        assert not (tmp_path / "r.db").exists()
        unfenced = iolab("run", str(suite), "--no-observe", "--no-fence", db=tmp_path / "r.db", env=env)
        assert unfenced.returncode == 0, unfenced.stderr
        assert "fence on the ssh hosts: none — --no-fence" in unfenced.stderr


def test_a_write_the_hosts_plan_does_not_name_fails_inside_the_remote_fence(tmp_path, shared):
    hosts, env = shared.hosts[:1], shared.env
    data = tmp_path / "data"
    data.mkdir()
    outside = tmp_path / "outside.iolog"  # fio's server writes an iolog itself, where the job says
    suite = tmp_path / "s.yaml"
    suite.write_text(ssh_suite(hosts, f"{data}/", runtime="1s", workloads=(
        f"  - {{rw: write, bs: 4k, write_iolog: {outside}}}\n  - {{rw: write, bs: 4k}}\n")))
    done = iolab("run", str(suite), "--no-observe", db=tmp_path / "r.db", env=env)
    assert done.returncode == 1, done.stderr
    assert not outside.exists()
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    results = store.get_run(store.list_runs()[0].id).results
    assert [r.status for r in results] == ["failed", "ok"]
    assert re.search(rf"ssh://root@{re.escape(hosts[0].address)}: a write the fence stops fails the job; there "
                     rf"fio may write only: {data} \(new files only: its existing entries are read-only\), "
                     rf"{re.escape(str(shared.tmpdir))}/iolab-ssh-\w+/work \(iolab's work directory\)",
                     results[0].error or ""), results[0].error
    assert results[0].extra["hosts"][0]["fence"][0].startswith(f"{data} (new files only")
    assert not list(data.iterdir())  # what fio laid out there is removed after the run
    # the same plan unfenced: fio writes the iolog (what the fence stopped was a real write)
    unfenced = iolab("run", str(suite), "--no-observe", "--no-fence", db=tmp_path / "r.db", env=env)
    assert unfenced.returncode == 0, unfenced.stderr
    assert outside.exists()


def test_a_dropped_ssh_connection_makes_the_run_partial(tmp_path, shared):
    hosts, env = shared.hosts[:2], shared.env
    suite = tmp_path / "s.yaml"
    data = tmp_path / "data"
    data.mkdir()
    suite.write_text(ssh_suite(hosts, f"{data}/", runtime="5s"))
    db = tmp_path / "r.db"
    proc = popen("run", str(suite), "--no-observe", db=db, env=env)
    victim = hosts[1]
    running(data)
    masters = [pid for pid in _descendants(proc.pid) if _is_ssh_master_to(pid, victim.address)]
    assert len(masters) == 1
    os.kill(masters[0], 9)  # the connection drops (as when the network or the client dies)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert f"ssh://root@{victim.address}" in err and "lost" in err
    wait_for(lambda: not any("fio" in c for c in namespace_commands(victim)), 20)  # the server went with it
    store = Store(f"sqlite:///{db}")
    run = store.get_run(store.list_runs()[0].id)
    assert run.info.status == "partial"
    result = run.results[0]
    assert result.status == "partial"
    hosts_in_report = {j.hostname for j in result.report.jobs}
    assert hosts_in_report == {f"ssh://root@{hosts[0].address}"}
    records = {r["host"]: r for r in result.extra["hosts"]}
    assert records[f"ssh://root@{hosts[0].address}"]["status"] == "ok"
    assert records[f"ssh://root@{victim.address}"]["status"] == "lost"


def running(directory: Path) -> None:
    """Return once fio has laid out its file in ``directory`` and is doing I/O: the job's ssh
    sessions (facts, checks) are over, so killing now interrupts no shell on the hosts (a login
    shell killed mid-startup can leave its rc files' locks behind, e.g. pyenv's rehash). The hosts
    share this machine's file system, and a fio server behind a Unix socket prefixes every host's
    file name alike, so they share one file here."""
    wait_for(lambda: any(p.stat().st_size >= 8 * MiB for p in directory.iterdir()), 60)
    time.sleep(1)


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            out += children
            todo += children
    return out


def _is_ssh_master_to(pid: int, address: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"ControlMaster=yes" in argv and f"root@{address}".encode() in argv


def test_killing_iolab_ends_every_hosts_server(tmp_path, shared):
    before = shared.remote_dirs()
    hosts, env = shared.hosts[:2], shared.env
    suite = tmp_path / "s.yaml"
    data = tmp_path / "data"
    data.mkdir()
    suite.write_text(ssh_suite(hosts, f"{data}/", runtime="30s"))
    proc = popen("run", str(suite), "--no-observe", db=tmp_path / "r.db", env=env)
    running(data)
    assert all(any("--server=sock:" in c for c in namespace_commands(h)) for h in hosts)
    assert shared.remote_dirs() - before
    proc.kill()  # SIGKILL: iolab cleans nothing up itself
    proc.wait()
    wait_for(lambda: all(not any("fio" in c for c in namespace_commands(h)) for h in hosts), 20)
    wait_for(lambda: shared.remote_dirs() == before, 20)


@requires_loop
def test_devices_and_files_on_an_ssh_host_are_checked_there_and_fenced(tmp_path, shared):
    hosts, env = shared.hosts[:1], shared.env
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        spec = f"ssh://root@{hosts[0].address}"
        write = "  - {rw: randwrite, bs: 4k}\n"
        suite = tmp_path / "dev.yaml"
        suite.write_text(ssh_suite(hosts, loop.path, runtime="1s", workloads=write))
        loop.make_ext4()
        done = iolab("run", str(suite), "--no-observe", "--destroy", loop.path, db=tmp_path / "r.db", env=env)
        assert done.returncode == 2, done.stderr
        assert f"Error: {spec}: refusing to write to {loop.path}" in done.stderr and "ext4" in done.stderr
        subprocess.run(["wipefs", "-a", "-q", loop.path], check=True)
        done = iolab("run", str(suite), "--no-observe", db=tmp_path / "r.db", env=env)
        assert done.returncode == 2 and "not named with --destroy" in done.stderr, done.stderr
        done = iolab("run", str(suite), "--no-observe", "--destroy", loop.path, db=tmp_path / "r.db", env=env)
        assert done.returncode == 0, done.stderr
        assert f"{spec}: fio may write only: {loop.path} (--destroy), its work directory" in done.stderr
        # an existing file with data is a device's equal: --destroy or nothing
        old = tmp_path / "old.bin"
        old.write_bytes(os.urandom(8 * MiB))  # the job's size: fio writes it in place
        suite.write_text(ssh_suite(hosts, old, runtime="1s", workloads=write))
        done = iolab("run", str(suite), "--no-observe", db=tmp_path / "r.db", env=env)
        assert done.returncode == 2, done.stderr
        assert f"Error: {spec}: refusing to write to {old}: it is an existing file with 8.00 MiB of data" \
               in done.stderr
        done = iolab("run", str(suite), "--no-observe", "--destroy", str(old), db=tmp_path / "r.db", env=env)
        assert done.returncode == 0, done.stderr
        assert f"{spec}: fio may write only: {old} (--destroy)" in done.stderr


def test_a_killed_run_resumes_on_ssh_hosts(tmp_path, shared):
    hosts, env = shared.hosts[:2], shared.env
    data = tmp_path / "data"
    data.mkdir()
    suite = tmp_path / "s.yaml"
    suite.write_text(ssh_suite(hosts, f"{data}/", runtime="6s", workloads=(
        "  - {rw: randread, bs: 4k, runtime: 1s}\n  - {rw: randwrite, bs: 4k}\n")))
    db = tmp_path / "r.db"
    proc = popen("run", str(suite), "--no-observe", db=db, env=env)
    wait_for(lambda: any("randwrite" in p.name and p.stat().st_size >= 8 * MiB for p in data.iterdir()), 90)
    time.sleep(1)  # fio writes: the job's ssh sessions are over
    proc.kill()
    proc.wait()
    run_id = str(Store(f"sqlite:///{db}").list_runs()[0].id)
    # the killed job's file is in the directory now: not new, so read-only in the fence without --destroy
    again = iolab("run", "--resume", run_id, db=db, env=env)
    assert again.returncode == 1, again.stderr
    store = Store(f"sqlite:///{db}")
    failed = [r for r in store.get_run(int(run_id)).results if r.status == "failed"]
    assert failed and "left by an earlier or killed run, are read-only" in (failed[0].error or "")
    assert f"--destroy {data}" in (failed[0].error or "")
    # a new run of the same suite, the directory named: every host writes it
    done = iolab("run", str(suite), "--no-observe", "--destroy", str(data), db=db, env=env)
    assert done.returncode == 0, done.stderr
    assert f"fio may write only: {data} (--destroy)" in done.stderr


@pytest.mark.serial
def test_a_crash_test_on_an_ssh_host_logs_in_again_after_the_cut(tmp_path):
    """The cut (``--trigger``, run here as a PDU would be) kills every process of the host's namespace
    but sshd's listener: a power cut, and a boot that brought sshd back. iolab waits until it can log
    in again, starts its fenced fio server there again and verifies both cuts; the verify phase
    (``verify_only``, which fio opens read-write) runs in a fence that lets it open the file the run
    laid out, and the second cut writes that file again though the host, checked again, now has it."""
    with ssh_lab(1, tmp_path) as own:  # its own: the cut kills the host's processes
        (host,), env = own.hosts, own.env
        listener = (tmp_path / "h1" / "sshd.pid").read_text().strip()
        cut = tmp_path / "cut.sh"
        cut.write_text(f"#!/bin/sh\nfor p in $(ip netns pids {host.namespace}); do\n"
                       f'  [ "$p" = "{listener}" ] || kill -9 "$p" 2>/dev/null\ndone\n')
        cut.chmod(0o755)
        target = tmp_path / "crash.bin"  # new: the run lays it out
        db = tmp_path / "r.db"
        proc = iolab("crash-test", "-t", f"f={target}", "--host", f"ssh://root@{host.address}", "size=8m",
                     "rate_iops=500", "--cuts", "2", "--trigger-timeout", "2s", "--trigger", str(cut),
                     "--settle", "1s", "--wait-timeout", "60s", db=db, env=env, timeout=240)
        assert proc.returncode == 0, proc.stderr + proc.stdout
    run = Store(f"sqlite:///{db}").get_run(1)
    outcomes = crashtest.cut_outcomes(run)
    assert [o.verdict for o in outcomes] == [crashtest.CutVerdict.INTACT] * 2, proc.stdout
    for o in outcomes:
        # fio's trigger timeout counts from its start, its file's layout included: 2 s at 500 IOPS issued
        # ~1,000 writes on a quiet machine, 401 beside four other test workers on 2 CPUs
        assert o.issued is not None and o.issued > 100
        assert o.checked is not None and o.checked >= o.issued - 8 and (o.lost, o.corrupt) == (0, 0)
        assert o.waited_s is not None and o.waited_s >= 1.0  # the settle, then a new login
    assert {r.status for r in run.results if r.workload == "crash-verify"} == {"ok"}


def test_saturate_and_autotune_probe_an_ssh_host_and_the_best_suite_runs_there_again(tmp_path, shared):
    """``--host`` on the search commands: every probe of the saturation search and of the descent runs on
    the ssh host, fenced there; the best configuration's suite names the host and runs there again. Axes
    that tune this machine (block queues, pinning) are refused with ``--host``, before any host is contacted."""
    (host, *_), env = shared.hosts, shared.env
    spec, target, db = f"ssh://root@{host.address}", tmp_path / "at.bin", tmp_path / "r.db"
    best = tmp_path / "best.yaml"
    refused = iolab("autotune", "-t", f"t={target}", "--host", spec, "--axes", "pin,numjobs", db=db, env=env)
    assert refused.returncode == 2 and "--axes pin: tunes this machine's" in refused.stderr, refused.stderr
    proc = iolab("autotune", "-t", f"t={target}", "--host", spec, "size=8m", "--axes", "ioengine", "--repeat", "2",
                 "--probe-runtime", "1s", "--runtime", "1s", "--max-iodepth", "4", "--ramp-time", "0",
                 "--no-observe", "--write-suite", str(best), db=db, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    run = Store(f"sqlite:///{db}").get_run(1)
    assert len(run.results) >= 4 and {r.status for r in run.results} == {"ok"}
    assert [h["host"] for r in run.results for h in r.extra["hosts"]] == [spec] * len(run.results)
    assert f"{target} (new)" in run.results[0].extra["hosts"][0]["fence"]  # laid out there; read after
    again = iolab("run", str(best), "--no-observe", db=db, env=env)
    assert again.returncode == 0, again.stderr
    assert [h["host"] for h in Store(f"sqlite:///{db}").get_run(2).results[0].extra["hosts"]] == [spec]
