"""How one fio invocation ended, whatever ran it: fio on this machine (``runner.local``) or fio's
client driving servers (``remote.client``). One type, so the run loop treats every transport alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..model import FioReport, TimeSeries


@dataclass(frozen=True)
class HostOutcome:
    """How one fio server's part of a job ended: ``status`` is ``ok``, ``failed`` (a job on the host
    reported an errno) or ``lost`` (unreachable at the start, disconnected, server gone, timed out).
    ``error`` names the cause with fio's own message. ``server`` is what the server said about
    itself (``remote.protocol.ProbeReply`` as stored: hostname, fio_version, os, arch, bits, cpus)."""

    host: str
    status: str
    error: str | None = None
    server: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Outcome:
    """What one fio invocation produced.

    ``status`` is ``ok``, ``failed`` (fio exited non-zero, a job reported an errno, or there is no
    report; ``error`` says why in fio's words), ``partial`` (fio's client: some hosts ok, others
    lost or failed) or ``interrupted``. ``raw_json`` is the final report's text as fio wrote it (for
    fio's client its whole output file, text lines included). ``time_series`` are fio's per-second
    logs (``fio.logs``; for a server's, ``TimeSeries.hostname`` is the host's label).
    ``measured_start_ms`` is when the measured phase began (ms since the epoch; ``runner.local``).

    ``hosts`` are the servers' parts, in the job's host order (empty when fio ran here);
    ``prefixes`` maps each host's label to the prefix fio gives the files it names after that host
    (verify states: ``local`` here, the address fio's client connected to for a server).
    ``messages`` are fio's own words (its stderr here; the lines fio's client relays). ``extra`` is
    what the run stores with the result beside fio's report (``run.runners``: the fence, each host's
    record, a crash-test phase's record).
    """

    status: str
    command: tuple[str, ...]
    started_at: datetime
    ended_at: datetime
    report: FioReport | None = None
    raw_json: str | None = None
    error: str | None = None
    time_series: tuple[TimeSeries, ...] = ()
    measured_start_ms: int | None = None
    hosts: tuple[HostOutcome, ...] = ()
    prefixes: Mapping[str, str] = field(default_factory=dict)
    messages: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
