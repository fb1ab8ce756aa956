"""The method around each job of a run, as its stored settings say: the tuning in force, the
preconditioning of each region (a fill once per run, rounds until steady state), drop_caches,
and the devices whose counters are read around the job (``tiers``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..check import guard
from ..describe import tiers as tier_specs
from ..describe.method import Precondition
from ..errors import IolabError
from ..model import FioReport, ResultRecord, TargetFacts
from ..runner import local
from ..runner.outcome import Outcome
from . import method as method_mod
from . import scratch as scratch_mod
from .plan import RunOptions
from .spool import Spool

if TYPE_CHECKING:
    from ..store.database import Store


def _run_fio(job_text: str, options: RunOptions, spool: Spool, target_path: str | None) -> Outcome:
    """fio for a method step (preconditioning: a fill or a round on the target), fenced like every job,
    in the run's spool (removed by ``--resume`` after a kill)."""
    workdir = spool.workdir("precondition")
    try:
        with guard.fenced_job(job_text, target_path, options.destroy, workdir, fenced=options.fence,
                              allow_exec=options.allow_exec, where="precondition", writes=True,
                              run=options.run) as job:
            return local.run(job_text, workdir, fio=options.fio, cwd=Path.cwd(), fence=job.fence)
    finally:
        spool.remove("precondition")


class JobMethod:
    """The run's stored method settings (``method_options``), applied around each job.

    A region's preconditioning fill is done once per run: each finished fill is stored with the
    run's options (``filled``) the moment it ends, so ``--resume`` after a kill does not fill
    again what was filled before.
    """

    def __init__(self, store: Store, run_id: int, run_options: Mapping[str, Any], options: RunOptions,
                 spool: Spool) -> None:
        self.store, self.run_id, self.run_options, self.spool = store, run_id, dict(run_options), spool
        self.stored = run_options.get("method") or {}
        self.options = options
        pre = self.stored.get("precondition")
        self.precondition = Precondition(**pre) if pre else None
        self.writes = self.precondition is not None
        self.filled: set[tuple[str, str]] = {(p, w) for p, w in run_options.get("filled", ())}
        self._region: tuple[str, str] | None = None
        self.tiers = tier_specs.from_options(run_options)

    def tune(self, workload: str) -> dict[str, str]:
        return dict((self.stored.get("tune") or {}).get(workload) or {})

    def counted_devices(self, facts: TargetFacts | None, remote: bool) -> dict[str, str]:
        """The devices on this machine whose counters are read around the job (``tiers``): tier
        name -> kernel name of each local tier, and the target's own device (``target``) when it is
        a device-mapper or bcache device, which may be a cache with counters of its own."""
        out = {t.name: t.kernel_name for t in tier_specs.local_tiers(self.tiers, remote)}
        device = facts.device if facts is not None else None
        if device is not None and device.name.startswith(("dm-", "bcache")) and device.name not in out.values():
            out["target"] = device.name
        return out

    def record(self, result: ResultRecord, in_force: Mapping[str, str]) -> dict[str, Any]:
        """What is in force for this job: tuning values (all of them) and the pinned CPUs."""
        out: dict[str, Any] = {}
        if in_force:
            out["tuning"] = {"requested": self.tune(result.workload), "in_force": dict(in_force)}
        cpus = (self.stored.get("pin_cpus") or {}).get(result.target)
        if cpus:
            out["pin"] = {"mode": self.stored.get("pin"), "cpus": cpus}
        return out

    def before(self, result: ResultRecord, facts: TargetFacts | None, note: Callable[[str], None]) -> dict[str, Any]:
        """Preconditioning, then dropping caches; returns their records for ``extra``. A warm-up's
        later passes get neither: they measure what the earlier passes left in the caches."""
        out: dict[str, Any] = {}
        if (result.extra or {}).get("pass", 0) > 1:
            return out
        kind = facts.kind if facts is not None else None
        if self.precondition is not None and result.target_path is not None:
            self._region = (result.target_path, result.workload if kind == "directory" else "")
            out["precondition"] = method_mod.precondition(
                result.job_text, kind, self.precondition, fill=self._region not in self.filled, run_fio=self._fio,
                note=note)
        if self.stored.get("drop_caches"):
            out["drop_caches"] = method_mod.drop_caches(scratch_mod.target_files(result, kind))
            if not out["drop_caches"]["verified"]:
                note("drop_caches: the target's pages are still cached after dropping")
        return out

    def _fio(self, label: str, job_text: str) -> FioReport:
        outcome = _run_fio(job_text, self.options, self.spool,
                           self._region[0] if self._region is not None else None)
        if outcome.status != "ok" or outcome.report is None:
            raise IolabError(f"precondition {label} failed: {outcome.error or 'no fio report'}")
        if label == "fill" and self._region is not None:
            self.filled.add(self._region)
            self.run_options["filled"] = sorted(self.filled)
            self.store.update_run(self.run_id, options=self.run_options)
        return outcome.report
