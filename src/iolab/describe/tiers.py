"""A suite's cache tiers (``tiers:``, ``--tier NAME=DEVICE[@HOST]``): the devices under a cached
target whose I/Os are counted per job. ``analyze.tiers`` has what the counts mean (the hit ratio)
and how they are read.

    tiers:
      origin: /dev/sdb            # the slow device behind the cache: the hit ratio counts its I/Os
      cache: /dev/nvme0n1p1       # any other tier, counted the same way
      disk: dm-3@nvmet            # DEVICE@HOST: a device on an observed host (``observe:``)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The tier whose I/Os the hit ratio counts.
ORIGIN = "origin"


@dataclass(frozen=True)
class Tier:
    """A named device under the cache: ``device`` as given (``/dev/sdb`` or a kernel name such as
    ``dm-3``), on ``host`` (an observed host's name, ``local``, or None: the target's host)."""

    name: str
    device: str
    host: str | None = None

    @property
    def kernel_name(self) -> str:
        """The device's kernel name (``sdb``, ``dm-3``): a ``/dev`` path resolved here when it
        exists on this machine (``/dev/mapper/vg-lv`` -> ``dm-3``), else its last component."""
        if self.device.startswith("/") and (self.host in (None, "local")) and os.path.exists(self.device):
            return os.path.basename(os.path.realpath(self.device))
        return os.path.basename(self.device)

    def spec(self) -> str:
        return f"{self.device}@{self.host}" if self.host else self.device


def parse_tier(name: str, spec: str) -> Tier:
    """``origin``, ``/dev/sdb`` or ``dm-3@nvmet`` as a Tier. Raises ``ValueError`` saying what is
    wrong."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"{name!r}: a tier name uses letters, digits, '.', '_' and '-'")
    device, at, host = str(spec).partition("@")
    device = device.strip()
    if not device or (at and not host.strip()):
        raise ValueError(f"{name}: expected a block device such as /dev/sdb or sdb, or DEVICE@HOST, got {spec!r}")
    if not device.startswith("/") and "/" in device:
        raise ValueError(f"{name}: {device!r} is neither a /dev path nor a kernel device name")
    return Tier(name, device, host.strip() or None)


def check_tiers(raw: Any) -> tuple[Tier, ...]:
    """A suite's ``tiers:`` mapping (name -> device). Raises ``ValueError`` naming the tier."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ValueError("expected a mapping of tier names to devices, such as {origin: /dev/sdb, cache: /dev/nvme0n1}")
    return tuple(parse_tier(str(name), str(spec)) for name, spec in raw.items())


def stored(tiers: Sequence[Tier]) -> dict[str, str]:
    """The run option ``tiers`` (``from_options`` reads it back)."""
    return {t.name: t.spec() for t in tiers}


def from_options(run_options: Mapping[str, Any]) -> tuple[Tier, ...]:
    return tuple(parse_tier(name, spec) for name, spec in (run_options.get("tiers") or {}).items())


def local_tiers(tiers: Sequence[Tier], remote_target: bool) -> list[Tier]:
    """The tiers on this machine: ``@local`` ones, and those without a host on a local target."""
    return [t for t in tiers if t.host == "local" or (t.host is None and not remote_target)]
