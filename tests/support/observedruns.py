"""Observed runs for the observers' tests: a suite run through the library (plan, start, execute) into a
SQLite database of its own, and this machine's CPU count and memory as a fio server's exporter
reports them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from iolab.describe.suite import load_yaml
from iolab.run import execute
from iolab.run.plan import RunOptions, prepare
from iolab.store.database import Store


def run_suite(text: str, tmp_path: Path) -> tuple[Store, int]:
    """Run the suite ``text`` with default options into ``tmp_path/db.sqlite``: the store and run id."""
    store = Store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    options = RunOptions()
    plan = prepare(load_yaml(text, "suite.yaml"), options)
    run_id = execute.start(store, plan, options)
    execute.execute(store, run_id, options)
    return store, run_id


def online_cpus() -> int:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    return sum(int(b) - int(a) + 1 if "-" in part else 1 for part in text.split(",")
               for a, _, b in [part.partition("-")])


def mem_total() -> int:
    line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if x.startswith("MemTotal:"))
    return int(line.split()[1]) * 1024


def first_status(db: Path) -> str | None:
    """The first result's status in the run's database; None before iolab has made it."""
    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT status FROM results ORDER BY id LIMIT 1").fetchone()
    except sqlite3.OperationalError:  # the tables are not there yet
        return None
    return row[0] if row else None
