"""Issue 41's replays, in-process: a replay says whether it kept the recorded pace and what held it,
and a comparison of one that fell behind says so in its verdicts; a capture's flushes are compared
with its replay's syncs, shown and charted; a fitted job names its target ``${TARGET}``, iolab still
runs it, and ``fit --check`` sets its fit error beside the device difference.

The captures are built without tracefs (a real SQLite trace recorded once, ``tests/data/captures``,
and traces written here), fio is replayed from recordings of real fio on a file standing in for the
block device (``captures.block_stand_in``), and ``fit --check``'s captures of the check device are
handed in (``record.Background``). The same on real devices: tests/integration/test_capture_replay.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import captures
from captures import DB, block_stand_in, capture_of, in_lab, stored
from inprocess import iolab
from iolab.workflows.capture import record
from iolab.workflows.capture.trace import WRITE, Trace, from_rows


def _flat(text: str) -> str:
    """``text`` with its line wrapping undone (the console wraps long lines)."""
    return " ".join(text.split())


def _sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str = "fast.img") -> tuple[Path, Path]:
    """The lab, with the real SQLite capture stored as ``sqlite`` and a stand-in for a device of its size."""
    lab = in_lab(tmp_path, monkeypatch)
    trace, made = captures.committed("sqlite-ext4")
    stored(DB, capture_of(trace, path=made["device"], size_bytes=made["device_bytes"]), label="sqlite")
    return lab, block_stand_in(monkeypatch, lab / name, made["device_bytes"])


def test_a_replay_that_fell_behind_says_so_and_its_comparison_does_not_say_a_bare_worse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """400 4k writes 5 µs apart (2 µs each, one lane): 2 ms recorded, which fio at iodepth 1 cannot keep
    on any device. The replay says so per class (the console, the run's pace table and JSON), with
    its limit; ``compare CAPTURE REPLAY`` marks every verdict of that class ``replay behind pace`` and
    says by how much and why, where it said "IOPS -58.7 % worse (untested)" alone."""
    lab = in_lab(tmp_path, monkeypatch)
    trace = from_rows([(i * 5_000, i * 5_000 + 2_000, 8 * i, 4096, WRITE, 0, 7) for i in range(400)],
                      comms={7: "app"})
    stored(DB, capture_of(trace), label="burst")
    target = block_stand_in(monkeypatch, lab / "slow.img")
    done = iolab("replay", "burst", "--target", f"t={target}", "--destroy", str(target), "--label", "behind",
                 "--format", "json", db=DB)
    assert done.returncode == 0, done.stderr
    assert "The replay fell behind the recorded pace: bs-4k ×" in _flat(done.stderr)
    document = json.loads(done.stdout)
    (paced,) = document["pace"]
    assert paced["job"] == "bs-4k" and paced["recorded_ms"] == pytest.approx(0.4 * 5 - 0.005 + 0.002, abs=0.01)
    assert paced["behind"] and paced["replayed_ms"] > 2 * paced["recorded_ms"]
    assert paced["limit"]["by"] in ("target", "replayer", "unknown") and paced["limit"]["why"]
    shown = _flat(iolab("show", "behind", db=DB).stdout)
    assert "did the replay keep the recorded pace?" in shown and f"behind ×{paced['ratio']:.2f}" in shown

    compared = iolab("compare", "burst", "behind", "--format", "json", db=DB)
    assert compared.returncode == 0, compared.stderr
    (pair,) = json.loads(compared.stdout)["comparisons"][0]["pairs"]
    assert pair["behind"] == [{"side": "b", "job": "bs-4k", "recorded_ms": paced["recorded_ms"],
                               "replayed_ms": paced["replayed_ms"], "ratio": paced["ratio"],
                               "limit": paced["limit"]}]
    iops = next(m for m in pair["metrics"] if m["metric"] == "iops")
    assert iops["verdict"] == "worse (untested; replay behind pace)" and iops["caveat"] == "replay behind pace"
    text = _flat(iolab("compare", "burst", "behind", db=DB).stdout)
    assert "worse (untested; replay behind pace)" in text
    assert f"replay behind pace: behind's bs-4k took {paced['replayed_ms']:,.0f} ms against" in text
    assert f"limit: {paced['limit']['by']}" in text


def test_a_captures_flushes_compare_with_its_replays_syncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's fsyncs reached the device as flushes; the capture holds them as the sync direction of the
    class its replay syncs in, so ``compare`` sets their rate and latency beside the replay's fio sync
    results (they had no row on the capture's side: "missing … nothing on the other side"); ``show``
    gives both a rate, and the capture's report charts its flushes over time."""
    lab, target = _sqlite(tmp_path, monkeypatch)
    fp = json.loads(iolab("show", "sqlite", "--format", "json", db=DB).stdout)["fingerprint"]
    flushes = fp["ios"]["flush"]
    plain = iolab("replay", "sqlite", "--target", f"fast={target}", "--destroy", str(target), "--label", "plain",
                  "--format", "json", db=DB)  # at its recorded times: the capture's own job options
    assert plain.returncode == 0, plain.stderr
    fast = iolab("replay", "sqlite", "--target", f"fast={target}", "--destroy", str(target), "--as-fast-as-possible",
                 "--format", "json", db=DB)
    assert fast.returncode == 0 and "pace" not in json.loads(fast.stdout)  # as fast as possible: no pace to keep

    doc = json.loads(iolab("compare", "sqlite", "plain", "--format", "json", db=DB).stdout)
    (sync,) = [p for p in doc["comparisons"][0]["pairs"] if p["direction"] == "sync"]
    assert sync["a"] is not None and sync["b"] is not None and sync["comparable"]
    figures = {m["metric"]: m for m in sync["metrics"]}
    assert figures["iops"]["a"]["mean"] == pytest.approx(flushes / fp["active_s"], rel=0.01)
    assert figures["iops"]["b"]["mean"] > 0 and figures["clat_p99"]["b"]["mean"] > 0
    assert figures["clat_mean"]["a"]["mean"] == pytest.approx(fp["latency_us"]["flush"]["mean"] * 1000)
    assert all(m["verdict"] != "missing" for m in sync["metrics"])
    text = iolab("compare", "sqlite", "plain", db=DB).stdout
    assert "syncs/s" in text and "nothing on the other side" not in text

    shown = json.loads(iolab("show", "sqlite", "--format", "json", db=DB).stdout)
    (row,) = [r for r in shown["summary"] if r["direction"] == "sync"]
    assert row["iops"]["mean"] == pytest.approx(flushes / fp["active_s"], rel=0.01)
    assert row["clat_mean_ns"]["mean"] == pytest.approx(fp["latency_us"]["flush"]["mean"] * 1000)
    replayed = json.loads(iolab("show", "plain", "--format", "json", db=DB).stdout)
    assert [r["iops"]["mean"] > 0 for r in replayed["summary"] if r["direction"] == "sync"] == [True]

    page = lab / "sqlite.html"
    assert iolab("report", "sqlite", "-o", str(page), db=DB).returncode == 0
    assert "flushes over time" in page.read_text()


def test_a_fitted_job_names_its_target_and_iolab_still_runs_it(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The fitted job's target is ``filename=${TARGET}`` with a comment saying how to set it (plain fio
    without it refuses: tests/integration/test_capture_replay.py); ``iolab run`` puts its target there."""
    lab, target = _sqlite(tmp_path, monkeypatch, "scratch.img")
    job = lab / "sqlite.fio"
    assert iolab("fit", "sqlite", "-o", str(job), db=DB).returncode == 0
    lines = job.read_text().splitlines()
    assert lines[lines.index("[global]") + 1] == "filename=${TARGET}"
    assert ";   TARGET=/dev/sdX fio sqlite.fio" in lines
    assert ";   iolab run sqlite.fio --target NAME=/dev/sdX --destroy /dev/sdX" in lines
    done = iolab("run", str(job), "--target", f"scratch={target}", "--destroy", str(target), "--format", "json",
                 db=DB)
    assert done.returncode == 0, done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["status"] == "ok" and f"filename={target}" in result["job_text"]
    assert "${TARGET}" not in result["job_text"]


class _Captured:
    """Stands in for ``record.Background`` in ``fit --check``: hands out the given traces in turn, as
    if the kernel had recorded them on the check device (the replay's first, then the fitted job's)."""

    traces: Iterator[Trace]

    def __init__(self, device: str) -> None:
        self.device = device

    def __enter__(self) -> _Captured:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def result(self) -> record.Capture:
        return record.Capture(trace=next(self.traces), device=captures.device(self.device),
                              started_at=datetime.now(UTC), how=f"{record.HOW} (a test's trace)")


def _slower(trace: Trace, factor: int) -> Trace:
    """``trace`` with every service time ``factor`` times as long."""
    done = trace.complete_ns
    slower = done.copy()
    slower[done >= 0] = trace.issue_ns[done >= 0] + factor * (done - trace.issue_ns)[done >= 0]
    return from_rows(zip(trace.issue_ns.tolist(), slower.tolist(), trace.sector.tolist(), trace.nbytes.tolist(),
                         trace.op.tolist(), trace.flags.tolist(), trace.pid.tolist(), strict=True),
                     comms=trace.comms)


def test_fit_check_sets_the_fit_error_beside_the_device_difference(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``fit --check`` replays the capture on the check device and runs the fitted job there, each
    captured: here the check device serves everything 3× slower than the traced one (the replay's
    capture) and the fitted job's capture is the replay's: its fit error is 0 and the device difference
    +200 % (fit --check had one column, fitted against the original: +200 %, the device's, as the fit's)."""
    lab, target = _sqlite(tmp_path, monkeypatch, "check.img")
    trace, _ = captures.committed("sqlite-ext4")
    slow = _slower(trace, 3)
    monkeypatch.setattr(_Captured, "traces", iter([slow, slow]), raising=False)
    monkeypatch.setattr(record, "Background", _Captured)
    job = lab / "sqlite.fio"
    done = iolab("fit", "sqlite", "-o", str(job), "--check", f"chk={target}", "--destroy", str(target), "--format",
                 "json", db=DB)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    rows = {r["metric"]: r for r in document["closeness"]}
    p99 = rows["service time write p99"]
    assert p99["replayed"] == pytest.approx(p99["fitted"]) and p99["error"] == pytest.approx(0.0)
    assert p99["device_difference"] == pytest.approx(2 * p99["original"], rel=0.05)
    flush = rows["service time flush p99"]
    assert flush["error"] == pytest.approx(0.0) and flush["device_difference"] > 0
    assert document["replay_run"] and document["replay_capture"] and document["fitted_capture"]
    replay = json.loads(iolab("show", str(document["replay_run"]), "--format", "json", db=DB).stdout)
    assert replay["run"]["tags"] == {"capture": "1", "fit_of": "1"} and replay["run"]["label"] == "fit-of-1-replay"
    text = _flat(iolab("fit", "sqlite", "-o", str(job), db=DB).stdout)  # the job alone, no check: no columns
    assert "device difference" not in text
