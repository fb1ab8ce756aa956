"""Warm-up suite keys and options, refused where they are wrong, before anything runs."""

from __future__ import annotations

from pathlib import Path

from inprocess import iolab


def test_suite_keys_say_where_they_are_wrong(tmp_path: Path):
    proc = iolab("run", str(_suite(tmp_path, "passes: 0\ntiers: {origin: a/b}\n")), "--dry-run", db=tmp_path / "db")
    assert proc.returncode == 2
    assert "suite.yaml:2: passes: expected a whole number of passes 1..1000, got 0" in proc.stderr
    assert "suite.yaml:3: tiers.origin: 'a/b' is neither a /dev path nor a kernel device name" in proc.stderr
    proc = iolab("run", str(_suite(tmp_path, "")), "--passes", "3", "--tier", "origin", "--dry-run", db=tmp_path / "db")
    assert proc.returncode == 2 and "--tier 'origin': expected NAME=DEVICE" in proc.stderr


def _suite(tmp_path: Path, keys: str) -> Path:
    path = tmp_path / "suite.yaml"
    path.write_text(f"name: x\n{keys}workloads: [{{rw: randread, size: 1m}}]\n")
    return path
