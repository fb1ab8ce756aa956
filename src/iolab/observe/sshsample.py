"""An ``ssh://`` host observed without node_exporter: its /proc and /sys read over the run's ssh connection.

iolab's program on the host (``remote.sshagent``, started once per host and run, ``remote.sshhost``)
answers each ``sample`` request with the host's ``/proc/stat``, ``/proc/diskstats``, ``/proc/net/dev``,
its interfaces' ``/sys/class/net/*/speed``, ``SC_CLK_TCK`` and ``uname``: no other ssh session, so no
other login (and no other run of the login shell's start-up files). iolab asks on the observer's own
schedule (``sampler``: once a second), so a sample's time is the middle of its request, as for an
exporter's scrape; the texts are reduced by the very function that reduces this host's
(``local.reduce``), so CPU µs per I/O, NIC and device columns mean the same for every host. A host
whose connection is gone (dropped, or being opened again) leaves a gap.
"""

from __future__ import annotations

from typing import Any

from ..errors import HostError
from ..model import HostFacts
from ..remote import hosts as host_specs
from ..remote import sshhost
from . import local
from .exporter import NodeFacts, Scrape

#: ``HostSamples.source`` of an ``ssh://`` host's samples.
SOURCE = "/proc and /sys over ssh (iolab)"


def is_ssh(address: str) -> bool:
    """Whether an endpoint's address is an ``ssh://`` host (sampled here, not scraped)."""
    return address.startswith("ssh://")


def _answer(address: str, timeout_s: float) -> dict[str, Any]:
    spec = host_specs.parse(address)
    conn = sshhost.connection(spec)
    if conn is None:
        raise HostError(f"{spec}: no ssh connection to sample over")
    data = conn.sample(timeout_s)
    if data.get("stat") is None:
        raise HostError(f"{spec}: cannot read /proc/stat there")
    return data


def scrape(address: str, timeout_s: float) -> Scrape:
    """One reduced sample of the ``ssh://`` host ``address`` (see the module docstring). Raises
    ``HostError`` (no connection, no answer in time, the session ended)."""
    data = _answer(address, timeout_s)
    return local.reduce(data["stat"], data.get("diskstats") or "", data.get("netdev") or "",
                        dict(data.get("speeds") or {}), float(data["hz"]))


def facts(address: str, timeout_s: float) -> NodeFacts:
    """What a sample says of the host itself (name, kernel, CPUs), for the plan. Raises ``HostError``."""
    data = _answer(address, timeout_s)
    return NodeFacts(HostFacts(hostname=data.get("host"), kernel=data.get("kernel"), cpu_count=data.get("cpus")))
