"""What to run, as frozen dataclasses: a ``Suite`` of ``Target``s and ``Workload``s, a ``JobSpec``
(one workload on one target) and a ``PlannedJob`` (a JobSpec at its place in a run). ``suite`` loads
and validates them; ``matrix`` expands them into a plan; ``render`` writes the job text fio runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..fio.jobfile import Section
from ..remote.hosts import HostSpec
from .method import Method
from .observe import Observe
from .tiers import Tier


@dataclass(frozen=True)
class Target:
    """A named place to run workloads on.

    ``path`` is a file (created when missing), a directory (fio makes its files inside) or a
    block device; ``None`` for a job file that names its own files. ``size`` is a fio size
    (``8g``) used when a workload sets none.

    With ``hosts`` the target is remote: every workload runs on all hosts at once through fio's
    client/server mode, ``path`` being the file, directory or device on each host (absolute;
    a path ending in ``/`` is a directory). ``ssh`` asks iolab to gather host and target facts
    on every host with the system ssh client (``remote.ssh``); an ``ssh://`` host implies it
    (its facts ride on the connection that carries its fio server, ``remote.sshhost``).
    """

    name: str
    path: str | None
    size: str | None = None
    hosts: tuple[HostSpec, ...] = ()
    ssh: bool = False

    def __post_init__(self) -> None:
        if not self.ssh and any(h.kind == "ssh" for h in self.hosts):
            object.__setattr__(self, "ssh", True)


@dataclass(frozen=True)
class Workload:
    """One expanded workload: fio job sections without any location option.

    ``origin`` names where it came from for error messages (``workloads[2]``).
    """

    name: str
    sections: tuple[Section, ...]
    origin: str


@dataclass(frozen=True)
class Suite:
    """A validated suite: what the file said, expanded to concrete workloads."""

    name: str
    source: str
    text: str
    targets: tuple[Target, ...]
    workloads: tuple[Workload, ...]
    repeat: int = 1
    description: str = ""
    is_jobfile: bool = False
    tune: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    method: Method = field(default_factory=Method)
    observe: Observe = field(default_factory=Observe)
    passes: int = 1
    tiers: tuple[Tier, ...] = ()
    #: Lint warnings acknowledged (``lint: {ignore: [P3]}``, ``--ignore-lint``; ``check.acknowledge``).
    lint_ignore: tuple[str, ...] = ()
    #: fio options set for this run over the suite's or job file's (``--set KEY=VALUE``; ``suite.with_sets``).
    overrides: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec:
    """One workload on one target: a single fio invocation (before repetition).

    ``tune`` holds the host settings in force while it runs (``run.tuning``); with a tuning axis
    the workload's name carries the setting (``randread-4k-qd32-sched_none``).
    """

    target: Target
    workload: Workload
    tune: Mapping[str, str] = field(default_factory=dict)

    @property
    def sections(self) -> tuple[Section, ...]:
        return self.workload.sections


@dataclass(frozen=True)
class PlannedJob:
    """A JobSpec at its place in the run: ``seq`` orders the plan, ``repeat`` counts from 0;
    ``pass_index`` is the warm-up pass (1..N) of a suite with ``passes``, 0 without."""

    seq: int
    spec: JobSpec
    repeat: int
    pass_index: int = 0
