"""Remote targets in a run: one job on all hosts at once, each host's part as stored, the scratch
files a run leaves on them, and a remote target as a stored run keeps it.

``run_job`` runs one job on all hosts (``remote.client``) and describes each host's part for
the store: ``extra["hosts"]`` of the result holds one ``HostRecord`` per host (``host_records``
reads them back). Before it, a host lost in an earlier job is probed again and left out of the
job (lost, with the probe's cause) when it still does not answer (``check.remote``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import units
from ..check import remote as preflight
from ..check import safety
from ..check.remote import RemoteTarget
from ..describe.spec import Target
from ..errors import HostError
from ..fio import jobfile
from ..model import HostFacts, ResultRecord, TargetFacts, from_jsonable, to_jsonable
from ..remote import client, sshhost
from ..remote import hosts as host_specs
from ..remote import ssh as remote_facts
from ..remote.hosts import HostSpec
from ..remote.ssh import RemoteFacts
from ..runner.outcome import Outcome

#: The bound of a remote job whose duration fio decides (no ``runtime``): one hour.
DEFAULT_BOUND_S = 3600.0


@dataclass(frozen=True)
class HostRecord:
    """One host's part of a stored result (``extra["hosts"]``): ``status`` ``ok``, ``failed`` or
    ``lost``; ``error`` names the cause; ``server`` is what the fio server said about itself;
    ``facts``/``target_facts`` come from ssh (None without); ``fence`` where an ``ssh://`` host's
    fence let fio write (its places, then fio's work directory there; None: unfenced or not an
    ``ssh://`` host)."""

    host: str
    status: str
    error: str | None = None
    server: Mapping[str, Any] | None = None
    facts: HostFacts | None = None
    target_facts: TargetFacts | None = None
    fence: list[str] | None = None


def time_bound_s(sections: Sequence[jobfile.Section], slack_s: float) -> float:
    """How long a remote job may take: twice its ``ramp_time + runtime`` plus ``slack_s``
    (file layout, startup), or ``DEFAULT_BOUND_S`` when a job has no ``runtime``. A remote job
    always has a bound: a lost host must never hang a run."""
    longest = 0.0
    for _, opts in jobfile.effective_jobs(sections):
        runtime = opts.get("runtime") or opts.get("timeout")
        if not runtime:
            return DEFAULT_BOUND_S + slack_s
        longest = max(longest, (units.parse_duration_us(runtime)
                                + units.parse_duration_us(opts.get("ramp_time") or "0")) / 1e6)
    return longest * 2 + slack_s


def run_job(job_text: str, target: Target, workdir: Path, fio: str, destroy: Collection[str], timeout_s: float,
            on_status: Callable[[client.HostStatus], None] | None = None, extra_args: Sequence[str] = (),
            before_start: Callable[[Mapping[str, str]], None] | None = None, fenced: bool = True) -> Outcome:
    """Run one job on every host of ``target`` at once (``remote.client.run``; ``extra_args`` and
    ``before_start`` pass through to it); each host's ``HostRecord`` goes into ``Outcome.extra["hosts"]``.

    With ``ssh`` the facts are gathered again first (stored with the result) and a job that
    writes is checked against them, as a local job is right before fio starts (raises
    ``SafetyError``). A host whose facts cannot be gathered takes part all the same; the
    failure is in its record. An ``ssh://`` host's fio server is (re)started in the fence of this
    job's paths (``check.remote.host_fence``; unfenced when not ``fenced``), its connection opened
    again when it was lost; a host where that fails is left out of the job, lost with the cause.
    """
    found: dict[HostSpec, RemoteFacts | str] = {}
    if target.ssh:  # on every host at once, as preflight does
        gathered = host_specs.on_each(target.hosts, lambda spec: remote_facts.gather(spec, target.path),
                                      remote_facts.GATHER_TIMEOUT_S + 10, "gathering facts")
        found = {spec: f.message if isinstance(f, HostError) else f for spec, f in gathered.items()}
    sections = jobfile.parse(job_text)
    writes = any(safety.opens_for_write(o) for _, o in jobfile.effective_jobs(sections))  # as the local guard
    if target.ssh and writes:
        fresh = {s: f.target if isinstance(f, RemoteFacts) else None for s, f in found.items()}
        preflight.check_safety(target, fresh, True, destroy, 0, files=False)
    unreachable = preflight.recheck_lost([h for h in target.hosts if h.kind != "ssh"], fio)
    unreachable.update(_serve_ssh(target, found, writes, destroy, fenced))
    outcome = client.run(job_text, list(target.hosts), workdir, on_status, fio=fio, timeout_s=timeout_s,
                         extra_args=extra_args, before_start=before_start, unreachable=unreachable)
    preflight.note_lost({spec: host.status == "lost" for spec, host in zip(target.hosts, outcome.hosts, strict=True)})
    fences = {spec: _fence_of(spec) for spec in target.hosts if spec.kind == "ssh" and spec not in unreachable}
    notes = [f"{host.host}: a write the fence stops fails the job; there fio may write only: "
             f"{', '.join(fences[spec] or ())}" + _fence_hint(fences[spec] or ())
             for spec, host in zip(target.hosts, outcome.hosts, strict=True)
             if host.status == "failed" and fences.get(spec)]
    if notes:
        outcome = replace(outcome, error="\n".join([*([outcome.error] if outcome.error else []), *notes]))
    records = []
    for spec, host in zip(target.hosts, outcome.hosts, strict=True):
        f = found.get(spec)
        error = host.error
        if isinstance(f, str):
            error = f"{error}\n{f}" if error else f
        records.append(HostRecord(
            host=host.host, status=host.status, error=error,
            server=dict(host.server) if host.server else None,
            facts=f.host if isinstance(f, RemoteFacts) else None,
            target_facts=f.target if isinstance(f, RemoteFacts) else None,
            fence=fences.get(spec),
        ))
    return replace(outcome, extra={**outcome.extra, "hosts": [to_jsonable(r) for r in records]})


def _fence_hint(places: Sequence[str]) -> str:
    """What to do when a directory's existing files were read-only (fio writes in place the files an
    earlier or killed run left there, which are not new)."""
    kept = [p.split(" (new files only")[0] for p in places if "(new files only" in p]
    return (f" (files already in {', '.join(kept)}, e.g. left by an earlier or killed run, are read-only: remove "
            f"them, or name the directory with --destroy {kept[0]})") if kept else ""


def _fence_of(spec: HostSpec) -> list[str] | None:
    """Where the fence of ``spec``'s fio server lets fio write (None: unfenced, or no server)."""
    conn = sshhost.connection(spec)
    serving = conn.serving if conn is not None else None
    if serving is None or serving.places is None:
        return None
    return [*serving.places, f"{serving.work} (iolab's work directory)"]


def _serve_ssh(target: Target, found: Mapping[HostSpec, RemoteFacts | str], writes: bool,
               destroy: Collection[str], fenced: bool) -> dict[HostSpec, str]:
    """The fio servers of ``target``'s ``ssh://`` hosts, each in this job's fence; the hosts where
    that failed, with why. Raises ``SafetyError`` when a host's fence refuses the plan."""
    specs = [h for h in target.hosts if h.kind == "ssh"]
    if not specs:
        return {}
    failed: dict[HostSpec, str] = {}
    for spec, conn in sshhost.connect_all(specs).items():
        if isinstance(conn, HostError):
            failed[spec] = conn.message.removeprefix(f"{spec}: ")
    requests = {}
    for spec in specs:
        if spec not in failed:
            f = found.get(spec)
            requests[spec] = preflight.host_fence(target, f.target if isinstance(f, RemoteFacts) else None, writes,
                                                  destroy)
    for spec, served in sshhost.serve_all(requests, fenced).items():
        if isinstance(served, HostError):
            failed[spec] = served.message.removeprefix(f"{spec}: ")
    return failed


def scratch(remote: RemoteTarget) -> dict[str, dict[str, Any]]:
    """What a run of ``remote`` lays out on each host and must remove afterwards, by host label:
    ``{"host": fio's host spec, "files": [path], "dirs": {path: names there before}}``. Known only
    from ssh facts (without them iolab cannot tell a file it creates from one that was there):
    a path that does not exist yet is a scratch file; in a directory, the files fio names
    ``[HOST.]JOB.N.M`` that were not there before."""
    out = {}
    for h in remote.hosts:
        t = h.facts.target if h.facts is not None else None
        if t is None or remote.target.path is None:
            continue
        if t.kind == "missing":
            out[h.spec.label] = {"host": h.spec.fio_arg, "files": [remote.target.path], "dirs": {}}
        elif t.kind == "directory" and h.facts is not None and h.facts.listing is not None:
            out[h.spec.label] = {"host": h.spec.fio_arg, "files": [],
                                 "dirs": {remote.target.path: list(h.facts.listing)}}
    return out


def remove_scratch(stored: Mapping[str, Mapping[str, Any]], jobs: Collection[str]) -> list[str]:
    """Remove what ``scratch`` listed (``remote.ssh.remove_scratch``) on every host at once;
    returns one problem per host where that failed (the files stay there)."""
    specs = {host_specs.parse(entry["host"]): entry for entry in stored.values()}
    done = host_specs.on_each(list(specs), lambda spec: remote_facts.remove_scratch(
        spec, specs[spec]["files"], specs[spec]["dirs"], jobs), remote_facts.GATHER_TIMEOUT_S + 10,
        "removing scratch files")
    return [r.message for r in done.values() if isinstance(r, HostError)]


def host_records(result: ResultRecord) -> tuple[HostRecord, ...]:
    """The per-host records of a remote result (empty for a local one)."""
    return tuple(from_jsonable(HostRecord, r) for r in (result.extra or {}).get("hosts", ()))


def target_from_options(name: str, path: str | None, run_options: Mapping[str, Any]) -> Target | None:
    """The remote target ``name`` of a stored run (``run_options["remote"]``, written by
    ``execute.start``), or None when the target is local."""
    stored = (run_options.get("remote") or {}).get(name)
    if stored is None:
        return None
    return Target(name, path, hosts=tuple(host_specs.parse(h) for h in stored["hosts"]), ssh=bool(stored["ssh"]))


def stored_options(targets: Sequence[Target]) -> dict[str, Any]:
    """What ``target_from_options`` needs, for the run's stored options."""
    return {t.name: {"hosts": [h.fio_arg for h in t.hosts], "ssh": t.ssh} for t in targets if t.hosts}
