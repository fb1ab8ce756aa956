"""``fit --check``: the capture replayed and the fitted job run on one check device, each through
the run pipeline while that device is captured, so that fit error and device difference come apart.

Set beside the original (``capture.fit.closeness``, ``report.capture.performance_table``):

- **fit error**: the fitted job against the replay on the check device: both ran there, so what
  differs is what the fitted job failed to reproduce;
- **device difference**: the replay against the original: the same requests at the same times, so
  what differs is the check device (its service times, what its queue merged).

The replay is an ordinary one (``capture.plan.replay_suite``: the recorded timing), stored as a run
like ``iolab replay``'s (tagged ``capture`` and ``fit_of``); each run's capture is stored as a run too.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace

from ...describe import suite as suite_mod
from ...describe.observe import with_args
from ...describe.spec import Suite
from ...errors import IolabError
from ...model import Run
from ...run import pipeline
from ...run.pipeline import Watch
from ...run.plan import RunOptions
from ...store.database import Store
from . import plan as plan_mod
from . import record
from .replay import ReplaySettings


@dataclass(frozen=True)
class FitCheck:
    """What ``check_fit`` ran: the fitted job's run and its capture, the replay's run and its capture
    (the capture None for a replay given rather than run here)."""

    fitted_run: Run
    fitted_capture: Run
    replay_run: Run
    replay_capture: Run | None


class _Captured:
    """The device captured while a run's jobs run (``during``), stored afterwards as a run."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.found: list[record.Background] = []

    @contextmanager
    def during(self) -> Iterator[None]:  # from the moment the jobs start to their end
        with record.Background(self.device) as background:
            self.found.append(background)
            yield

    def save(self, store: Store, label: str, tags: Mapping[str, str]) -> Run:
        return store.get_run(record.save(store, self.found[0].result(), label=label, tags=tags))


def check_fit(store: Store, job_path: str, name: str, device: str, destroy: Collection[str], capture: Run,
              watch: Watch | None = None, label: str | None = None, tags: Mapping[str, str] | None = None,
              observe: bool = True, replay_run: Run | None = None, processes: Sequence[str] = ()) -> FitCheck:
    """Replay ``capture`` (its ``processes`` only, when given) on ``device`` (target ``name``), then run
    the fitted job file ``job_path`` there, both observed unless ``observe`` is False and writing the
    device (it must be in ``destroy``), each captured meanwhile. The fitted run is labelled ``label``
    (default ``fit-of-CAPTURE``), the replay ``LABEL-replay``, their captures ``…-capture``; all carry
    ``tags`` and ``fit_of``. With ``replay_run`` that replay stands for the one run here (none is run,
    and its capture is unknown). Raises what the pipeline raises (``run.pipeline.run``), and
    ``IolabError`` when the replay or the fitted job failed (nothing to compare)."""
    label, tags = label or f"fit-of-{capture.info.id}", {"fit_of": str(capture.info.id), **(tags or {})}
    replay_capture = None
    if replay_run is None:
        planned = plan_mod.replay_suite(store, capture, name, device, ReplaySettings(), processes)
        seen = _Captured(device)
        replay_run = _run(store, _observed(planned.suite, observe), destroy, f"{label}-replay",
                          {"capture": str(capture.info.id), **tags}, watch, seen.during(), planned.caveats,
                          {"replay": planned.planned})
        replay_capture = seen.save(store, f"{label}-replay-capture", tags)
    seen = _Captured(device)
    suite = suite_mod.with_targets(suite_mod.load(job_path), {name: device})
    fitted = _run(store, _observed(suite, observe), destroy, label, tags, watch, seen.during())
    return FitCheck(fitted, seen.save(store, f"{label}-capture", tags), replay_run, replay_capture)


def _observed(suite: Suite, observe: bool) -> Suite:
    return suite if observe else replace(suite, observe=with_args(suite.observe, (), off=True))


def _run(store: Store, suite: Suite, destroy: Collection[str], label: str, tags: Mapping[str, str],
         watch: Watch | None, during: AbstractContextManager[None], warnings: Sequence[str] = (),
         planned: Mapping[str, object] | None = None) -> Run:
    """One run of ``suite`` on the check device; raises ``IolabError`` when it did not complete."""
    run = pipeline.run(store, suite, RunOptions(destroy=tuple(destroy)), label=label, tags=tags, watch=watch,
                       during=during, warnings=warnings, planned=planned)
    if run.info.status != "complete":
        what = "the replay" if planned else "the fitted job"
        where = suite.targets[0].path if suite.targets else "the device"
        raise IolabError(f"{what} failed on {where} (run {run.info.id}): nothing to compare",
                         hint=f"see fio's message: iolab show {run.info.id}")
    return run
