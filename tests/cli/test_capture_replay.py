"""`iolab replay` (and `fit --process`) of stored captures, in-process: the replay plan (classes,
lanes, windows, timing, caveats), the guard's ``--destroy``, and the replay stored as a run, with fio
replayed from recordings of real fio replaying the same iologs onto a file standing in for the block
device (``captures.block_stand_in``).

The captures are built without tracefs: a real SQLite trace recorded once (``tests/data/captures``)
and small traces written here. Capturing for real, and replays whose point is fio's timing on a
device, are in ``tests/integration/test_capture_replay.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import captures
from captures import DB, block_stand_in, capture_of, captured_by_the_kernel, data_ios, in_lab, rows, stored
from inprocess import iolab
from iolab.workflows.capture.trace import FLUSH, PREFLUSH, READ, SYNC, WRITE, ZEROES, from_rows


def _flat(text: str) -> str:
    """``text`` with its line wrapping undone (the console wraps long lines)."""
    return " ".join(text.split())


def test_a_real_sqlite_trace_is_replayed_request_for_request_and_only_with_destroy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's 60 commits on ext4 (fsync each: flushes), captured for real once: every read and write
    is replayed, as fast as possible; without --destroy the guard refuses the target."""
    lab = in_lab(tmp_path, monkeypatch)
    trace, made = captures.committed("sqlite-ext4")
    stored(DB, capture_of(trace, path=made["device"], size_bytes=made["device_bytes"]), label="sqlite")
    fp = json.loads(iolab("show", "sqlite", "--format", "json", db=DB).stdout)["fingerprint"]
    assert fp["ios"]["write"] >= 60 and fp["ios"]["flush"] >= 60  # a write and an fsync per commit at least
    assert fp["latency_us"]["flush"]["count"] == fp["ios"]["flush"]
    assert "jbd2" in " ".join(fp["processes"])
    traced = fp["ios"].get("read", 0) + fp["ios"]["write"]
    target = block_stand_in(monkeypatch, lab / "fast.img", made["device_bytes"])
    # the guard checks the target of a replay (on a real block device: tests/integration/test_capture_replay.py)
    refused = iolab("replay", "sqlite", "--target", f"fast={target}", db=DB)
    assert refused.returncode != 0 and "--destroy" in refused.stderr + refused.stdout

    plain = iolab("replay", "sqlite", "--target", f"fast={target}", "--destroy", str(target), "--as-fast-as-possible",
                  "--label", "plain", "--format", "json", db=DB)
    assert plain.returncode == 0, plain.stderr
    assert "replay of capture" in plain.stderr and "as fast as possible" in plain.stderr
    document = json.loads(plain.stdout)
    assert data_ios(document) == traced
    assert document["run"]["label"] == "plain" and document["run"]["tags"] == {"capture": "1"}
    assert document["run"]["status"] == "complete"
    caveats = ("left out", "write-zeroes", "replay_scale")  # none: every request, where it was traced
    assert not any(c in w for w in document["run"]["warnings"] for c in caveats)
    listed = {r["label"]: r for r in json.loads(iolab("runs", "--format", "json", db=DB).stdout)["runs"]}
    assert listed["sqlite"]["origin"] == "capture" and listed["plain"]["origin"] != "capture"


def test_write_zeroes_are_replayed_as_writes_and_the_replay_says_so(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """ext4's lazy inode-table init as the kernel traces it (write-zeroes of 1 MiB, rwbs ``NS``, among
    the journal's writes and a flush): captured as writes, shown apart, replayed as writes of their
    size, and the replay says so, on the console and in the stored run."""
    lab = in_lab(tmp_path, monkeypatch)
    trace = from_rows([(i * 1_000_000, i * 1_000_000 + 50_000, 8 * i, 4096, WRITE, SYNC, 30) for i in range(10)]
                      + [(20_000_000 + i * 5_000_000, 24_000_000 + i * 5_000_000, 16_384 + 2048 * i, 1 << 20, WRITE,
                          ZEROES | SYNC, 40) for i in range(4)]
                      + [(45_000_000, 46_000_000, 0, 0, FLUSH, PREFLUSH, 30)],
                      comms={30: "jbd2/loop3-8", 40: "ext4lazyinit"})
    calls = captured_by_the_kernel(monkeypatch, capture_of(trace, path="/dev/loop3", command=("sh", "-c", "mount")))
    done = iolab("capture", "/dev/loop3", "--label", "lazy", "--format", "json", "--", "sh", "-c", "mount", db=DB)
    assert done.returncode == 0, done.stderr
    assert calls == [("/dev/loop3", None, ("sh", "-c", "mount"))]
    fp = json.loads(done.stdout)["fingerprint"]
    assert fp["zeroes_ios"] == 4 and fp["zeroes_bytes"] == 4 << 20
    assert "other" not in fp["ios"] and fp["bytes"]["write"] == (4 << 20) + 10 * 4096
    target = block_stand_in(monkeypatch, lab / "target.img")

    replayed = iolab("replay", "lazy", "--target", f"t={target}", "--destroy", str(target), "--as-fast-as-possible",
                     "--format", "json", db=DB)
    assert replayed.returncode == 0, replayed.stderr
    assert f"{fp['zeroes_ios']:,} write-zeroes request(s)" in _flat(replayed.stderr)
    assert "replayed as writes" in _flat(replayed.stderr)
    document = json.loads(replayed.stdout)
    assert any("replayed as writes" in w for w in document["run"]["warnings"])  # stored with the replay
    written = sum(d["io_bytes"] for job in document["results"][0]["jobs"] for name, d in job["directions"].items()
                  if name == "write")
    assert written == fp["bytes"]["write"]


def _fit_options(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";"))


def test_fit_and_replay_of_one_process_leave_the_others_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dd reading 200 × 64k beside an application's small writes, each followed by a flush, and the
    journal thread's writes: the fit and the replay of the application keep its requests and the
    kernel threads', and say what they left out."""
    lab = in_lab(tmp_path, monkeypatch)
    app = rows((200, 0, 128, 65536, READ, 10), (5, 60_000, 8, 4096, READ, 20), (100, 40_000, 8, 4096, WRITE, 20),
               (50, 90_000, 8, 4096, WRITE, 30))
    app += [(t + 200_000, t + 300_000, 0, 0, FLUSH, PREFLUSH, 20) for t, *_ in app[205:305]]  # an fsync per write
    trace = from_rows(app, comms={10: "dd", 20: "python3", 30: "jbd2/loop4p1-8"})
    stored(DB, capture_of(trace, path="/dev/loop4p1"), label="mixed")
    whole = json.loads(iolab("show", "mixed", "--format", "json", db=DB).stdout)["fingerprint"]
    assert whole["processes"]["dd"] == 200 and whole["ios"]["read"] == 205
    job = lab / "app.fio"

    fitted = iolab("fit", "mixed", "--process", "python3", "-o", str(job), db=DB)
    assert fitted.returncode == 0, fitted.stderr
    text = job.read_text()
    options = _fit_options(text)
    assert int(options.get("rwmixread", 0)) <= 5 and "fsync" in options  # dd's reads (most by bytes) are not the app's
    assert "processes python3" in text and "left out: dd 200" in text
    unknown = iolab("fit", "mixed", "--process", "nosuch", "-o", str(job), db=DB)
    assert unknown.returncode == 2 and "has no task 'nosuch'" in unknown.stderr and "python3" in unknown.stderr

    target = block_stand_in(monkeypatch, lab / "target.img")
    replayed = iolab("replay", "mixed", "--process", "python3", "--target", f"t={target}", "--destroy", str(target),
                     "--as-fast-as-possible", "--format", "json", db=DB)
    assert replayed.returncode == 0, replayed.stderr
    assert "left out (dd 200" in _flat(replayed.stderr)
    document = json.loads(replayed.stdout)
    reads = sum(d["total_ios"] for j in document["results"][0]["jobs"] for name, d in j["directions"].items()
                if name == "read")
    assert reads == whole["ios"]["read"] - 200
    assert data_ios(document) == 5 + 100 + 50  # the application's and the journal's


def test_a_timed_replay_runs_in_windows_and_time_scale_stretches_it(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Half a second of 4k reads and writes: replayed at its own times in lanes of windows of 0.25 s,
    then stretched ×2 (fio's replay_time_scale is a rate: 50); both replay every request."""
    lab = in_lab(tmp_path, monkeypatch)
    trace = from_rows([(i * 1_000_000, i * 1_000_000 + 80_000, (i * 7919 % 8192) * 8, 4096, WRITE if i % 3 == 0
                        else READ, 0, 50) for i in range(500)], comms={50: "fio"})
    stored(DB, capture_of(trace), label="orig")
    target = block_stand_in(monkeypatch, lab / "same.img")

    replayed = iolab("replay", "orig", "--target", f"same={target}", "--destroy", str(target), "--format", "json",
                     db=DB)
    assert replayed.returncode == 0, replayed.stderr
    assert "fio job(s) at iodepth=1 (lanes of windows of 0.25 s), original timing" in _flat(replayed.stderr)
    slower = iolab("replay", "orig", "--target", f"same={target}", "--destroy", str(target), "--time-scale", "2",
                   "--format", "json", db=DB)
    assert slower.returncode == 0, slower.stderr
    assert "timing stretched ×2" in _flat(slower.stderr) and "replay_time_scale=50" in _flat(slower.stderr)
    for done in (replayed, slower):
        document = json.loads(done.stdout)
        assert data_ios(document) == 500
        (job,) = document["results"][0]["jobs"]  # one class (bs-4k), its jobs one reporting group
        assert job["directions"]["read"]["total_ios"] == 333 and job["directions"]["write"]["total_ios"] == 167
