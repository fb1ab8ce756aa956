"""Live status from fio's ``--status-interval`` stream.

With ``--output-format=json+ --output=FILE --status-interval=1`` fio appends a complete report
to FILE every second; the last one is the final result (FIO_NOTES §3.1). The values are
cumulative since the job started (after ``ramp_time``), so the current rate is the difference
between two successive reports: ``Δtotal_ios * 1000 / Δruntime_ms`` (HOWTO
``--status-interval``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: fio prints INT_MAX as ``eta`` while it cannot estimate it (FIO_NOTES §1.2).
_ETA_UNKNOWN = 2147483647
_DIRS = ("read", "write", "trim")


@dataclass(frozen=True)
class Status:
    """One status report of a running job.

    ``elapsed_s``/``eta_s`` are fio's (``eta_s`` None while unknown); ``iops`` and
    ``bw_bytes_s`` are the rates over the last interval, summed over jobs and directions
    (None before the first measurement, e.g. during ``ramp_time``).
    """

    elapsed_s: float
    eta_s: float | None
    iops: float | None
    bw_bytes_s: float | None


def _totals(doc: dict[str, Any]) -> tuple[int, int, int]:
    ios = nbytes = runtime = 0
    for job in doc.get("jobs") or doc.get("client_stats") or ():
        for d in _DIRS:
            stats = job.get(d) or {}
            ios += int(stats.get("total_ios", 0))
            nbytes += int(stats.get("io_bytes", 0))
            runtime = max(runtime, int(stats.get("runtime", 0)))
    return ios, nbytes, runtime


class StatusStream:
    """Feed it the bytes fio appended to its output file; it returns a Status per new report.

    A report is complete when a line that is exactly ``}`` ends it (nested objects are always
    indented, so this never splits one). Incomplete tails are kept for the next ``feed``.
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._previous: tuple[int, int, int] | None = None

    def feed(self, chunk: str) -> list[Status]:
        self._buffer += chunk
        end = self._buffer.rfind("\n}\n")
        if end < 0:
            return []
        complete, self._buffer = self._buffer[: end + 3], self._buffer[end + 3 :]
        out = []
        for text in complete.split("\n}\n"):
            start = 0 if text.startswith("{") else text.find("\n{") + 1
            if not text.startswith("{", start):
                continue  # stray text (an error line), no report
            try:
                doc = json.loads(text[start:] + "\n}")
            except json.JSONDecodeError:
                continue
            out.append(self._status(doc))
        return out

    def _status(self, doc: dict[str, Any]) -> Status:
        jobs = doc.get("jobs") or [{}]
        elapsed = max(float(j.get("elapsed", 0)) for j in jobs)
        eta_values = [float(j["eta"]) for j in jobs if "eta" in j and j["eta"] != _ETA_UNKNOWN]
        eta = max(eta_values) if eta_values else None
        current = _totals(doc)
        iops = bw = None
        previous = self._previous
        if previous is not None and current[2] > previous[2] and current[0] >= previous[0]:
            dt = current[2] - previous[2]
            iops = (current[0] - previous[0]) * 1000.0 / dt
            bw = (current[1] - previous[1]) * 1000.0 / dt
        elif current[2] > 0:  # first report, or stats were reset at the end of ramp_time
            iops = current[0] * 1000.0 / current[2]
            bw = current[1] * 1000.0 / current[2]
        self._previous = current
        return Status(elapsed_s=elapsed, eta_s=eta, iops=iops, bw_bytes_s=bw)
