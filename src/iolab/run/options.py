"""How a run runs (``RunOptions``), in a module of its own: the CLI builds it while it parses a command's
options, before the plan's modules (``run.plan``, re-exported there) are needed, so that ``iolab run``
can start its ssh logins (``remote.sshhost.connect_soon``) while those import."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    """How to run: ``destroy`` names block devices the user allows iolab to overwrite; ``fence``
    runs every local fio inside the fence (``runner.fence``; False only with ``--no-fence``);
    ``allow_exec`` lets jobs run programs (``exec_prerun`` ...), inside the fence; ``run`` is the key
    of the run being executed (``runner.marks.run_key``, set by ``execute``): its own ``writing``
    marks count for it (a ``--resume`` after a kill), and its marks say it laid a file out."""

    destroy: Collection[str] = ()
    keep_files: bool = False
    fio: str = "fio"
    fence: bool = True
    allow_exec: bool = False
    run: str | None = None
