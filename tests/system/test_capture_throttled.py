"""A capture replayed with real fio on two loop devices, one capped by the blkio throttle (cgroup v1):
the capped replay keeps to the cap, the plain one is faster, and ``compare`` pairs the two replays.

The capture is a real SQLite trace recorded once (``tests/data/captures/sqlite-ext4``: 60 commits,
an fsync each), stored here without tracefs; capturing it for real and replaying it plainly is
tests/integration/test_capture_replay.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import captures
import cgroup
from captures import capture_of, data_ios, stored
from clirun import iolab
from loopdev import loop_device, requires_loop

CAP_IOPS = 150


@requires_loop
@pytest.mark.skipif(cgroup.unavailable_reason() is not None, reason=cgroup.unavailable_reason() or "")
def test_a_replay_under_a_blkio_cap_keeps_to_it_and_compare_pairs_it_with_a_plain_one(tmp_path: Path) -> None:
    db = tmp_path / "iolab.db"
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}  # the replays' iologs
    trace, made = captures.committed("sqlite-ext4")
    stored(db, capture_of(trace, path=made["device"], size_bytes=made["device_bytes"]), label="sqlite")
    fp = json.loads(iolab("show", "sqlite", "--format", "json", db=db).stdout)["fingerprint"]
    traced = fp["ios"].get("read", 0) + fp["ios"]["write"]
    with loop_device(tmp_path, size_bytes=made["device_bytes"], name="a.img") as fast, \
            loop_device(tmp_path, size_bytes=made["device_bytes"], name="b.img") as slow:
        plain = iolab("replay", "sqlite", "--target", f"fast={fast.path}", "--destroy", fast.path,
                      "--as-fast-as-possible", "--label", "plain", "--format", "json", db=db, env=cache)
        assert plain.returncode == 0, plain.stderr
        with cgroup.throttled(slow.path, iops=CAP_IOPS) as group:
            capped = iolab("replay", "sqlite", "--target", f"slow={slow.path}", "--destroy", slow.path,
                           "--as-fast-as-possible", "--label", "capped", "--format", "json", db=db, env=cache,
                           wrapper=group.wrapper())
        assert capped.returncode == 0, capped.stderr
    plain_doc, capped_doc = json.loads(plain.stdout), json.loads(capped.stdout)
    assert data_ios(plain_doc) == traced and data_ios(capped_doc) == traced
    iops = {name: sum(d["iops"] for job in doc["results"][0]["jobs"] for k, d in job["directions"].items()
                      if k in ("read", "write")) for name, doc in (("plain", plain_doc), ("capped", capped_doc))}
    # the cap is per direction: at most 2 x CAP_IOPS in all, and the plain replay is faster
    assert iops["capped"] <= 2 * CAP_IOPS * 1.1
    assert iops["plain"] > 2 * iops["capped"]
    compared = iolab("compare", "plain", "capped", "--format", "json", db=db)
    rows = [r for side in json.loads(compared.stdout)["comparisons"] for p in side["pairs"] for r in p["metrics"]
            if r["metric"] == "iops"]
    # one replay a side: untested, by the threshold alone
    assert rows and all(r["verdict"] in ("worse (untested)", "inconclusive") for r in rows if r["verdict"] != "missing")


@requires_loop
@pytest.mark.skipif(cgroup.unavailable_reason() is not None, reason=cgroup.unavailable_reason() or "")
def test_a_timed_replay_under_a_blkio_cap_falls_behind_and_names_the_target(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The SQLite trace (485 writes in 0.57 s: about 850 a second) at its recorded times onto a device
    capped at 150 IOPS a direction cannot keep pace: the replay says so for every class that writes,
    and names the target (the cap holds requests before the device's queue, so the device is not busy:
    the requests' slowdown explains the lag); ``compare`` marks those classes' verdicts, and sets the
    capture's flush rate and latency beside the replay's syncs."""
    db = tmp_path / "iolab.db"
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    monkeypatch.setenv("XDG_CACHE_HOME", cache["XDG_CACHE_HOME"])  # the capture's job names the replay's iologs
    trace, made = captures.committed("sqlite-ext4")
    stored(db, capture_of(trace, path=made["device"], size_bytes=made["device_bytes"]), label="sqlite")
    with loop_device(tmp_path, size_bytes=made["device_bytes"], name="c.img") as slow, \
            cgroup.throttled(slow.path, iops=CAP_IOPS) as group:
        capped = iolab("replay", "sqlite", "--target", f"slow={slow.path}", "--destroy", slow.path,
                       "--label", "capped-timed", "--format", "json", db=db, env=cache, wrapper=group.wrapper())
    assert capped.returncode == 0, capped.stderr
    assert "The replay fell behind the recorded pace" in " ".join(capped.stderr.split())
    paced = {p["job"]: p for p in json.loads(capped.stdout)["pace"]}
    writing = [job["name"] for job in json.loads(capped.stdout)["results"][0]["jobs"]
               if job["directions"].get("write", {}).get("total_ios", 0) >= 50]
    assert writing
    for name in writing:
        assert paced[name]["behind"] and paced[name]["ratio"] > 2, paced[name]
        assert paced[name]["limit"]["by"] in ("target", "target and replayer"), paced[name]["limit"]
    compared = json.loads(iolab("compare", "sqlite", "capped-timed", "--format", "json", db=db).stdout)
    pairs = compared["comparisons"][0]["pairs"]
    for pair in pairs:
        if pair["b"] is not None and pair["b"]["job"] in writing:
            assert pair["behind"] and all("replay behind pace" in m["verdict"] for m in pair["metrics"]
                                          if m["verdict"].split(" (")[0] in ("better", "worse", "unchanged",
                                                                             "inconclusive"))
    (sync,) = [p for p in pairs if p["direction"] == "sync"]
    assert sync["a"] is not None and sync["b"] is not None
    assert {m["metric"] for m in sync["metrics"]} >= {"iops", "clat_p99"}
