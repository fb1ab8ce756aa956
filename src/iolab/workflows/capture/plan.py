"""A replay as an ordinary suite: the capture's iologs, a fio job per lane of each class and window, on a target.

``replay_suite`` writes the iologs (``replay.write_iologs``) and the job file into the capture's
replay directory — the same path for every replay of one capture from one results database, so
two replays' job options are equal and ``iolab compare`` pairs them — and returns the Suite that
``run.plan.prepare`` checks like any job file: the destructive guard sees ``read_iolog`` as writing
(``check.safety.writes``), so the target must be named with ``--destroy``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ... import outputs
from ...describe import suite as suite_mod
from ...describe.spec import Suite
from ...errors import UsageError
from ...facts import targets
from ...model import Run
from ...store.database import Store
from . import record, replay
from .fingerprint import active_ns, fingerprint
from .fit import EMPTY_HINT
from .trace import Trace, of_processes


@dataclass(frozen=True)
class ReplayPlan:
    """The suite to run and what the plan says about it: ``description`` (classes, jobs, timing) and
    ``caveats``, what changes the meaning of the replay's results (requests left out, write-zeroes sent
    as data, offsets scaled), which are also stored with the replay run as its warnings; ``planned``
    what the trace took, stored with each replay result (``extra["replay"]``: ``analyze.pace`` sets
    the replay's durations against it)."""

    suite: Suite
    directory: Path
    requests: int
    classes: tuple[str, ...]
    description: str
    caveats: tuple[str, ...]
    planned: Mapping[str, Any] = field(default_factory=dict)

    @property
    def notes(self) -> tuple[str, ...]:
        """What is printed before the replay runs."""
        return (self.description, *self.caveats)


def replay_suite(store: Store, run: Run, target_name: str, target_path: str,
                 settings: replay.ReplaySettings, processes: Sequence[str] = ()) -> ReplayPlan:
    """The replay of capture ``run`` on ``target_path`` (a block device); with ``processes``, only
    the requests of those tasks and of kernel threads (``trace.of_processes``). Raises UsageError when
    ``run`` is not a capture, holds no read or write request, or the target is not a block device."""
    trace = record.load_trace(store, run)
    if processes:
        trace = of_processes(trace, processes)
    facts = targets.inspect(target_path)
    if facts.kind != "block":
        raise UsageError(f"replay target {target_name}={target_path} is a {facts.kind}, not a block device",
                         hint="replay onto a block device you may overwrite, named with --destroy")
    fp = fingerprint(trace)
    if fp.empty or fp.lba_end_bytes is None:
        raise UsageError(f"capture {run.info.id} holds no read or write request ({fp.requests:,} requests in "
                         f"{fp.duration_s:.2f} s): there is nothing to replay", hint=EMPTY_HINT)
    end = fp.lba_end_bytes
    scale = replay.needed_scale(end, facts.size_bytes)
    settings = replace(settings, scale=scale)
    directory = record.replay_dir(store, run.info.id, processes)
    device = str((run.info.options or {}).get("device", "capture"))
    dealt = replay.replay_jobs(trace, windowed=not settings.as_fast_as_possible)
    iologs, window_ns = replay.write_iologs(trace, directory, device, settings, dealt)
    text = replay.job_text(iologs, settings, f"replay of capture {run.info.id}")
    text = text.replace("[global]\n", f"[global]\nreplay_redirect={target_path}\n", 1)
    job = directory / "replay.fio"
    outputs.write(job, "the replay's job file", text)
    loaded = suite_mod.load_jobfile(text, str(job))
    suite = replace(suite_mod.with_targets(loaded, {target_name: target_path}),
                    name=f"replay of capture {run.info.id}")
    timing = ("as fast as possible (replay_no_stall=1)" if settings.as_fast_as_possible else
              "original timing" if settings.rate_pct == 100 else
              f"timing stretched ×{100 / settings.rate_pct:.3g} (replay_time_scale={settings.rate_pct}: "
              f"{settings.rate_pct} % of the trace's rate)")
    if not settings.as_fast_as_possible and settings.quantum_us > 1:
        timing += f", issue times rounded to {settings.quantum_us / 1000:g} ms"
    layout = ("lanes of the whole trace" if settings.as_fast_as_possible else
              f"lanes of windows of {window_ns / 1e9:.3g} s")
    groups = [name for name in iologs if "." not in name[3:]]
    description = (f"replay of capture {run.info.id}: {len(trace):,} requests in {len(groups)} class(es) "
                   f"({', '.join(groups)}) over {len(iologs)} fio job(s) at iodepth=1 ({layout}), {timing}; "
                   f"iologs in {directory}")
    caveats: list[str] = []
    if processes:
        caveats.append(f"only the requests of {', '.join(processes)} and of kernel threads: "
                       f"{sum(fp.left_out.values()):,} left out ({_names(fp.left_out)})")
    if fp.zeroes_ios:
        caveats.append(f"{fp.zeroes_ios:,} write-zeroes request(s) ({fp.zeroes_bytes:,} bytes) are replayed as "
                       "writes of their size: fio's iolog has no write-zeroes action, so their data is sent")
    if scale > 1:
        caveats.append(f"the trace spans {end:,} bytes but {target_name} has {facts.size_bytes:,}: offsets are "
                       f"divided by replay_scale={scale} (replay_align=4096)")
    return ReplayPlan(suite, directory, len(trace), tuple(iologs), description, tuple(caveats),
                      _planned(run, trace, settings, dealt[0]))


def _planned(run: Run, trace: Trace, settings: replay.ReplaySettings,
             jobs: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """What a replay's results keep of its trace (``ReplayPlan.planned``, ``analyze.pace``): the
    capture, the active span (ms), the timing, and per class its requests, their service times'
    sum (ms) and, for a timed replay, the lag a slower target would cause (``replay.slowdown_lags``)."""
    classes = replay.class_service(trace)
    if not settings.as_fast_as_possible:
        for name, lags in replay.slowdown_lags(trace, jobs, settings.rate_pct).items():
            classes.setdefault(name, {})["lag_ms"] = lags
    return {"capture": run.info.id, "recorded_ms": active_ns(trace) / 1e6, "rate_pct": settings.rate_pct,
            "as_fast_as_possible": settings.as_fast_as_possible, "classes": classes}


def _names(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {count:,}" for name, count in sorted(counts.items(), key=lambda kv: -kv[1])[:6])
