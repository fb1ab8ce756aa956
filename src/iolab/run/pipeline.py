"""The run pipeline, written once: a suite planned and checked (``run.plan.prepare``), the plan told to
the caller, the run stored (``run.execute.start``; a later plan of the same run ``extend``s it), its
jobs run with their progress told (``run.execute.execute``), the stored run returned.

``iolab run``, ``replay`` and ``fit --check`` make one call (``run``; ``resume`` finishes an
interrupted run); the workflows (``saturate``, ``autotune``, ``crash-test``) run one plan after
another as one run through a ``Session`` (``workflows.prober``). What happens is told to a ``Watch``,
which the CLI draws (``cli.plan``); nothing here prints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from ..describe.spec import Suite
from ..model import ResultRecord, Run
from ..remote import sshhost
from .execute import execute, extend, start
from .job import JobEvent
from .plan import Plan, RunOptions, prepare

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported while the plan's checks run
    from ..check.remote import RemoteTarget
    from ..store.database import Store


class Watch:
    """What a pipeline tells as it goes. Every method does nothing here but pass job events to
    ``on_event``; the CLI's watch draws them all (``cli.plan.Shown``)."""

    def __init__(self, on_event: Callable[[JobEvent], None] | None = None) -> None:
        self.on_event = on_event

    def planned(self, plan: Plan) -> None:
        """A plan, checked (its lint findings in ``Plan.findings``), before anything is stored or run."""

    def stored(self, run_id: int, store: Store) -> None:
        """The run is stored (``Store.display_url`` says where); its jobs run next."""

    def running(self) -> AbstractContextManager[object]:
        """Held open while the jobs run (a progress display)."""
        return nullcontext()

    def event(self, event: JobEvent) -> None:
        """A job's progress (``run.job.JobEvent``)."""
        if self.on_event is not None:
            self.on_event(event)


class Session:
    """One stored run made of one plan or of many, one ``run`` each (a workflow's probes).

    ``store`` is the results database, or what opens it: it is opened once the first plan has
    passed its checks, so that a refused plan leaves no database behind. ``label`` and ``tags``
    name the run, ``warnings`` are stored with it (before its plan's lint findings). Remote targets'
    hosts are probed once per session (``checked``, which may start with the caller's preflights, by
    target name), not per plan.
    """

    def __init__(self, store: Store | Callable[[], Store], options: RunOptions, *, label: str | None = None,
                 tags: Mapping[str, str] | None = None, watch: Watch | None = None,
                 warnings: Sequence[str] = (), checked: Mapping[str, RemoteTarget] | None = None) -> None:
        self._open: Callable[[], Store] = store if callable(store) else (lambda: store)
        self._store: Store | None = None
        self.options, self.label, self.tags, self.warnings = options, label, tags, warnings
        self.watch = watch or Watch()
        self.run_id: int | None = None
        self.status: str | None = None
        self.checked: dict[str, RemoteTarget] = dict(checked or {})

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = self._open()
        return self._store

    def plan(self, suite: Suite, *, repeat: int | None = None, contact: bool = True, strict: bool = True) -> Plan:
        """``suite`` prepared (``run.plan.prepare``, which says what it raises) and told to the watch.
        With ``contact=False`` no other host is contacted (a dry run); with ``strict=False`` the plan's
        refusals are error findings in it (``Plan.errors``) instead of raised."""
        plan = prepare(suite, self.options, repeat=repeat, contact=contact, checked=self.checked, strict=strict)
        self.checked = {**self.checked, **plan.remote}
        self.watch.planned(plan)
        return plan

    def run(self, suite: Suite, *, repeat: int | None = None, planned: Mapping[str, Any] | None = None,
            first_repeat: int = 0, during: AbstractContextManager[object] | None = None
            ) -> tuple[Plan, list[ResultRecord]]:
        """Plan ``suite``, add it to the run (the first plan stores the run) and run its jobs; returns
        the plan and the results it added, in order (``ok``, ``failed``, ``partial``).

        ``planned`` is stored with each of its invocations (``run.job.PLANNED``: a crash test's
        phase); their repetitions count from ``first_repeat``. ``during`` is held open while the
        jobs run (a capture of the device, ``fit --check``). Raises what ``plan`` raises before
        anything is stored, then what ``run.execute.execute`` raises (``Interrupted`` after storing
        what finished, ``DatabaseUnavailable``, ``HostError``, ``tuning.RestoreError``).
        """
        plan = self.plan(suite, repeat=repeat)
        store = self.store
        if self.run_id is None:
            self.run_id, first = start(store, plan, self.options, label=self.label, tags=self.tags,
                                       planned=planned, warnings=self.warnings), 0
            self.watch.stored(self.run_id, store)
        else:
            first = extend(store, self.run_id, plan, first_repeat, planned)
        with during or nullcontext(), self.watch.running():
            self.status = execute(store, self.run_id, self.options, on_event=self.watch.event, checked=self.checked)
        return plan, [r for r in store.get_run(self.run_id).results if r.seq >= first]


def run(store: Store | Callable[[], Store], suite: Suite, options: RunOptions, *, repeat: int | None = None,
        label: str | None = None, tags: Mapping[str, str] | None = None, watch: Watch | None = None,
        during: AbstractContextManager[object] | None = None, warnings: Sequence[str] = (),
        planned: Mapping[str, Any] | None = None) -> Run:
    """The pipeline in one call: plan ``suite``, tell the plan, store the run (with ``warnings``; with
    ``planned`` stored with each invocation, as ``Session.run`` says), run its jobs with progress;
    returns the stored run (``Run.info.status``: ``complete``, ``partial`` or ``failed``). Raises as
    ``Session.run`` says."""
    session = Session(store, options, label=label, tags=tags, watch=watch, warnings=warnings)
    try:
        session.run(suite, repeat=repeat, during=during, planned=planned)
    finally:
        sshhost.close_all()  # the ssh hosts' servers end with the run
    assert session.run_id is not None
    return session.store.get_run(session.run_id)


def resume(store: Store, run_id: int, options: RunOptions, *, watch: Watch | None = None) -> Run:
    """Finish the stored run ``run_id`` (``--resume``): what has not ended runs, every job left checked
    again first as a plan's are and its remote hosts probed again; returns the run. Raises as
    ``run.execute.execute`` says."""
    watch = watch or Watch()
    try:
        with watch.running():
            execute(store, run_id, options, on_event=watch.event, resuming=True)
    finally:
        sshhost.close_all()
    return store.get_run(run_id)
