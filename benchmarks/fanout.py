"""What does iolab add to a run on N fio servers? `iolab run` against a bare `fio --client` on the same job.

Hosts are network namespaces on this machine (tests/support/netns.py), each with a real `fio --server`; N = 1, 4,
8, 16 by default. The job is iolab's own rendering of a one-workload suite (4k random reads, libaio,
direct, iodepth 4, rate-limited to 200 IOPS per host so that N hosts do not load the 2 shared CPUs, 3 s)
on a directory target, and the bare client gets exactly the job file iolab sends (its 1 s logs
included): `fio --output-format=json+ --client=H1 job.fio --client=H2 job.fio …`. Per round and N, the
variants run one after another in a rotating order; the median of the rounds counts, and the spread
(max - min) of each is printed, because this machine is shared and timings are noisy.

Measured for `iolab run` as a user runs it, observers on (start-up, schema check, planning with fio's
--parse-only, the hosts' probe, the observers' probe and sampling, the job, storing, the results and
host-cost tables): the wall time from start to exit; iolab's own CPU time (user +
system of the iolab process and its threads, read from /proc when it has exited, before it is reaped;
fio's processes are not in it) and its peak RSS (VmHWM, sampled every 10 ms while it runs). Target:
overhead = iolab - bare fio <= 0.5 s + 10 ms per host.

`--baseline-iolab PATH` also runs another iolab executable (e.g. an older checkout's
`.venv/bin/iolab`) in the same rounds, for a before/after table measured under the same load.

`--mode ssh` runs iolab against `ssh://` hosts instead (each namespace also runs sshd; iolab connects
over ssh, starts a fenced fio server on a Unix socket there and forwards it, and samples each host's
/proc and /sys over the same connection), while the bare client still drives the TCP servers of the
same hosts, the fastest a run can be without ssh. What iolab adds is then its whole ssh path: login,
the preflight on the host (fio, bubblewrap), facts and device checks, starting and fencing the
server, forwarding; target: overhead <= 1.0 s + 25 ms per host. The same rounds also time N logins
at once (`ssh HOST true` to each host, concurrently), printed for reference: that much of the overhead
is the hosts' own sshd and login shell (which here is root's ~/.bashrc: Debian's bash reads it for a
command over ssh, and this machine's runs `pyenv init`), and every host is a namespace of this one
2-CPU machine, so the hosts' CPU time is iolab's wall time too.

    sudo .venv/bin/python benchmarks/fanout.py [--mode tcp|ssh] [--hosts 1,4,8,16] [--rounds 3] [--runtime 3]
        [--baseline-iolab /work/main/.venv/bin/iolab] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ratios import Ratio, add_json_option, emit, installed_env, say

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from iolab.fio import logs
from iolab.runner.local import LOG_PREFIX
from netns import lab, netns_unavailable_reason, start_sshds

SUITE = """\
name: fanout
targets:
  many:
    hosts: {hosts}
    path: {path}/
    size: 16m
defaults: {{ioengine: libaio, direct: 1, iodepth: 4, rate_iops: 200, randrepeat: 0, time_based: 1, runtime: {runtime}s}}
workloads:
  - {{rw: randread, bs: 4k}}
"""


@dataclass(frozen=True)
class Sample:
    wall_s: float
    cpu_s: float | None = None
    peak_rss_bytes: int | None = None


def _ticks(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime (proc(5) 14, 15)


def _hwm(pid: int) -> int | None:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return None


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> Sample:
    """Run ``argv``; its wall time, and its own CPU time and peak RSS (see the module docstring).
    Raises ``RuntimeError`` with its stderr when it fails."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            try:
                peak[0] = max(peak[0], _hwm(proc.pid) or 0)
            except (OSError, ValueError):
                return
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: /proc still has its times
    wall = time.monotonic() - started
    cpu = _ticks(proc.pid)
    done.set()
    sampler.join()
    _, stderr = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {stderr.decode(errors='replace')[-2000:]}")
    return Sample(wall, cpu, peak[0] or None)


def bare_fio(job: Path, specs: list[str], out: Path) -> Sample:
    argv = ["fio", "--output-format=json+", f"--output={out}"]
    for spec in specs:
        argv += [f"--client={spec}", job.name]
    started = time.monotonic()
    subprocess.run(argv, cwd=job.parent, check=True, capture_output=True)
    return Sample(time.monotonic() - started)


def logins(ssh: list[str], addresses: list[str]) -> Sample:
    """``ssh HOST true`` to every one of ``addresses`` at once: the wall time until all have ended."""
    started = time.monotonic()
    procs = [subprocess.Popen([*ssh, "-o", "BatchMode=yes", address, "true"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for address in addresses]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("ssh HOST true failed")
    return Sample(time.monotonic() - started)


def job_text(iolab: str, suite: Path, env: dict[str, str]) -> str:
    """The job file iolab sends to the servers: its rendering of the suite (``--dry-run``) after the
    global section of its 1 s logs (``runner.client``)."""
    out = subprocess.run([iolab, "run", str(suite), "--dry-run", "--no-observe"], env=env, capture_output=True,
                         text=True, check=True).stdout
    text = "\n".join(line for line in out.splitlines() if not line.startswith("# ")) + "\n"
    return logs.global_section(LOG_PREFIX) + text


def _median(samples: list[Sample], field: str) -> float:
    return statistics.median(getattr(s, field) for s in samples)


def _spread(samples: list[Sample]) -> float:
    walls = [s.wall_s for s in samples]
    return max(walls) - min(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="1,4,8,16", help="host counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (>= 3 for the claim)")
    parser.add_argument("--runtime", type=int, default=3, help="seconds of I/O per run")
    parser.add_argument("--iolab", default=str(Path(sys.executable).with_name("iolab")), help="iolab to measure")
    parser.add_argument("--baseline-iolab", help="another iolab executable measured in the same rounds")
    parser.add_argument("--mode", choices=("tcp", "ssh"), default="tcp",
                        help="iolab's hosts: fio servers over TCP, or ssh:// hosts (see the module docstring)")
    add_json_option(parser)
    args = parser.parse_args()
    if (reason := netns_unavailable_reason()) is not None:
        sys.exit(f"fanout: {reason}")
    counts = sorted({int(n) for n in args.hosts.split(",")})
    variants = {"iolab": args.iolab, **({"baseline": args.baseline_iolab} if args.baseline_iolab else {})}
    results: dict[tuple[str, int], list[Sample]] = {}
    with lab(max(counts)) as hosts, tempfile.TemporaryDirectory(dir="/tmp", prefix="iolab-fanout-") as tmp_dir:
        tmp = Path(tmp_dir)
        (tmp / "data").mkdir()
        for h in hosts:
            h.start_fio_server()
        ssh_env = start_sshds(hosts, tmp) if args.mode == "ssh" else {}
        # compiled modules in a cache of this benchmark's own, written by the unmeasured first runs
        env = {**installed_env(tmp / "pycache"), "COLUMNS": "200", **ssh_env}
        suites, jobs = {}, {}
        for n in counts:
            suites[n] = tmp / f"suite-{n}.yaml"
            named = [f"ssh://root@{h.address}" if args.mode == "ssh" else h.spec() for h in hosts[:n]]
            suites[n].write_text(SUITE.format(hosts=json.dumps(named), path=tmp / "data", runtime=args.runtime))
            jobs[n] = tmp / f"bare-{n}" / "job.fio"
            jobs[n].parent.mkdir()
            jobs[n].write_text(job_text(args.iolab, suites[n], {**env, "IOLAB_DB": str(tmp / "dry.db")}))
        ssh = ssh_env.get("IOLAB_SSH", "ssh").split()
        specs = [f"ip:{h.address},8765" for h in hosts]
        bare_fio(jobs[max(counts)], specs, tmp / "warm.json")  # lays out every host's file once
        # with ssh facts iolab removes the files it laid out; kept, every run reads one laid out, as bare fio does
        keep = ["--keep-files"] if args.mode == "ssh" else []
        for name, exe in variants.items():  # creates each variant's database, outside the measurements
            measure([exe, "run", str(suites[counts[0]]), *keep], {**env, "IOLAB_DB": str(tmp / f"{name}.db")}, tmp)
        for r in range(args.rounds):
            for n in counts:
                order = ["bare", *variants]
                order = order[r % len(order):] + order[:r % len(order)]
                for name in order:
                    if name == "bare":
                        sample = bare_fio(jobs[n], specs[:n], jobs[n].parent / "out.json")
                    else:
                        sample = measure([variants[name], "run", str(suites[n]), *keep],
                                         {**env, "IOLAB_DB": str(tmp / f"{name}.db")}, tmp)
                    results.setdefault((name, n), []).append(sample)
                if args.mode == "ssh":
                    results.setdefault(("logins", n), []).append(logins(ssh, [h.address for h in hosts[:n]]))
                say(f"round {r + 1}, {n} host(s): " + ", ".join(
                    f"{name} {results[(name, n)][-1].wall_s:.2f} s" for name in order), args.json)
    ratios = report(results, counts, list(variants), args.json, args.mode)
    emit("fanout" if args.mode == "tcp" else "fanout-ssh", ratios, args.json)


def target_s(n: int, mode: str) -> float:
    """The most iolab may add to a bare fio client on ``n`` hosts (see the module docstring)."""
    return 0.5 + 0.01 * n if mode == "tcp" else 1.0 + 0.025 * n


def report(results: dict[tuple[str, int], list[Sample]], counts: list[int], variants: list[str],
           as_json: bool, mode: str = "tcp") -> list[Ratio]:
    """The table (medians; spread = max - min wall time over the rounds) and the ratios."""
    head = "| hosts | bare fio client | " + " | ".join(
        f"{v} wall | {v} overhead | {v} CPU | {v} peak RSS" for v in variants) + " | target |" + (
        " N ssh logins at once (reference) |" if mode == "ssh" else "")
    say(head, as_json)
    say("|" + "---|" * (head.count("|") - 1), as_json)
    ratios = []
    for n in counts:
        bare = results[("bare", n)]
        cells = [f"{n}", f"{_median(bare, 'wall_s'):.2f} s (±{_spread(bare) / 2:.2f})"]
        for v in variants:
            mine = results[(v, n)]
            overhead = _median(mine, "wall_s") - _median(bare, "wall_s")
            cells += [f"{_median(mine, 'wall_s'):.2f} s (±{_spread(mine) / 2:.2f})", f"{overhead:+.2f} s",
                      f"{_median(mine, 'cpu_s'):.2f} s", f"{_median(mine, 'peak_rss_bytes') / 2**20:.0f} MiB"]
            if v == "iolab":
                over = " over ssh" if mode == "ssh" else ""
                ratios.append(Ratio(f"iolab{over} overhead over bare fio client at {n} host(s), s", overhead,
                                    target_s(n, mode), "lower"))
        cells.append(f"≤ {target_s(n, mode):.2f} s")
        if ("logins", n) in results:
            login = results[("logins", n)]
            cells.append(f"{_median(login, 'wall_s'):.2f} s (±{_spread(login) / 2:.2f})")
        say("| " + " | ".join(cells) + " |", as_json)
    if len(counts) > 1:
        lo, hi = counts[0], counts[-1]
        for v in variants:
            cpu = (_median(results[(v, hi)], "cpu_s") - _median(results[(v, lo)], "cpu_s")) / (hi - lo)
            rss = (_median(results[(v, hi)], "peak_rss_bytes")
                   - _median(results[(v, lo)], "peak_rss_bytes")) / (hi - lo)
            say(f"{v}: per added host {cpu * 1000:+.1f} ms CPU, {rss / 2**20:+.2f} MiB peak RSS "
                f"({lo} -> {hi} hosts)", as_json)
    return ratios


if __name__ == "__main__":
    main()
