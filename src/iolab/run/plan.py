"""A suite made a checked Plan, before anything runs or is stored.

``prepare`` inspects the targets and this host, renders every job file and has fio itself check
each (``--parse-only``), applies the static guard, the free-space and size checks
(``check.plan_checks``) and the remote targets' preflight (``check.remote``), probes the observers,
and lints the plan — all before fio runs a job. ``run.execute`` stores and runs the Plan.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import units
from ..check import guard, lint, plan_checks, safety
from ..check.acknowledge import acknowledge
from ..check.plan_checks import PlanItem
from ..check.remote import HostFence, RemoteTarget, plan_fences, preflight, unchecked
from ..describe.matrix import plan
from ..describe.render import render_job
from ..describe.spec import JobSpec, Suite
from ..errors import PlanRefused, SafetyError, SuiteError
from ..facts import host, pinning, targets
from ..facts.sysfs import format_cpu_list as format_cpus
from ..fio import jobfile
from ..model import BlockDeviceFacts, HostFacts, TargetFacts, to_jsonable
from ..observe import config as observe_config
from ..observe.config import Probed
from ..observe.watch import Observers
from ..remote import protocol, sshhost
from ..runner import fence as fence_mod
from ..runner import local
from ..runner.once import once
from . import method as method_mod
from . import spool as spool_mod
from . import tuning
from .options import RunOptions


@dataclass(frozen=True)
class Plan:
    """A checked, rendered suite. ``scratch`` lists files iolab creates and removes afterwards.

    ``host`` are this machine's facts, gathered once for the run (lint reads them, the run
    stores them). ``probed`` are the observers' exporters as the probe found them (all of them,
    to be shown), ``observers`` those the run observes (``observe.config.chosen``). ``created`` are
    the files and directories fio creates new (real paths): stored with the run, they are iolab's
    own to a ``--resume`` of it, marked or not (``runner.marks``). ``host_fences`` are the fences of
    each remote target's ``ssh://`` hosts (``check.remote.plan_fences``), by target name.
    """

    suite: Suite
    items: tuple[PlanItem, ...]
    facts: Mapping[str, TargetFacts]
    scratch: tuple[str, ...] = ()
    findings: tuple[lint.Finding, ...] = ()
    pins: Mapping[str, str] = field(default_factory=dict)
    remote: Mapping[str, RemoteTarget] = field(default_factory=dict)
    host: HostFacts = field(default_factory=HostFacts)
    probed: tuple[Probed, ...] = ()
    observers: Observers = field(default_factory=Observers)
    fence: guard.FencePlan = field(default_factory=lambda: guard.FencePlan(None, "not planned", ()))
    created: tuple[str, ...] = ()
    host_fences: Mapping[str, tuple[HostFence, ...]] = field(default_factory=dict)

    @property
    def errors(self) -> tuple[lint.Finding, ...]:
        """Error findings (a job fio rejects, a refused destructive write): only a plan prepared with
        ``strict=False`` holds them; ``prepare`` raises them otherwise."""
        return tuple(f for f in self.findings if f.severity == lint.ERROR)

    @property
    def estimate_s(self) -> float | None:
        """Sum of the jobs' expected durations; None when any is unknown."""
        total = 0.0
        for item in self.items:
            if item.expected_s is None:
                return None
            total += item.expected_s
        return total


def expected_seconds(options: Mapping[str, str | None]) -> float | None:
    """How long fio will run a job: ``ramp_time + runtime`` when ``time_based`` (HOWTO
    ``time_based``); ``runtime`` is only an upper bound otherwise, so None."""
    time_based = "time_based" in options and options["time_based"] not in ("0",)
    runtime = options.get("runtime") or options.get("timeout")
    if not time_based or not runtime:
        return None
    ramp = options.get("ramp_time") or "0"
    try:
        return (units.parse_duration_us(runtime) + units.parse_duration_us(ramp)) / 1e6
    except ValueError:  # e.g. ${RUNTIME}: fio substitutes it, iolab cannot know the value
        return None


def job_seconds(sections: tuple[jobfile.Section, ...]) -> float | None:
    times = [expected_seconds(opts) for _, opts in jobfile.effective_jobs(sections)]
    if not times or any(t is None for t in times):
        return None
    return max(t for t in times if t is not None)


def _resolve(suite: Suite) -> Suite:
    """Target paths made absolute (fio runs in another directory)."""
    resolved = tuple(
        replace(t, path=os.path.abspath(os.path.expanduser(t.path))) if t.path and not t.hosts else t
        for t in suite.targets
    )
    return replace(suite, targets=resolved)


def prepare(suite: Suite, options: RunOptions, repeat: int | None = None, strict: bool = True,
            contact: bool = True, checked: Mapping[str, RemoteTarget] | None = None) -> Plan:
    """Inspect targets, render and check every job, apply safety rules, lint; nothing is written.

    Remote targets (with hosts) pass their preflight first (``check.remote.preflight``); then
    every observer's exporter is probed once (``observe.config.probe``, at most a few seconds).
    ``checked`` are remote targets an earlier plan of the same run checked (by name): not
    probed again. With ``contact=False`` (a dry run) no other host is contacted: remote targets stay
    unchecked (``check.remote.unchecked``), their facts-based safety checks wait for the run, and
    no exporter is probed. fio checks each distinct job text once per process
    (``fio --parse-only``).

    Raises ``SafetyError`` (a destructive write, too little space), ``SuiteError`` (fio rejects
    a job: the message names the workload and quotes fio; a method setting does not fit a
    target), ``TuningError``, ``HostError`` (a host fails its preflight), ``FioNotFound``.
    With ``strict=False`` (``iolab lint``) fio's rejections and safety refusals become error
    findings (``FIO``, ``P16``) instead. Lint findings are in ``Plan.findings`` either way; the
    caller decides whether errors stop it.
    """
    for t in suite.targets:
        if t.path and not t.hosts and not os.path.lexists(os.path.expanduser(t.path)):
            plan_checks.check_directory_exists(t.name, os.path.abspath(os.path.expanduser(t.path)) +
                                               ("/" if t.path.endswith("/") else ""))
    suite = _resolve(suite)
    if contact:  # ssh's logins and fio's checks overlap the local work below; preflight waits for them
        start_soon(suite, options, repeat, checked)
    try:
        machine = host.host_facts(local.fio_version(options.fio))
        facts = {t.name: targets.inspect(t.path) for t in suite.targets if t.path and not t.hosts}
        remote = {t.name: preflight(t, options.fio, known=(checked or {}).get(t.name),
                                    fio_version=machine.fio_version, fenced=options.fence) if contact
                  else unchecked(t) for t in suite.targets if t.hosts}
        servers = {name: rt.target.hosts for name, rt in remote.items()}
        probed = observe_config.probe(observe_config.endpoints(suite.observe, servers)) if contact else []
        observers = Observers(tuple(observe_config.chosen(suite.observe, probed)), suite.observe.prometheus)
        pins = _pins(suite, facts)
        items: list[PlanItem] = []
        judged: dict[str, JobSpec] = {}
        refused: list[lint.Finding] = []
        fenced = fence_mod.status().ok and options.fence
    finally:  # the early fio checks ended (their directories removed) even when a host's check fails
        while _early:
            _early.pop().join()
    for job in plan(suite, repeat):
        spec = job.spec
        kind = facts[spec.target.name].kind if spec.target.name in facts else None
        kind = remote[spec.target.name].kind if spec.target.name in remote else kind
        text = render_job(spec, kind, pinning.fio_options(pins[spec.target.name]) if spec.target.name in pins
                          else ())
        if text not in judged:
            _check_method(suite, spec, facts.get(spec.target.name), spec.target.name in remote)
            try:  # before fio parses it: parsing loads an external engine's code
                guard.check_exec(text, options.allow_exec, f"{spec.workload.origin} ({spec.workload.name})")
                judged[text] = spec
            except SafetyError as exc:
                if strict:
                    raise
                refused.append(lint.Finding("P16", lint.ERROR, exc.message, exc.hint or "",
                                            "iolab safety guard (docs/design.md)", (spec.workload.name,)))
        params = {**jobfile.workload_params(spec.sections), **{f"tune.{k}": v for k, v in spec.tune.items()},
                  **({"pin": suite.method.pin} if suite.method.pin and spec.target.name in pins else {})}
        effective = [opts for _, opts in jobfile.effective_jobs(spec.sections)]
        items.append(PlanItem(
            job=job, kind=kind, job_text=text, params=params, job_hash=jobfile.params_hash(params),
            expected_s=job_seconds(spec.sections),
            writes=any(safety.writes(o) for o in effective) or suite.method.precondition is not None,
        ))
    refused += _fio_checks(judged, options.fio, strict, fenced)
    plan_checks.check_sizes(suite, items, facts)
    verdicts: list[guard.Checked] = []
    try:
        scratch, verdicts = plan_checks.check_targets(suite, items, facts, options.destroy, options.allow_exec,
                                                      options.fence, spool_mod.spool_root())
        plan_checks.check_remote_targets(remote, items, options.destroy)
        fence_plan = guard.plan_fence(verdicts, options.fence)
    except SafetyError as exc:
        if strict:
            raise
        scratch, fence_plan = (), guard.FencePlan(None, exc.message, ())
        refused.append(lint.Finding("P16", lint.ERROR, exc.message, exc.hint or "",
                                    "iolab safety rules (docs/design.md, section 3)"))
    findings = acknowledge(lint.merge([*refused, *lint.lint_plan(items, facts, suite.method.precondition, machine)]),
                           suite.lint_ignore)
    created = tuple(dict.fromkeys(os.path.realpath(p) for v in verdicts for p, why in v.writable.items()
                                  if why == fence_mod.NEW))
    host_fences = {name: plan_fences(rt, any(i.writes for i in items if i.job.spec.target.name == name),
                                      options.destroy, options.fence) for name, rt in remote.items()}
    return Plan(suite=suite, items=tuple(items), facts=facts, scratch=scratch, findings=tuple(findings),
                pins={name: format_cpus(cpus) for name, cpus in pins.items()}, remote=remote, host=machine,
                probed=tuple(probed), observers=observers, fence=fence_plan, created=created,
                host_fences=host_fences)

def start_soon(suite: Suite, options: RunOptions, repeat: int | None = None,
               checked: Mapping[str, RemoteTarget] | None = None) -> None:
    """Start what a plan of ``suite`` with remote targets waits for, each in a thread, so that it runs
    while iolab imports the rest of itself (``iolab run`` calls this as soon as the suite is read)
    and the plan then finds it done or waits for it: the ssh logins (``sshhost.connect_soon``; not of
    the targets ``checked``), the programs the plan starts here (fio's version, whether bubblewrap
    can fence, the local fio's protocol version: each asked ``once``) and fio's checks of the remote
    targets' jobs (``_fio_checks_soon``). A failure is left for the plan's own calls to raise.
    Nothing without a remote target: a local plan has no login to overlap."""
    suite = _resolve(suite)
    remote = [t for t in suite.targets if t.hosts]
    if not remote:
        return
    sshhost.connect_soon([h for t in remote if t.name not in (checked or {}) for h in t.hosts if h.kind == "ssh"])
    for ask in (lambda: local.fio_version(options.fio), fence_mod.status,
                lambda: protocol.local_protocol_version(local.find_fio(options.fio))):
        threading.Thread(target=_quietly, args=(ask,), name="iolab-learn", daemon=True).start()
    _early.append(_fio_checks_soon(suite, options, repeat))


def _quietly(ask: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):  # the plan's own call raises it
        ask()


#: The early checks started (``start_soon``) and not yet joined by a plan.
_early: list[threading.Thread] = []


def _fio_checks_soon(suite: Suite, options: RunOptions, repeat: int | None) -> threading.Thread:
    """fio's checks of the remote targets' jobs started while their hosts are checked (``preflight``:
    ssh logins, probes, facts), on the job texts those targets render to when the facts say what their
    paths' spelling says (``check.remote.unchecked``); the plan's own checks then find their verdicts
    (``_verdict``), and check anew any text that came out otherwise. Texts the guard refuses
    (``guard.check_exec``) are not given to fio here."""
    def check() -> None:
        kinds = {t.name: unchecked(t).kind for t in suite.targets if t.hosts}
        judged: dict[str, JobSpec] = {}
        for job in plan(suite, repeat):
            spec = job.spec
            if spec.target.name not in kinds:
                continue
            text = render_job(spec, kinds[spec.target.name], ())
            try:
                guard.check_exec(text, options.allow_exec, f"{spec.workload.origin} ({spec.workload.name})")
            except SafetyError:
                continue
            judged.setdefault(text, spec)
        _fio_checks(judged, options.fio, False, fence_mod.status().ok and options.fence)

    def quietly() -> None:
        with contextlib.suppress(Exception):  # the plan's own checks say what went wrong
            check()

    thread = threading.Thread(target=quietly, name="iolab-fio-checks", daemon=True)
    thread.start()
    return thread


def _fio_checks(judged: Mapping[str, JobSpec], fio: str, strict: bool, fenced: bool) -> list[lint.Finding]:
    """fio's own check (``runner.local.check_job``) of each distinct job text, once per process (a
    workflow prepares a plan per step, mostly of texts fio has judged) and several at once (each
    check starts fio, ~0.1 s of CPU calibrating its clock: a sweep has dozens); inside the fence
    when ``fenced`` (parsing a job can open files). Raises
    ``SuiteError`` for the first text fio rejects, in plan order, when ``strict``; else returns
    the rejections as ``FIO`` error findings."""
    texts = list(judged)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(texts), os.cpu_count() or 1))) as pool:
        verdicts = dict(zip(texts, pool.map(lambda text: _verdict(fio, text, fenced), texts), strict=True))
    refused = []
    for text, spec in judged.items():
        problem = verdicts[text]
        if problem and strict:
            raise SuiteError(f"{spec.workload.origin} ({spec.workload.name}): fio rejects the job:\n{problem}",
                             hint="fio option names and values are used verbatim; see `fio --cmdhelp=OPTION`")
        if problem:
            refused.append(lint.Finding("FIO", lint.ERROR, f"fio rejects the job: {problem}",
                                        "fix the option fio names; see `fio --cmdhelp=OPTION`",
                                        "fio --parse-only", (spec.workload.name,)))
    return refused


@once  # per process: a workflow prepares a plan per step, mostly of texts fio has judged
def _verdict(fio: str, text: str, fenced: bool) -> str | None:
    """``runner.local.check_job`` of ``text`` in a directory of its own, fenced when ``fenced``."""
    with tempfile.TemporaryDirectory(prefix="iolab-check-") as tmp:
        workdir = Path(tmp).resolve()
        return local.check_job(text, workdir, fio, fence_mod.Fence(workdir, landlock=False) if fenced else None)


def _pins(suite: Suite, facts: Mapping[str, TargetFacts]) -> dict[str, tuple[int, ...]]:
    """Each target's CPU set for ``pin:`` (empty without pinning). Raises ``SuiteError``."""
    mode = suite.method.pin
    if not mode:
        return {}
    out = {}
    for target in suite.targets:
        f = facts.get(target.name)
        if target.hosts:
            raise SuiteError(f"pin: {mode}: target {target.name} runs on its hosts, and pinning picks this "
                             "machine's CPUs", hint="pin only local targets")
        if f is None or f.device is None:
            raise SuiteError(f"pin: {mode}: target {target.name} is not on a block device, so it has no queues or "
                             "NUMA node to pin to", hint="pin only targets on block devices")
        out[target.name] = pinning.cpus(mode, f.device)
    return out


def _check_method(suite: Suite, spec: JobSpec, facts: TargetFacts | None, remote: bool) -> None:
    """Tuning, preconditioning and drop_caches must be possible here, before anything runs."""
    if remote and (suite.method.precondition is not None or suite.method.drop_caches):
        raise SuiteError(f"target {spec.target.name}: precondition and drop_caches work on local targets only "
                         "(iolab cannot run them on a fio server's host)",
                         hint="precondition the remote hosts with a fill workload before the measured ones")
    if remote and spec.tune:  # the governor too: it is this machine's
        raise SuiteError(f"target {spec.target.name}: tuning ({', '.join(spec.tune)}) sets this machine's block "
                         "queues and CPUs, and this target runs on its hosts",
                         hint="tune the hosts before the run, or tune only local targets")
    try:
        tuning.knobs(spec.tune, device_of(facts))
    except tuning.TuningError as exc:  # asked for what this target cannot have: the plan is refused (exit 2)
        raise PlanRefused(exc.message, hint=exc.hint) from exc
    if suite.method.precondition is not None and not spec.target.path:
        raise SuiteError("precondition: a job file's own files cannot be preconditioned",
                         hint="name the target with --target NAME=PATH")
    if suite.method.drop_caches:
        method_mod.check_drop_caches()


def device_of(facts: TargetFacts | None) -> BlockDeviceFacts | None:
    return facts.device if facts is not None else None


def method_options(plan_: Plan) -> dict[str, Any]:
    """The method settings ``execute`` needs, stored with the run so ``--resume`` has them."""
    m = plan_.suite.method
    return {"pin": m.pin, "pin_cpus": dict(plan_.pins), "drop_caches": m.drop_caches,
            "precondition": to_jsonable(m.precondition) if m.precondition else None,
            "tune": {i.job.spec.workload.name: dict(i.job.spec.tune) for i in plan_.items if i.job.spec.tune}}
