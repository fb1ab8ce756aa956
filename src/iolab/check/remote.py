"""Remote targets before a run: the preflight of their hosts, and the safety rules on what ssh found.

``preflight`` checks every host of a target before anything runs: a fio server answers within
the timeout, and it is the local fio's version (the protocol is version-locked, FIO_NOTES §4.1).
With ``ssh: true`` it also gathers host and target facts on every host (``remote.ssh``); they
decide how the path is given to fio and feed the same safety rules as local targets
(``check_safety``).

Each host is probed once per run: ``preflight`` given what an earlier check of the run found
(``known``, the plan's) returns it, and the job itself (``run.remote.run_job``) sends no probe of
its own. A host lost in a job (``note_lost``) is probed again before its next job
(``recheck_lost``), and left out of it (lost, with the probe's cause) when it still does not
answer. ``unchecked`` is a target nobody contacted (``iolab run --dry-run``).

An ``ssh://`` host is connected first (``remote.sshhost``: one ssh connection per host and run),
must have the local fio's version and, unless ``--no-fence``, a working bubblewrap (fail closed);
its facts are gathered, and its fio server is then started on a Unix socket in the fence of a job that
reads (``host_fence``: a new file or a directory's new files writable, a device or an existing file
only read) and probed through ssh's forwarded socket like any server. Each job restarts it in the
fence of that job's paths when they differ (a job that writes a device or a file, ``--destroy``).
"""

from __future__ import annotations

import posixpath
import re
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache

from ..describe.spec import Target
from ..errors import HostError, SafetyError
from ..model import TargetFacts
from ..remote import hosts as host_specs
from ..remote import protocol, sshhost
from ..remote import ssh as remote_facts
from ..remote.hosts import HostSpec
from ..remote.protocol import ProbeReply
from ..remote.ssh import RemoteFacts
from ..runner import fence as fence_mod
from ..runner import local
from ..units import format_bytes
from . import safety

#: Seconds a host has to answer the preflight probe (connect and reply).
PREFLIGHT_TIMEOUT_S = 5.0
#: A probe answered later than this names its host in the plan: an answer takes milliseconds
#: on a LAN, so this is a loaded, distant or stuck host (or a server that slept, ``protocol``).
SLOW_PROBE_S = 0.25


@dataclass(frozen=True)
class RemoteHost:
    """A host as preflight found it: its server's own description (None: not contacted, a dry
    run), facts with ``ssh``, and ``answer_s``, how long its probe took (connect to reply);
    for an ``ssh://`` host what iolab's program found there (``hello``: fio, the fence tool, its
    directory, how long ssh took to connect and log in)."""

    spec: HostSpec
    server: ProbeReply | None
    facts: RemoteFacts | None = None
    answer_s: float | None = None
    hello: sshhost.Hello | None = None


@dataclass(frozen=True)
class RemoteTarget:
    """A remote target after preflight. ``kind`` is the path's kind on the hosts (``file``,
    ``directory``, ``block``, ``missing``, ``other``); without ssh facts it is ``directory`` for
    a path ending in ``/`` and ``file`` otherwise (fio then gets ``filename=``, right for
    devices too)."""

    target: Target
    hosts: tuple[RemoteHost, ...]
    kind: str
    checked: bool = True

    @property
    def slow(self) -> tuple[RemoteHost, ...]:
        """Hosts whose probe took longer than ``SLOW_PROBE_S``."""
        return tuple(h for h in self.hosts if h.answer_s is not None and h.answer_s > SLOW_PROBE_S)

    @property
    def target_facts(self) -> dict[HostSpec, TargetFacts | None]:
        return {h.spec: h.facts.target if h.facts is not None else None for h in self.hosts}


_lock = threading.Lock()
#: Hosts lost in an earlier job of this process: probed again before their next job.
_lost: set[HostSpec] = set()


def preflight(target: Target, fio: str = "fio", timeout_s: float = PREFLIGHT_TIMEOUT_S,
              known: RemoteTarget | None = None, fio_version: str | None = None, fenced: bool = True) -> RemoteTarget:
    """Check every host of ``target`` (see the module docstring), all at once, each within
    ``timeout_s``. ``fenced`` (not ``--no-fence``) requires bubblewrap on ``ssh://`` hosts.
    ``known`` is what an earlier check of the same run found: it is the answer
    when it checked the same hosts, path and ssh (what a stored run keeps of a target,
    ``target_from_options``) and none of its hosts was lost since. ``fio_version`` is the local
    fio's (``3.33``) when the caller knows it already (each lookup starts fio).

    Raises ``HostError`` listing every host that fails, each with its cause (nothing listens,
    no answer in time, not a fio server, another fio version, ssh failed with ssh's own reason);
    ``SafetyError`` (exit 2, as a local job that cannot be fenced) listing them all when an ``ssh://``
    host cannot fence (no bubblewrap there) or a host's fence refuses.
    """
    if known is not None and known.checked and _where(known.target) == _where(target):
        with _lock:
            if not _lost.intersection(target.hosts):
                return known
    local_version = f"fio-{fio_version or _fio_version(local.find_fio(fio))}"
    version = protocol.local_protocol_version(local.find_fio(fio))
    hellos, found_ssh, problems, refused = _connect_ssh(target, local_version, fenced)
    probed = [h for h in target.hosts if h.kind != "ssh" or h in hellos]
    answers = host_specs.on_each(probed, lambda h: _timed_probe(h, version, timeout_s), timeout_s + 5,
                                 "the probe")
    for spec, answer in answers.items():
        if isinstance(answer, HostError):
            problems.append(answer.message)
        elif answer[0].fio_version != local_version:
            problems.append(f"{spec}: its fio server is {answer[0].fio_version} ({answer[0].hostname}), local fio "
                            f"is {local_version}; client and server must be the same fio")
    if problems:
        ssh_only = all(h.kind == "ssh" for h in target.hosts)
        if refused:  # refused before fio starts, as a local job without a fence is (and trying again will not do)
            raise SafetyError(f"target {target.name}: preflight refused {len(refused)} of {len(target.hosts)} "
                              "host(s):\n  " + "\n  ".join(problems),
                              hint="install bubblewrap on those hosts (apt-get install bubblewrap), or pass "
                                   "--no-fence to run fio there unfenced")
        raise HostError(f"target {target.name}: preflight failed for {len(problems)} of {len(target.hosts)} "
                        "host(s):\n  " + "\n  ".join(problems),
                        hint=sshhost.HINT if ssh_only else "start `iolab server start --bind ADDRESS` (same fio "
                        "version) on each host, or remove the host from the target")
    rest = [h for h in target.hosts if h not in found_ssh]
    gathered = dict(zip(rest, remote_facts.gather_all(rest, target.path), strict=True)) if target.ssh and rest else {}
    found = [found_ssh.get(h) or gathered[h] for h in target.hosts] if target.ssh else None
    hosts = tuple(RemoteHost(spec, answers[spec][0], found[i] if found else None, answers[spec][1],  # type: ignore[index]
                             hellos.get(spec)) for i, spec in enumerate(target.hosts))
    if known is not None and _where(known.target) == _where(target):  # checked again: a host was lost
        hosts = tuple(_laid_out(h, known) for h in hosts)
    with _lock:
        _lost.difference_update(target.hosts)
    return RemoteTarget(target=target, hosts=hosts, kind=_kind(target, hosts))


def _laid_out(host: RemoteHost, known: RemoteTarget) -> RemoteHost:
    """``host`` with its target's facts as the run's first check found them when they said the path
    was missing: the file there now is the one the run laid out (a crash test's, cut and checked
    again after the host came back), which a remote host has no mark of iolab's to tell."""
    before = next((h.facts.target for h in known.hosts if h.spec == host.spec and h.facts is not None), None)
    if before is None or before.kind != "missing" or host.facts is None:
        return host
    return replace(host, facts=replace(host.facts, target=before))


def _connect_ssh(target: Target, local_version: str, fenced: bool
                 ) -> tuple[dict[HostSpec, sshhost.Hello], dict[HostSpec, RemoteFacts], list[str], list[str]]:
    """The ``ssh://`` hosts of ``target`` connected, checked and serving (see the module docstring):
    what each said, the facts it gave, one problem per host that failed, and those of the problems that
    are refusals (no fence can be set up there). Each server starts in
    the fence a job that only reads would have (``host_fence`` without ``--destroy``), so that
    such a job (and a directory target's any job) finds it ready."""
    specs = [h for h in target.hosts if h.kind == "ssh"]
    if not specs:
        return {}, {}, [], []
    problems: list[str] = []
    refused: list[str] = []
    hellos: dict[HostSpec, sshhost.Hello] = {}
    for spec, conn in sshhost.connect_all(specs).items():
        if isinstance(conn, HostError):
            problems.append(conn.message)
            continue
        hello = conn.hello
        assert hello is not None
        if hello.fio_version is None:
            problems.append(f"{spec}: fio is not installed there (apt-get install fio; local fio is {local_version})")
        elif hello.fio_version != local_version:
            problems.append(f"{spec}: its fio is {hello.fio_version} ({hello.hostname}), local fio is "
                            f"{local_version}; client and server must be the same fio")
        elif fenced and hello.fence is None:
            refused.append(f"{spec}: no fence can be set up there: {hello.fence_reason}; iolab runs fio on every "
                           "host where only the checked plan can be written (install bubblewrap there: apt-get "
                           "install bubblewrap, or pass --no-fence to run fio there unfenced)")
            problems.append(refused[-1])
        else:
            hellos[spec] = hello
    found: dict[HostSpec, RemoteFacts] = {}
    for spec, f in host_specs.on_each(list(hellos), lambda h: remote_facts.gather(h, target.path),
                                      remote_facts.GATHER_TIMEOUT_S + 10, "gathering facts").items():
        if isinstance(f, HostError):
            problems.append(f.message)
            hellos.pop(spec)
        else:
            found[spec] = f
    requests = {s: host_fence(target, found[s].target, False, ()) for s in hellos}
    for spec, served in sshhost.serve_all(requests, fenced).items():
        if isinstance(served, HostError):
            problems.append(served.message)
            hellos.pop(spec)
    return hellos, found, problems, refused


def host_fence(target: Target, facts: TargetFacts | None, writes: bool, destroy: Collection[str]
               ) -> tuple[dict[str, str], list[str]]:
    """What an ``ssh://`` host's fence lets fio do with ``target``'s path, from the path's facts on
    that host: ``(writable: path -> why, read: paths)`` for ``remote.sshhost.Connection.serve``.

    fio lays out files even to read them, so a new file or a directory is writable for any job (a
    directory's existing entries stay read-only, ``runner.fence.build``, unless the directory or one
    above it is named with ``--destroy``: then everything in it is writable); a device or an existing
    file is writable only for a job that writes it (the safety rules passed: named with
    ``--destroy``, or laid out by this run), and bound to be read otherwise."""
    if target.path is None:
        return {}, []
    path = remote_path(target.path)
    named = any(path == d or path.startswith(d.rstrip("/") + "/") for d in (remote_path(x) for x in destroy))
    kind = facts.kind if facts is not None else ("directory" if target.path.endswith("/") else "missing")
    if kind == "directory" and named:
        return {path: fence_mod.DESTROY}, []
    if kind in ("missing", "directory"):
        return {path: fence_mod.NEW}, []
    if not writes:
        return {}, [path]
    if kind == "file" and not named:
        return {path: fence_mod.EMPTY if facts is not None and facts.size_bytes == 0 else fence_mod.IOLAB}, []
    return {path: fence_mod.DESTROY}, []


@dataclass(frozen=True)
class HostFence:
    """An ``ssh://`` host's fence as the plan shows it: ``tool`` (None: ``--no-fence``), the places
    fio may write there with why (``path (why)``), the paths it may only read, and fio's work
    directory there (writable, removed when the run ends)."""

    host: str
    tool: str | None
    writable: tuple[str, ...]
    read: tuple[str, ...]
    work: str


def plan_fences(remote: RemoteTarget, writes: bool, destroy: Collection[str], fenced: bool) -> tuple[HostFence, ...]:
    """The fence of each checked ``ssh://`` host of ``remote`` for a plan whose jobs on it write or
    not (``host_fence`` on the facts preflight gathered)."""
    out = []
    for h in remote.hosts:
        if h.hello is None:
            continue
        t = h.facts.target if h.facts is not None else None
        writable, read = host_fence(remote.target, t, writes, destroy)
        directory = t.kind == "directory" if t is not None else (remote.target.path or "").endswith("/")
        places = tuple(f"{p} (new files only: its existing entries are read-only)" if directory and why == fence_mod.NEW
                       else f"{p} ({why})" for p, why in writable.items())
        out.append(HostFence(h.spec.label, h.hello.fence if fenced else None, places, tuple(read),
                             f"{h.hello.directory}/work"))
    return tuple(out)


@cache
def _fio_version(fio_path: str) -> str:
    """``runner.local.fio_version`` once per fio binary: the plan has just asked (``fio --version``)."""
    return local.fio_version(fio_path)


def _where(target: Target) -> tuple[tuple[HostSpec, ...], str | None, bool]:
    return target.hosts, target.path, target.ssh


def _timed_probe(host: HostSpec, version: int, timeout_s: float) -> tuple[ProbeReply, float]:
    started = time.monotonic()
    reply = protocol.probe(host, version, timeout_s)
    return reply, time.monotonic() - started


def unchecked(target: Target) -> RemoteTarget:
    """``target`` as a plan shows it without contacting its hosts: no server answers, no facts,
    the path's kind from its spelling."""
    hosts = tuple(RemoteHost(spec, None) for spec in target.hosts)
    return RemoteTarget(target=target, hosts=hosts, kind=_kind(target, hosts), checked=False)


def recheck_lost(hosts: Sequence[HostSpec], fio: str) -> dict[HostSpec, str]:
    """Probe those of ``hosts`` lost in an earlier job (``note_lost``) again, at once: those that still
    do not answer, each with the cause (host -> why)."""
    with _lock:
        hosts = [h for h in hosts if h in _lost]
    if not hosts:
        return {}
    version = protocol.local_protocol_version(local.find_fio(fio))
    answers = protocol.probe_all(list(hosts), version, PREFLIGHT_TIMEOUT_S)
    return {spec: f"lost in an earlier job, and {a.message.removeprefix(f'{spec}: ')}"
            for spec, a in answers.items() if isinstance(a, HostError)}


def note_lost(lost: Mapping[HostSpec, bool]) -> None:
    """What a job found of each of its hosts: lost (True; probed again before its next job and by
    ``preflight``) or answering (False)."""
    with _lock:
        for spec, gone in lost.items():
            (_lost.add if gone else _lost.discard)(spec)


def _kind(target: Target, hosts: Sequence[RemoteHost]) -> str:
    kinds = {h.spec.label: h.facts.target.kind for h in hosts if h.facts is not None and h.facts.target is not None}
    if not kinds:
        return "directory" if (target.path or "").endswith("/") else "file"
    if len({k == "directory" for k in kinds.values()}) > 1:
        listing = ", ".join(f"{h}: {k}" for h, k in kinds.items())
        raise HostError(f"target {target.name}: {target.path} is a directory on some hosts and not on others "
                        f"({listing})")
    return "block" if "block" in kinds.values() else next(iter(kinds.values()))


def remote_path(path: str) -> str:
    """A path on another host as that host's kernel resolves its spelling, without asking it:
    repeated slashes collapsed, ``.``/``..`` resolved, and ``/proc/self/root``,
    ``/proc/thread-self/root`` and ``/proc/PID/root`` prefixes (the root again) dropped, so
    ``//dev/loop0`` and ``/proc/self/root/dev/loop0`` are ``/dev/loop0``."""
    path = "/" + "/".join(p for p in path.split("/") if p)
    path = posixpath.normpath(path)
    while True:
        stripped = re.sub(r"^/proc/(?:self|thread-self|\d+)/root(?=/|$)", "", path)
        if stripped == path:
            return path
        path = posixpath.normpath(stripped or "/")


def check_safety(target: Target, target_facts: Mapping[HostSpec, TargetFacts | None], writes: bool,
                 destroy: Collection[str], needed_bytes: int, files: bool = True) -> None:
    """The local safety rules, host by host, on the facts ssh gathered.

    A job that writes a remote block device needs ``ssh: true`` (without facts iolab cannot
    check the device, and not knowing is not clean) and ``--destroy PATH`` naming the target's
    path (device numbers mean nothing across hosts): paths are compared as resolved
    (``remote_path``), and a ``--destroy`` path that is the device ssh found under the target
    names it too. Files need room on every host. With ``files`` (the plan's check, not the one
    right before each job, which would find the files the run's earlier jobs laid out), an existing
    file with data is written only when named with ``--destroy``: a remote host has no marks of
    iolab's (``runner.marks``). Raises ``SafetyError`` naming the host.
    """
    path = remote_path(target.path or "/")
    named_paths = {remote_path(d) for d in destroy}
    named = path in named_paths
    without_facts = [h for h in target.hosts if target_facts.get(h) is None]
    if writes and without_facts and path.startswith("/dev/"):
        raise SafetyError(
            f"refusing to write to {path} on the hosts of target {target.name}: iolab cannot check a remote "
            "device for data without ssh" + ("" if named else ", and it is not named with --destroy"),
            hint=f"add `ssh: true` to the target so iolab checks the device on every host, and pass --destroy {path}",
        )
    for spec, facts in target_facts.items():
        if facts is None:
            continue
        try:
            above = any(path.startswith(d.rstrip("/") + "/") for d in named_paths)  # a directory named
            if writes and files and facts.kind == "file" and (facts.size_bytes or 0) > 0 and not (named or above):
                raise SafetyError(
                    f"refusing to write to {path}: it is an existing file with {format_bytes(facts.size_bytes or 0)} "
                    "of data, and it is not named with --destroy",
                    hint=f"if its contents may be destroyed, add --destroy {path} (or name its directory); to keep "
                         "it, point the target at a file that does not exist yet, or at a directory")
            if writes:
                device = facts.device.path if facts.device is not None else None
                safety.check_block_write(facts, destroy, named=named or device in named_paths)
            safety.check_free_space(facts, needed_bytes)
        except SafetyError as exc:
            raise SafetyError(f"{spec}: {exc.message}", hint=exc.hint) from None


