"""Host and target facts of remote hosts, gathered with the system ssh client.

The remote side runs the very code that describes local hosts and targets (``facts.host``,
``facts.targets``), so a remote fact means what a local one means. iolab does not need to be
installed there: the sources of those modules travel with the program that ``python3 -`` reads
from ssh's stdin; they are imported from memory, results go back as JSON on stdout. The remote
host needs ``python3`` (3.9+) and, for device facts, the same tools as a local host (``blkid``,
``wipefs``, read access to the device).

ssh runs with ``BatchMode=yes`` (never a password prompt) and a connect timeout. ``$IOLAB_SSH``
replaces the ``ssh`` command (e.g. ``ssh -F ~/.ssh/lab_config``); users, keys and jump hosts
belong in the ssh configuration. A ``sock:`` host is this machine, so its facts are local. An
``ssh://`` host's facts ride on its run's ssh connection (``remote.sshhost``) when it is open.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import HostError
from ..facts import host as host_mod
from ..facts import targets
from ..model import HostFacts, TargetFacts, from_jsonable
from . import sshagent, sshhost
from .hosts import HostSpec, on_each

#: Seconds gathering one host's facts over ssh may take (connect, run, answer).
GATHER_TIMEOUT_S = 60.0
_MODULES = ("iolab", "iolab.errors", *sshagent.FACTS_MODULES)
#: Those of ``_MODULES`` that are packages (their source is their ``__init__.py``).
_PACKAGES = ("iolab", "iolab.facts")

#: Run after ``sshagent.bundle`` (the sources, imported from memory) with ``PATH`` set.
_BOOTSTRAP = r'''
import dataclasses, json, os

from iolab.facts import host, targets


def plain(obj):
    return None if obj is None else dataclasses.asdict(obj)


result = {"host": plain(host.host_facts(host.fio_version())),
          "target": plain(targets.inspect(PATH)) if PATH else None,
          "listing": sorted(os.listdir(PATH)) if PATH and os.path.isdir(PATH) else None}
print("IOLAB-FACTS " + json.dumps(result))
'''

#: Removes scratch files: ``files`` by path, and in each directory of ``dirs`` (path -> names
#: there before the run) the files fio names ``JOB.N.M`` for one of ``jobs`` (a fio server
#: prefixes its host name: ``10.0.0.11.JOB.N.M``, HOWTO ``filename_format``). Runs on the remote
#: host (sent over ssh like ``_BOOTSTRAP``) or here for a ``sock:`` host.
_REMOVE = r'''
def remove(files, dirs, jobs):
    import os, re
    removed = []
    for path in files:
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            pass
    for directory, before in dirs.items():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in sorted(set(names) - set(before)):
            match = re.fullmatch(r"(.+)\.\d+\.\d+", name)
            stem = match.group(1) if match else ""
            if stem in jobs or any(stem.endswith("." + job) for job in jobs):
                os.unlink(os.path.join(directory, name))
                removed.append(os.path.join(directory, name))
    return removed
'''


@dataclass(frozen=True)
class RemoteFacts:
    """Facts of one host: the machine, the target path on it (None when no path), and the names
    in that path when it is a directory (None otherwise), so that the files fio lays out there
    can be told from those that were there before."""

    host: HostFacts
    target: TargetFacts | None
    listing: tuple[str, ...] | None = None


def ssh_command() -> list[str]:
    """The ssh client command: ``$IOLAB_SSH`` split like a shell would, else ``ssh``."""
    return shlex.split(os.environ.get("IOLAB_SSH") or "ssh")


def program(path: str | None) -> str:
    """The Python program the remote ``python3 -`` runs (sources embedded, no quoting needed)."""
    return f"{sshagent.bundle(_MODULES, _PACKAGES)}PATH = {json.dumps(path)}\n{_BOOTSTRAP}"


def gather(host: HostSpec, path: str | None, timeout_s: float = GATHER_TIMEOUT_S) -> RemoteFacts:
    """Facts of ``host`` and of ``path`` on it. Raises ``HostError`` naming the host and why
    (ssh cannot connect or log in, no python3, the program failed, no answer in time)."""
    if host.kind == "sock":
        facts = host_mod.host_facts(host_mod.fio_version())
        listing = tuple(sorted(os.listdir(path))) if path and os.path.isdir(path) else None
        return RemoteFacts(facts, targets.inspect(path) if path else None, listing)
    connection = sshhost.connection(host) if host.kind == "ssh" else None
    if connection is not None and connection.alive:  # iolab's program there answers: no new session
        data = connection.facts(path, timeout_s)
    else:
        data = _over_ssh(host, program(path), "IOLAB-FACTS ", "gathering facts", timeout_s)
    target = from_jsonable(TargetFacts, data["target"]) if data["target"] else None
    listing = tuple(data["listing"]) if data.get("listing") is not None else None
    return RemoteFacts(from_jsonable(HostFacts, data["host"]), target, listing)


def _over_ssh(host: HostSpec, code: str, marker: str, what: str, timeout_s: float) -> Any:
    """Run ``code`` with the host's ``python3 -`` over ssh; the JSON on its ``marker`` line.
    Raises ``HostError`` naming the host and why (ssh failed, no python3, no answer in time)."""
    connection = sshhost.connection(host) if host.kind == "ssh" else None
    if connection is not None and connection.alive:  # rides on the run's connection: no new login
        argv = [*connection.ssh_args(), sshagent.python_command("-")]
    else:
        argv = [*ssh_command(), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={max(1, int(timeout_s / 4))}",
                *host.ssh_destination, sshagent.python_command("-")]
    hint = ("ssh: true needs ssh without a password prompt (keys, BatchMode) and python3 on the host; "
            "set $IOLAB_SSH for ssh options")
    try:
        proc = subprocess.run(argv, input=code, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise HostError(f"{host}: {what} over ssh took longer than {timeout_s:g} s", hint=hint) from None
    except OSError as exc:
        raise HostError(f"{host}: cannot run ssh ({argv[0]}): {exc.strerror or exc}", hint=hint) from None
    line = next((x for x in proc.stdout.splitlines() if x.startswith(marker)), None)
    if proc.returncode != 0 or line is None:
        said = [x for x in proc.stderr.strip().splitlines() if x.strip()]
        cause = said[-1] if said else f"ssh exited {proc.returncode}"
        raise HostError(f"{host}: {what} over ssh failed: {cause}", hint=hint)
    return json.loads(line.removeprefix(marker))


def remove_scratch(host: HostSpec, files: Sequence[str], directories: Mapping[str, Sequence[str]],
                   jobs: Collection[str], timeout_s: float = GATHER_TIMEOUT_S) -> list[str]:
    """Remove the scratch files a run left on ``host`` (see ``_REMOVE``); returns the paths
    removed. A ``sock:`` host is this machine. Raises ``HostError`` when ssh fails."""
    if host.kind == "sock":
        namespace: dict[str, Any] = {}
        exec(compile(_REMOVE, "<iolab:remove>", "exec"), namespace)
        return list(namespace["remove"](files, dict(directories), set(jobs)))
    code = (f"import json\n{_REMOVE}\nprint('IOLAB-REMOVED ' + json.dumps(remove({json.dumps(list(files))}, "
            f"{json.dumps(dict(directories))}, set({json.dumps(sorted(jobs))}))))\n")
    return list(_over_ssh(host, code, "IOLAB-REMOVED ", "removing scratch files", timeout_s))


def gather_all(hosts: list[HostSpec], path: str | None, timeout_s: float = GATHER_TIMEOUT_S) -> list[RemoteFacts]:
    """``gather`` on every host at once. Raises ``HostError`` naming every host that failed."""
    results = on_each(hosts, lambda h: gather(h, path, timeout_s), timeout_s + 10, "gathering facts")
    errors = [r for r in results.values() if isinstance(r, HostError)]
    if errors:
        raise HostError("\n".join(e.message for e in errors), hint=errors[0].hint)
    return [r for r in results.values() if isinstance(r, RemoteFacts)]
