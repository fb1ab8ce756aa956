"""`iolab capture`, `show`, `fit` and `report` of captures, in-process, on captures built without
tracefs (``captures``): what the capture command says and stores when the application succeeds,
fails, is interrupted or does no I/O, and how a stored capture is shown, fitted and reported.

Capturing for real (tracefs, loop devices, signals to a real ``iolab capture``) is in
tests/integration/test_capture.py and test_capture_apps.py, which assert the same of real captures
where it is about the capture itself."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from captures import DB, block_stand_in, capture_of, captured_by_the_kernel, committed, in_lab, rows, stored
from inprocess import iolab
from iolab.store.database import Store
from iolab.workflows.capture import fingerprint as fp_mod
from iolab.workflows.capture import record, stream
from iolab.workflows.capture.trace import READ, WRITE, from_rows

DD_READS = rows((64, 0, 128, 65536, READ, 100))  # dd if=DEVICE bs=64k count=64 iflag=direct


def _fit_options(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";"))


def _runs(db: str | Path) -> dict[str, dict]:
    return {r["label"]: r for r in json.loads(iolab("runs", "--format", "json", db=db).stdout)["runs"]}


def test_a_capture_is_a_stored_run_that_show_fit_and_report_see(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "iolab.db"
    command = ("dd", "if=/dev/loop5", "of=/dev/null", "bs=64k", "count=64", "iflag=direct")
    calls = captured_by_the_kernel(monkeypatch, capture_of(from_rows(DD_READS, comms={100: "dd"}), path="/dev/loop5",
                                                           command=command, returncode=0))
    done = iolab("capture", "/dev/loop5", "--label", "dd-read", "--tag", "app=dd", "--", *command, db=db)
    assert done.returncode == 0, done.stderr
    assert calls == [("/dev/loop5", None, command)]
    assert "Capturing the block I/O of /dev/loop5 while `dd if=/dev/loop5" in done.stderr
    assert "Capture 1 stored in" in done.stderr and "64 requests (complete)" in done.stderr
    assert "fingerprint of" in done.stdout and "read 64 (4.00 MiB)" in done.stdout
    assert _runs(db)["dd-read"]["origin"] == "capture"
    shown = json.loads(iolab("show", "app=dd", "--format", "json", db=db).stdout)
    fp = shown["fingerprint"]
    assert fp["ios"] == {"read": 64} and fp["bs_counts"] == {"read": {"65536": 64}}
    assert fp["sequential_pct"] == pytest.approx(100 * 63 / 64)
    assert fp["processes"] == {"dd": 64}
    assert "bs-64k" in iolab("show", "dd-read", db=db).stdout  # the capture's results, per size class
    csv = iolab("show", "dd-read", "--format", "csv", db=db)
    assert csv.stdout.startswith("target,workload,job,") and "skew: hottest 1%" in csv.stderr  # the fingerprint
    markdown = iolab("show", "dd-read", "--format", "markdown", db=db).stdout
    assert "| random |" in markdown
    job = tmp_path / "fitted.fio"
    fitted = iolab("fit", "dd-read", "-o", str(job), db=db)
    assert fitted.returncode == 0, fitted.stderr
    options = _fit_options(job.read_text())
    assert options["rw"] == "read" and options["bssplit"] == "64k/100" and options["size"] == str(64 * 65536)
    assert fitted.stdout == job.read_text()  # printed as written
    html = tmp_path / "capture.html"
    reported = iolab("report", "dd-read", "-o", str(html), db=db)
    assert reported.returncode == 0, reported.stderr
    page = html.read_text()
    for title in ("block sizes", "LBA heat over time", "depth over time"):
        assert f"run 1: {title}" in page
    store = Store(str(db))
    run = store.get_run(store.resolve("dd-read")[0])
    trace = record.load_trace(store, run)
    assert len(trace) == 64 and fp_mod.fingerprint(trace) == record.stored_fingerprint(run)
    assert trace.comms == {100: "dd"}


def test_a_failing_command_is_stored_failed_with_its_status_and_still_replays(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The command exited 3 after its 64 reads: exit 1, the capture stored whole with status failed,
    its exit status and a warning; a failed run of an application is a workload too: it replays. A
    command that did no I/O at all is stored failed without the offer to show or replay it."""
    lab = in_lab(tmp_path, monkeypatch)
    script = ("sh", "-c", "dd if=/dev/loop6 of=/dev/null bs=64k count=64 iflag=direct status=none; exit 3")
    captured_by_the_kernel(monkeypatch, capture_of(from_rows(DD_READS, comms={100: "dd"}), path="/dev/loop6",
                                                   command=script, returncode=3))
    done = iolab("capture", "/dev/loop6", "--label", "fails", "--format", "json", "--", *script, db=DB)
    assert done.returncode == 1
    assert "sh exited with status 3" in done.stderr and "stored as failed" in done.stderr
    assert "(its trace can be shown, replayed and fitted)" in " ".join(done.stderr.split())
    assert json.loads(done.stdout)["fingerprint"]["ios"] == {"read": 64}  # the trace is kept whole
    assert _runs(DB)["fails"]["status"] == "failed"
    shown = json.loads(iolab("show", "fails", "--format", "json", db=DB).stdout)
    assert shown["run"]["options"]["returncode"] == 3
    assert any("exited with status 3" in w for w in shown["run"]["warnings"])
    target = block_stand_in(monkeypatch, lab / "target.img")
    replayed = iolab("replay", "fails", "--target", f"t={target}", "--destroy", str(target), db=DB)
    assert replayed.returncode == 0, replayed.stderr

    captured_by_the_kernel(monkeypatch, capture_of(from_rows([], duration_ns=4_000_000), path="/dev/loop6",
                                                   command=("false",), returncode=1))
    quick = iolab("capture", "/dev/loop6", "--label", "false", "--format", "json", "--", "false", db=DB)
    assert quick.returncode == 1
    assert "stored as failed." in quick.stderr and "can be shown, replayed" not in quick.stderr  # no request
    assert json.loads(quick.stdout)["fingerprint"]["duration_s"] == pytest.approx(0.004)  # the command's own time
    assert _runs(DB)["false"]["status"] == "failed"


@pytest.mark.parametrize("mode", ["duration", "command"])
def test_an_interrupted_capture_stores_what_it_captured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        mode: str) -> None:
    """Ctrl-C ended the capture (``record.capture`` returns what it had, ``interrupted``): exit 130,
    said so, stored with status interrupted and a warning, not as a failure of the command (which
    iolab ended)."""
    db = tmp_path / "iolab.db"
    if mode == "duration":
        args: tuple[str, ...] = ("--duration", "60s")
        trace = from_rows(DD_READS, comms={100: "dd"}, duration_ns=3_000_000_000)
        capture = capture_of(trace, interrupted="SIGINT")
    else:
        args = ("--", "python3", "app.py")
        trace = from_rows(rows((30, 0, 8, 4096, WRITE, 7)), comms={7: "python3"}, duration_ns=2_000_000_000)
        capture = capture_of(trace, command=("python3", "app.py"), returncode=-2, interrupted="SIGINT")
    calls = captured_by_the_kernel(monkeypatch, capture)
    done = iolab("capture", "/dev/loop9", "--label", "cut", "--format", "json", *args, db=db)
    assert done.returncode == 130, done.stderr
    assert calls[0][1] == (60.0 if mode == "duration" else None)
    assert "Interrupted (SIGINT)" in done.stderr and "status interrupted" in done.stderr
    assert "exited with status" not in done.stderr
    fp = json.loads(done.stdout)["fingerprint"]
    assert fp["ios"] == ({"read": 64} if mode == "duration" else {"write": 30})
    assert _runs(db)["cut"]["status"] == "interrupted"
    shown = json.loads(iolab("show", "cut", "--format", "json", db=db).stdout)
    assert any("interrupted (SIGINT)" in w for w in shown["run"]["warnings"])
    assert not any("exited with status" in w for w in shown["run"]["warnings"])  # iolab ended it: not a failure


def test_an_idle_capture_says_so_and_fit_and_replay_refuse_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = in_lab(tmp_path, monkeypatch)
    job = lab / "idle.fio"
    calls = captured_by_the_kernel(monkeypatch, capture_of(from_rows([], duration_ns=1_000_200_000), path="/dev/loop7"))
    done = iolab("capture", "/dev/loop7", "--duration", "1s", "--label", "idle", db=DB)
    assert calls == [("/dev/loop7", 1.0, ())]
    assert done.returncode == 0, done.stderr
    assert "No read or write request reached" in done.stderr
    assert "inter-arrival             –   p50 – · p99 – · CV –" in done.stdout
    target = block_stand_in(monkeypatch, lab / "target.img")
    fitted = iolab("fit", "idle", "-o", str(job), db=DB)
    replayed = iolab("replay", "idle", "--target", f"t={target}", "--destroy", str(target), db=DB)
    for refused, verb in ((fitted, "fit"), (replayed, "replay")):
        assert refused.returncode == 2, refused.stderr
        assert "holds no read or write request (0 requests in 1." in refused.stderr
        assert f"nothing to {verb}" in refused.stderr and "Hint:" in refused.stderr
    assert not job.exists()
    fp = json.loads(iolab("show", "idle", "--format", "json", db=DB).stdout)["fingerprint"]
    assert fp["iops"] is None and fp["interarrival_cv"] is None and fp["interarrival_us"]["mean"] is None
    assert fp["lba_end_bytes"] is None and fp["flush_pct"] is None
    markdown = iolab("show", "idle", "--format", "markdown", db=DB).stdout
    assert "| inter-arrival | – | p50 – · p99 – · CV – |" in markdown


def test_a_sequential_write_touches_every_block_it_covers(tmp_path: Path) -> None:
    """64 writes of 64k one after another (dd of=DEVICE): 1,024 4 KiB blocks, each written once."""
    db = tmp_path / "iolab.db"
    stored(db, capture_of(from_rows(rows((64, 0, 128, 65536, WRITE, 100)), comms={100: "dd"})), label="seq")
    fp = json.loads(iolab("show", "seq", "--format", "json", db=db).stdout)["fingerprint"]
    assert fp["ios"] == {"write": 64} and fp["granules_touched"] == 1024 and fp["granules_by"] == "covered"
    assert fp["hot1_pct"] == pytest.approx(100 * 10 / 1024) and fp["hot10_pct"] == pytest.approx(100 * 102 / 1024)
    shown = iolab("show", "seq", db=db)
    assert "of 1024 4 KiB blocks touched (every block a request covers)" in shown.stdout


def test_a_capture_needs_a_duration_or_a_command(tmp_path: Path) -> None:
    """Neither or both, or a duration that is none: a usage error before anything is recorded."""
    db = tmp_path / "iolab.db"
    for args in ((), ("--duration", "1s", "--", "true")):
        refused = iolab("capture", "/dev/loop7", *args, db=db)
        assert refused.returncode == 2 and "not both or neither" in refused.stderr
    bad = iolab("capture", "/dev/loop7", "--duration", "soon", db=db)
    assert bad.returncode == 2 and "--duration 'soon'" in bad.stderr
    assert not db.exists() or _runs(db) == {}


def test_a_capture_spooled_to_disk_is_stored_as_the_same_capture_in_memory(tmp_path: Path) -> None:
    """SQLite's real trace (``tests/data/captures``) as its events fed to the parser, which leaves the
    requests in a spool (``stream.Spooled``, read a chunk at a time), stores the same run as the
    trace held in memory: fingerprint, fio-shaped report, replay job and the trace itself; and the
    spool is gone once stored."""
    trace, _ = committed("sqlite-ext4")
    parser = stream.Parser()
    parser.add(stream.events_of(trace))
    spooled = dataclasses.replace(parser.finish(trace.lost_events, trace.duration_ns), kthreads=trace.kthreads)
    db = tmp_path / "iolab.db"
    ids = [stored(db, capture_of(t)) for t in (trace, spooled)]
    assert not spooled.spool.exists()
    store = Store(str(db))
    from_memory, from_spool = (store.get_run(i) for i in ids)
    assert record.stored_fingerprint(from_spool) == record.stored_fingerprint(from_memory)
    assert from_spool.results[0].report == from_memory.results[0].report
    assert from_spool.results[0].job_text == from_memory.results[0].job_text.replace("-capture-1/", "-capture-2/")
    loaded = record.load_trace(store, from_spool)
    assert all(a.tolist() == b.tolist() for a, b in zip(loaded.columns(), trace.columns(), strict=True))
    assert loaded.comms == trace.comms and loaded.kthreads == trace.kthreads
