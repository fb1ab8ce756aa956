"""What does keeping a result durable in the spool cost per job? Storing a finished result as a run does
(seal it in the spool with fsync, store it, remove it) against storing it alone, interleaved.

The result is a real json+ report (tests/data/fio/fio-3.33_randrw_libaio.jsonplus.json) with 5 fio log
series of 60 one-second samples, stored in SQLite (WAL) in a temporary directory on the same file system as
the spool. Prints the median milliseconds of each and their ratio; the target is <= 3 (a fsync'ed file
write costs a few ms; a job runs for seconds to minutes, so even 10 ms a job is under 1 % of a 1 s job).

    .venv/bin/python benchmarks/spool.py [--rounds 40] [--dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from iolab.fio import parse_output
from iolab.model import TimeSeries
from iolab.run.spool import JobEnd, Spool
from iolab.store.database import PendingResult, Store
from ratios import Ratio, add_json_option, emit, say

SAMPLE = Path(__file__).resolve().parent.parent / "tests" / "data" / "fio" / "fio-3.33_randrw_libaio.jsonplus.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--dir", type=Path, default=None, help="where the database and spool go (default: a temp dir)")
    add_json_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        run_id = store.create_run(suite_name="bench", suite_text="")
        ids = store.add_pending(run_id, [PendingResult(i, "t", None, "w", 0, "[w]\n", "h", {})
                                         for i in range(2 * args.rounds)])
        spool = Spool(store.display_url, run_id, datetime.now(UTC), root=Path(tmp) / "spool")
        text = SAMPLE.read_text()
        series = tuple(TimeSeries("w", 0, d, m, tuple(range(1000, 61000, 1000)), tuple(float(v) for v in range(60)),
                                  1000) for d, m in (("read", "iops"), ("read", "bw_bytes_s"), ("read", "clat_ns"),
                                                     ("write", "iops"), ("write", "bw_bytes_s")))
        end = JobEnd(status="ok", command="fio job.fio", started_at=datetime.now(UTC), ended_at=datetime.now(UTC),
                     report=parse_output(text), raw_json=text, series=series)
        alone, spooled = [], []
        for i in range(args.rounds):  # interleaved, so drift of a loaded machine touches both alike
            for kind in (("alone", "spooled") if i % 2 else ("spooled", "alone")):
                result_id = ids.pop()
                started = time.perf_counter()
                if kind == "spooled":
                    spool.workdir(result_id)
                    spool.seal(result_id, end)
                store.save_result(result_id, **end.saved())
                if kind == "spooled":
                    spool.remove(result_id)
                (spooled if kind == "spooled" else alone).append((time.perf_counter() - started) * 1000)
        a, s = statistics.median(alone), statistics.median(spooled)
        say(f"store alone: median {a:.2f} ms; spool + store: median {s:.2f} ms ({args.rounds} rounds)", args.json)
        store.close()
    emit("spool", [Ratio("spooled_over_alone", s / a, 3.0, "lower")], args.json)


if __name__ == "__main__":
    sys.exit(main())
