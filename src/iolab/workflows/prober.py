"""The prober every workflow that decides what to run next runs its fio jobs through: the saturation
search (``workflows.saturate``), auto-tuning (``workflows.autotune``), crash tests (``workflows.crashtest``).

A workflow never starts fio itself (docs/design.md, section 5): ``Prober.run`` builds a one-workload suite and
hands it to the run pipeline (``run.pipeline.Session``), which checks it (safety, fio's own parse, lint), adds
it to the workflow's run (the first plan stores the run) and runs it.
So every probe is a stored result with its job file, host and device facts and tuning in force;
a kill loses at most the probe in flight; tuning is restored after each job as for ``iolab run``.
Scratch files are laid out once and kept until ``Prober.finish``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import yaml

from ..check import lint
from ..describe.method import Method
from ..describe.observe import Observe
from ..describe.spec import Suite, Target, Workload
from ..fio.jobfile import Section
from ..model import ResultRecord
from ..run import scratch
from ..run.job import JobEvent
from ..run.pipeline import Session, Watch
from ..run.plan import RunOptions
from ..store.database import Store

if TYPE_CHECKING:
    from ..check.remote import RemoteTarget

#: What a probe runs unless the user says otherwise (fio options, verbatim).
DEFAULT_OPTIONS = {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": "1", "time_based": "1",
                   "ramp_time": "2s", "randrepeat": "0"}
#: The working set of a scratch-file target when no size is given (as the quick suite).
DEFAULT_SIZE = "1g"


class Prober:
    """Runs workloads on one target as the results of one stored run (see the module docstring),
    one plan each through a ``run.pipeline.Session``.

    ``options`` are the run's (``keep_files`` is forced on until ``finish``); ``name`` is the run's
    suite name, ``description`` its suite text (what the workflow was asked); ``on_event`` is told
    every job's progress; ``observe`` False observes no host (``--no-observe``); ``checked`` is the
    remote target's preflight when the caller made it (``hosts_checked``): its hosts are not probed again.
    """

    def __init__(self, store: Store, target: Target, options: RunOptions, name: str, description: str,
                 label: str | None = None, tags: Mapping[str, str] | None = None,
                 on_event: Callable[[JobEvent], None] | None = None, observe: bool = True,
                 checked: RemoteTarget | None = None) -> None:
        self.store, self.target, self.options, self.name, self.description = store, target, options, name, description
        self.observe = Observe() if observe else Observe(enabled=False, asked=True)
        self.findings: list[lint.Finding] = []
        self.session = Session(store, replace(options, keep_files=True), label=label, tags=dict(tags or {}),
                               watch=Watch(on_event), checked={target.name: checked} if checked else None)

    @property
    def run_id(self) -> int | None:
        """The workflow's stored run, once its first probe is stored."""
        return self.session.run_id

    def run(self, workload: str, fio_options: Mapping[str, str], repeat: int = 1,
            tune: Mapping[str, str] | None = None, pin: str | None = None, first_repeat: int = 0,
            planned: Mapping[str, Any] | None = None, job: str | None = None,
            waived: Collection[str] = ()) -> list[ResultRecord]:
        """Run ``fio_options`` as the workload ``workload``, ``repeat`` times (numbered from
        ``first_repeat``), under host ``tune`` settings and CPU ``pin`` mode; returns its results in
        order (``ok`` or ``failed``). ``planned`` is stored with each (``run.job.PLANNED``: a crash
        test's phase); ``job`` names fio's job when it is not the workload's name; ``waived`` are
        lint warnings (``P4`` …) that iolab's own choices for this workload set off, not kept. Raises
        what ``run.pipeline.Session.run`` raises (``SafetyError``, ``SuiteError``, ``TuningError``,
        ``Interrupted`` …)."""
        section = Section(job or workload, tuple((k, v) for k, v in fio_options.items()))
        suite = Suite(name=self.name, source=f"<{self.name}>", text=self.description, targets=(self.target,),
                      workloads=(Workload(workload, (section,), workload),), repeat=repeat,
                      tune={k: (v,) for k, v in (tune or {}).items()}, method=Method(pin=pin), observe=self.observe)
        plan, results = self.session.run(suite, planned=planned, first_repeat=first_repeat)
        self.findings += [f for f in plan.findings if not (f.severity == "warning" and f.id in waived)]
        return results

    def __enter__(self) -> Prober:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """A workflow that stops on an error or Ctrl-C still removes its scratch files (its probes
        ran with ``keep_files``); the run keeps the status ``run.execute`` gave it."""
        if kind is not None and self.run_id is not None and not self.options.keep_files:
            scratch.cleanup(self.store, self.run_id, keep=False)

    def finish(self, record: Mapping[str, Any]) -> None:
        """Store what the workflow found (``record``, under the run's options) and every lint warning
        of its probes, remove scratch files unless asked to keep them, and close the run."""
        if self.run_id is None:
            return
        run = self.store.get_run(self.run_id)
        warnings = [f.text() for f in lint.merge(self.findings)]  # one finding for all the probes it concerns
        self.store.update_run(self.run_id, options={**run.info.options, **record}, warnings=warnings)
        if not self.options.keep_files:
            scratch.cleanup(self.store, self.run_id, keep=False)
        statuses = {r.status for r in run.results}
        self.store.finish_run(self.run_id, "complete" if statuses <= {"ok"} else "failed")


def hosts_checked(target: Target, options: RunOptions) -> tuple[RemoteTarget | None, int]:
    """A remote target's preflight (``check.remote.preflight``: ssh logins, fio servers, facts),
    made once for the workflow's whole run, and the online CPUs where its probes run: the fewest of
    the hosts whose facts are known, else this machine's. For a local target: (None, this machine's
    CPUs). Raises what the preflight raises (``HostError``, ``SafetyError``)."""
    here = os.cpu_count() or 1
    if not target.hosts:
        return None, here
    from ..check.remote import preflight
    from ..runner import local
    checked = preflight(target, options.fio, fio_version=local.fio_version(options.fio), fenced=options.fence)
    counts = [h.facts.host.cpu_count for h in checked.hosts if h.facts is not None and h.facts.host.cpu_count]
    return checked, min(counts) if counts else here


def describe(command: str, settings: Mapping[str, Any]) -> str:
    """The suite text a workflow's run stores: what it was asked, as YAML."""
    return f"# {command}\n" + yaml.safe_dump(dict(settings), sort_keys=False)


