"""Capture, the real thing: fio's and dd's I/O on loop devices (a partition too) recorded from the
kernel's block tracepoints in a private ftrace instance, recovered within stated tolerances, stored as a
run that ``runs``, ``show`` and ``fit`` see; and the fitted jobs run by fio itself. The pure parts
(parsing, fingerprint, fit, replay planning) are in tests/unit/workflows/test_capture.py, showing and
reporting a stored capture in tests/cli/test_capture.py."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import tracing
from clirun import iolab, wait_for
from iolab.store.database import Store
from iolab.workflows.capture import fingerprint as fp_mod
from iolab.workflows.capture import fit, record, ringfmt, tracefs
from iolab.workflows.capture import trace as trace_mod
from iolab.workflows.capture.trace import WRITE
from loopdev import MiB, loop_device, requires_loop

FIO_RANDRW = ["--rw=randrw", "--rwmixread=70", "--bssplit=4k/60:64k/40", "--direct=1", "--ioengine=libaio",
              "--iodepth=8", "--size=96M", "--io_size=160M", "--randrepeat=0", "--output-format=json"]


@pytest.fixture(autouse=True)
def _tracefs_clean() -> Iterator[None]:
    """No ftrace instance of a capture made here outlives the test (the tests assert that their
    captures remove their own; this removes what a failed test left)."""
    with tracing.cleaned_up():
        yield


def _fio_capture(device: str, out: Path, *options: str) -> tuple[record.Capture, dict[str, int]]:
    command = ["fio", "--name=known", f"--filename={device}", *FIO_RANDRW, *options, f"--output={out}"]
    captured = record.capture(device, command=command)
    job = json.loads(out.read_text())["jobs"][0]
    return captured, {d: job[d]["total_ios"] for d in ("read", "write")}


@requires_loop
def test_a_known_fio_workload_is_recovered(tmp_path: Path) -> None:
    """randrw 70/30, bssplit 4k/60:64k/40, zipf:1.2 at iodepth 8. Tolerances: every request fio
    counted is in the trace (exactly); mix and size shares within 3 points (binomial sd < 0.8 with
    ~5000 requests); random >= 99 %; depth never above iodepth and 8 at the 99th percentile at issue;
    the hottest 1 % of granules take over 30 % of the requests under zipf and under 10 % uniformly."""
    with loop_device(tmp_path, size_bytes=128 * MiB) as loop:
        captured, counted = _fio_capture(loop.path, tmp_path / "zipf.json", "--random_distribution=zipf:1.2")
        fp = fp_mod.fingerprint(captured.trace)
        captured.close()
        assert captured.trace.lost_events == 0
        assert {k: fp.ios.get(k, 0) for k in ("read", "write")} == counted
        assert fp.read_pct_ios == pytest.approx(70, abs=3)
        for kind in ("read", "write"):
            counts = fp.bs_counts[kind]
            assert set(counts) == {4096, 65536}
            assert 100 * counts[4096] / sum(counts.values()) == pytest.approx(60, abs=3)
        assert fp.random_pct is not None and fp.random_pct >= 99
        assert fp.depth_max <= 8 and fp.depth_at_issue.p99 == 8
        assert fp.lba_end_bytes <= 96 * MiB
        assert fp.hot1_pct is not None and fp.hot1_pct > 30
        assert set(fp.processes) == {"fio"}
        uniform, _ = _fio_capture(loop.path, tmp_path / "uniform.json")
        uniform_fp = fp_mod.fingerprint(uniform.trace)
        uniform.close()
        assert (uniform_fp.hot1_pct or 100) < 10
        # the fitted job recovers the options (zipf θ within 0.2: fio's own sampling noise at ~5000 requests)
        job = dict(fit.fit_job(fp).options)
        assert job["rw"] == "randrw" and abs(int(job["rwmixread"] or 0) - 70) <= 3
        assert job["bssplit"] == "4k/60:64k/40" or _near_bssplit(job["bssplit"] or "")
        # iodepth within 1: the kernel sees fio's depth less the I/Os fio is between completing and resubmitting
        assert int(job["iodepth"] or 0) in (7, 8) and "percentage_random" not in job
        kind, theta = (job["random_distribution"] or "").split(":")
        assert kind == "zipf" and float(theta) == pytest.approx(1.2, abs=0.2)
        assert "random_distribution" not in dict(fit.fit_job(uniform_fp).options)
    assert not tracing.instances(os.getpid())  # the private ftrace instances are gone


def _near_bssplit(text: str) -> bool:
    """``4k/59:64k/41`` or ``4k/60:64k/40,4k/58:64k/42``: each share within 3 points of 60/40."""
    for direction in text.split(","):
        shares = dict(part.split("/") for part in direction.split(":"))
        if set(shares) != {"4k", "64k"} or abs(int(shares["4k"]) - 60) > 3:
            return False
    return True


@pytest.mark.parametrize(("kind", "param", "size"), [("zipf", 1.2, 134_152_192), ("zipf", 0.6, 100 * MiB),
                                                     ("pareto", 0.2, 128 * MiB)])
def test_the_fit_models_skew_with_fios_own_generator(tmp_path: Path, kind: str, param: float, size: int) -> None:
    """fio's zipf is Gray's approximation, scrambled modulo a block count that is not a power of two
    here (several ranks to one block): the hot shares of the offsets fio itself picks (ioengine=null,
    write_iolog) equal ``fit.fio_picks``'s within 0.5 points; sampling the exact zipf is off by up to 9."""
    log = tmp_path / "picks.log"
    subprocess.run(["fio", "--name=z", "--ioengine=null", f"--size={size}", "--rw=randread", "--bs=4k",
                    f"--random_distribution={kind}:{param}", f"--io_size={200_000 * 4096}", f"--write_iolog={log}",
                    "--output=/dev/null"], check=True)
    offsets = np.array([int(line.split()[3]) for line in log.read_text().splitlines() if line.split()[2:3] == ["read"]])
    assert offsets.size == 200_000
    picks = fit.fio_picks(kind, param, np.random.default_rng(1).random(offsets.size), -(-size // 4096))
    by_fio, modelled = fp_mod.skew(offsets)[:2], fp_mod.skew(picks.astype(np.int64) * 4096)[:2]
    assert modelled == pytest.approx(by_fio, abs=0.5)


@requires_loop
def test_a_capture_is_a_stored_run_that_show_and_selectors_see(tmp_path: Path) -> None:
    """dd's 64 reads of 64k, while another dd writes elsewhere: stored, listed, selected by tag, its
    trace read back whole; its fitted job is one fio accepts. (The same capture's tables, CSV,
    Markdown and report: tests/cli/test_capture.py.)"""
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=32 * MiB) as loop:
        other = subprocess.Popen(["dd", "if=/dev/zero", f"of={tmp_path / 'noise'}", "bs=1M", "count=8",
                                  "oflag=direct"])  # I/O elsewhere on the machine is not recorded
        done = iolab("capture", loop.path, "--label", "dd-read", "--tag", "app=dd", "--",
                     "dd", f"if={loop.path}", "of=/dev/null", "bs=64k", "count=64", "iflag=direct", db=db)
        other.wait()
    assert done.returncode == 0, done.stderr
    assert "fingerprint of" in done.stdout and "read 64 (4.00 MiB)" in done.stdout
    listed = iolab("runs", "--format", "json", db=db)
    assert json.loads(listed.stdout)["runs"][0]["origin"] == "capture"
    shown = json.loads(iolab("show", "app=dd", "--format", "json", db=db).stdout)
    fp = shown["fingerprint"]
    assert fp["ios"] == {"read": 64} and fp["bs_counts"] == {"read": {"65536": 64}}
    assert fp["sequential_pct"] == pytest.approx(100 * 63 / 64)
    job = tmp_path / "fitted.fio"
    fitted = iolab("fit", "dd-read", "-o", str(job), db=db)
    assert fitted.returncode == 0, fitted.stderr
    options = dict(line.split("=", 1) for line in job.read_text().splitlines() if "=" in line)
    assert options["rw"] == "read" and options["bssplit"] == "64k/100" and options["size"] == str(64 * 65536)
    env = {k: v for k, v in os.environ.items() if k != "TARGET"}
    checked = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True, check=False,
                             env={**env, "TARGET": str(tmp_path / "target")})
    assert checked.returncode == 0, checked.stderr  # a normal job file fio accepts, given its target
    unset = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True, check=False, env=env)
    assert unset.returncode != 0 and "filename=${TARGET}" in unset.stderr  # and refuses without one
    store = Store(str(db))
    run = store.get_run(store.resolve("dd-read")[0])
    trace = record.load_trace(store, run)
    assert len(trace) == 64 and fp_mod.fingerprint(trace) == record.stored_fingerprint(run)


def test_a_random_fit_of_several_sizes_issues_exactly_its_sizes(tmp_path: Path) -> None:
    """A random write trace of 4k, 8k, 24k and 36k requests over 16 MiB, fitted, run by fio until it has
    covered the range twice: every request fio logs is one of the four sizes. fio's random map would cut
    requests short where their blocks were done already (``io_u.c``, ``mark_random_map``), so the fit
    turns it off; with the map, the same job logs other sizes."""
    rng = np.random.default_rng(3)
    sizes = rng.choice([4096, 8192, 24576, 36864], 4000, p=[0.3, 0.2, 0.2, 0.3])
    rows = [(i * 50_000, i * 50_000 + 40_000, int(rng.integers(0, 4000)) * 8, int(size), WRITE, 0, 1)
            for i, size in enumerate(sizes)]
    job = fit.fit_job(fp_mod.fingerprint(trace_mod.from_rows(rows)))
    options = dict(job.options)
    assert options["rw"] == "randwrite" and "norandommap" in options

    def logged(drop: tuple[str, ...]) -> set[int]:
        log = tmp_path / f"{len(drop)}.log"
        args = [f"--{k}" if v is None else f"--{k}={v}" for k, v in job.options
                if k not in ("time_based", "runtime", "rate", "rate_iops", "offset", "ioengine", *drop)]
        subprocess.run(["fio", "--name=fit", f"--filename={tmp_path / 'f.bin'}", "--ioengine=psync", "--direct=0",
                        *[a for a in args if not a.startswith("--direct")], f"--io_size={32 * MiB}",
                        f"--write_iolog={log}", "--output=/dev/null"], check=True)
        fields = [line.split() for line in log.read_text().splitlines()]  # iolog v3: time file action offset len
        return {int(f[4]) for f in fields if len(f) == 5 and f[2] == "write"}

    assert logged(()) == {4096, 8192, 24576, 36864}
    assert logged(("norandommap",)) - {4096, 8192, 24576, 36864}  # the map cuts some short


@requires_loop
def test_a_background_capture_records_every_request_of_a_small_workload(tmp_path: Path) -> None:
    """Few events (far below the buffer's half): the final drain must still read them all."""
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        with record.Background(loop.path) as background:
            wait_for(lambda: tracing.recording(os.getpid()), timeout_s=30)
            subprocess.run(["dd", f"if={loop.path}", "of=/dev/null", "bs=64k", "count=50", "iflag=direct"],
                           check=True, capture_output=True)
        captured = background.result()
        trace = captured.trace.load()
        captured.close()
    assert len(trace) == 50 and set(trace.nbytes.tolist()) == {65536}


@requires_loop
def test_a_partition_is_captured_alone_with_offsets_from_its_own_start(tmp_path: Path) -> None:
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        part = loop.partition(first_sector=2048, sectors=8192)
        with record.Background(part) as background:
            wait_for(lambda: tracing.recording(os.getpid()), timeout_s=30)
            for device, skip in ((part, 16), (loop.path, 100)):  # the disk outside the partition: not recorded
                subprocess.run(["dd", f"if={device}", "of=/dev/null", "bs=4k", "count=8", f"skip={skip}",
                                "iflag=direct"], check=True, capture_output=True)
        captured = background.result()
        trace = captured.trace.load()
        captured.close()
    assert len(trace) == 8 and trace.sector.tolist() == [16 * 8 + 8 * i for i in range(8)]


@requires_loop
def test_a_capture_at_the_devices_full_rate_reads_binary_pages_and_keeps_every_request(tmp_path: Path) -> None:
    """fio's 4k random reads at QD8 through io_uring as fast as a loop device over tmpfs goes (tens
    to hundreds of thousands a second, beside whatever else runs): the capture reads the binary
    ring-buffer pages (its ``how`` says so), loses no event, and holds every request fio counted,
    each a 4 KiB read."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm, loop_device(Path(shm), size_bytes=64 * MiB) as loop:
        out = tmp_path / "full.json"
        captured = record.capture(loop.path, command=[
            "fio", "--name=full", f"--filename={loop.path}", "--rw=randread", "--bs=4k", "--direct=1",
            "--ioengine=io_uring", "--iodepth=8", "--size=48M", "--runtime=4", "--time_based", "--randrepeat=0",
            "--output-format=json", f"--output={out}"])
    trace = captured.trace.load()
    captured.close()
    counted = json.loads(out.read_text())["jobs"][0]["read"]["total_ios"]
    assert captured.how.endswith(tracefs.BINARY)
    assert trace.lost_events == 0
    assert counted > 20_000 and len(trace) == counted
    assert set(trace.nbytes.tolist()) == {4096} and (trace.complete_ns >= 0).all()
    assert not tracing.instances(os.getpid())


@requires_loop
def test_captures_begun_and_ended_while_fio_runs_pair_every_request(tmp_path: Path) -> None:
    """fio's 4k random reads at iodepth 16 × 2 jobs (io_uring, a loop device doing direct I/O on tmpfs)
    already running when each of three 1 s captures begins, and still when it ends: every request
    recorded has its own completion. Requests in flight at either edge have their completion or their
    issue outside the window; none is paired with another request's completion (the depth is never
    above fio's 32), and the only requests without a completion are those issued as the window closed.
    Before the completions were enabled first, the issues of the moment between the two switches had
    none, each took a later request's completion on its sector, and that one the next's, to the end:
    a depth of 33-223 and service times of hundreds of ms, in most captures (1 s of fio first)."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm, \
            loop_device(Path(shm), size_bytes=64 * MiB, direct_io=True) as loop:
        fio = subprocess.Popen(["fio", "--name=busy", f"--filename={loop.path}", "--rw=randread", "--bs=4k",
                                "--direct=1", "--ioengine=io_uring", "--iodepth=16", "--numjobs=2", "--size=48M",
                                "--time_based", "--runtime=60", "--randrepeat=0", "--output=/dev/null"])
        try:
            reads = Path(f"/sys/block/{loop.name}/stat")
            wait_for(lambda: int(reads.read_text().split()[0]) > 0, timeout_s=30)
            time.sleep(1)  # fio at its pace
            captures = [record.capture(loop.path, duration_s=1) for _ in range(3)]
        finally:
            fio.terminate()
            fio.wait(timeout=30)
    for captured in captures:
        trace = captured.trace.load()
        captured.close()
        fp = fp_mod.fingerprint(trace)
        assert len(trace) > 5_000 and trace.lost_events == 0
        assert fp.depth_max <= 32, fp.depth_max
        open_at = trace.issue_ns[trace.complete_ns < 0]
        assert (open_at >= int(trace.issue_ns.max()) - 50_000_000).all(), np.sort(open_at)[:10] / 1e9


@requires_loop
def test_a_format_the_binary_reader_refuses_falls_back_to_the_text(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """When the ring buffer's format is not one ``ringbuf`` understands, the capture reads
    ``trace_pipe`` text as before, says so and why in its ``how``, and still keeps every request."""
    def refuse(events: Path) -> ringfmt.Layout:
        raise ringfmt.CaptureError("the block_rq_issue event has no field 'sector' (test)")
    monkeypatch.setattr(ringfmt.Layout, "read", staticmethod(refuse))
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        captured = record.capture(loop.path, command=["dd", f"if={loop.path}", "of=/dev/null", "bs=4k", "count=300",
                                                      "iflag=direct"])
    assert "read as trace_pipe text (the binary pages could not be read: the block_rq_issue event has no field " \
           "'sector' (test))" in captured.how
    captured.close()
    assert len(captured.trace) == 300 and captured.trace.lost_events == 0


@requires_loop
def test_events_the_ring_buffer_overwrote_are_counted_through_the_binary_pages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ring buffer of a few pages a CPU, drained only after the command: the kernel overwrites
    most of 3,000 reads' events; the capture counts them (``per_cpu/cpuN/stats`` and the pages'
    missed-events flags) and warns, and keeps what is left."""
    monkeypatch.setattr(tracefs, "_buffer_kb", lambda: 16)
    monkeypatch.setattr(tracefs, "DRAIN_S", 30.0)
    with loop_device(tmp_path, size_bytes=16 * MiB) as loop:
        captured = record.capture(loop.path, command=["dd", f"if={loop.path}", "of=/dev/null", "bs=4k",
                                                      "count=3000", "iflag=direct"])
    captured.close()
    assert captured.how.endswith(tracefs.BINARY)
    assert captured.trace.lost_events > 3000 and len(captured.trace) < 3000
    assert any("dropped" in warning for warning in captured.warnings)
