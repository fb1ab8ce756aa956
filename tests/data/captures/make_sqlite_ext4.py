"""Record ``sqlite-ext4.json.xz``: a real capture of SQLite committing 60 small transactions
(``synchronous=FULL``, rollback journal: an fsync per commit) on ext4 on a 64 MiB loop device.

Run as root from the repository (``.venv/bin/python tests/data/captures/make_sqlite_ext4.py``): it
attaches a loop device, makes ext4 (no lazy init), mounts it, runs ``iolab capture`` around the
application, reads the stored trace back (``record.load_trace``) and writes its columns and
metadata, then unmounts and detaches everything it made."""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from iolab.store.database import Store
from iolab.workflows.capture import record

OUT = Path(__file__).with_name("sqlite-ext4.json.xz")
COMMITS = 60
APP = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA synchronous=FULL")
db.execute("PRAGMA journal_mode=DELETE")
db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB)")
for i in range(int(sys.argv[2])):
    db.execute("BEGIN")
    db.execute("INSERT INTO t (v) VALUES (randomblob(3000))")
    db.execute("COMMIT")
db.close()
"""


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="iolab-capture-data-") as tmp:
        base = Path(tmp)
        image, mnt, app, db = base / "app.img", base / "mnt", base / "app.py", base / "iolab.db"
        with open(image, "wb") as f:
            f.truncate(64 * 1024**2)
        app.write_text(APP)
        loop = subprocess.run(["losetup", "--find", "--show", str(image)], check=True, capture_output=True,
                              text=True).stdout.strip()
        try:
            subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop], check=True)
            mnt.mkdir()
            subprocess.run(["mount", loop, str(mnt)], check=True)
            try:
                command = [sys.executable, str(app), str(mnt / "app.sqlite"), str(COMMITS)]
                subprocess.run([sys.executable, "-m", "iolab", "capture", loop, "--label", "sqlite", "--", *command],
                               check=True, env={**os.environ, "IOLAB_DB": str(db)}, stdout=subprocess.DEVNULL)
            finally:
                subprocess.run(["umount", str(mnt)], check=True)
        finally:
            subprocess.run(["losetup", "-d", loop], check=True)
        store = Store(str(db))
        run = store.get_run(store.resolve("sqlite")[0])
        trace = record.load_trace(store, run)
    names = ("issue_ns", "complete_ns", "sector", "nbytes", "op", "flags", "pid")
    document = {
        "made": f"{datetime.now(UTC):%Y-%m-%d}, Linux {os.uname().release}, iolab capture of {loop} (ext4, 64 MiB), "
                f"SQLite {COMMITS} commits, synchronous=FULL, journal_mode=DELETE",
        "device": loop, "device_bytes": 64 * 1024**2,
        "comms": {str(k): v for k, v in sorted(trace.comms.items())}, "kthreads": sorted(trace.kthreads),
        "left_out": dict(trace.left_out), "lost_events": trace.lost_events, "duration_ns": trace.duration_ns,
        "columns": {name: column.tolist() for name, column in zip(names, trace.columns(), strict=True)},
    }
    OUT.write_bytes(lzma.compress(json.dumps(document, indent=0).encode(), preset=9))
    print(f"{OUT}: {len(trace)} requests")


if __name__ == "__main__":
    main()
