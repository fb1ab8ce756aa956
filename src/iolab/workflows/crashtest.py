"""Power-cut and crash tests with fio's own machinery: write, cut, wait, verify, repeat.

Each cut is three stored results of one run (``workflows.prober.Prober``, so each is planned, checked by the
destructive-write guard and run through ``run.execute``; ``run.crashphase`` does what fio needs around it):

1. **wipe** (``crash-wipe``): the region is overwritten with zeros (``rw=write bs=1m zero_buffers``).
   fio 3.33's verify-only phase cannot tell a block left from an earlier cut from the one it expects
   at the same offset: for a job that is not ``rw``/``randrw`` it takes the header's ``rand_seed`` as
   the expected one, and it skips the write-sequence number (``verify_io_u()``/``verify_header()`` in
   ``verify.c``), so stale data verifies. Zeros cannot: a lost write reads back with magic 0.
   ``--no-wipe`` skips it for regions too large to rewrite each cut, and the report says so.
2. **write** (``crash-write``): the workload with ``verify=crc32c`` (or the user's stronger checksum),
   ``do_verify=0`` and ``verify_state_save=1``, a different random sequence each cut (``seed``), and fio's trigger
   options: at ``--trigger-timeout`` (whole seconds since fio started) or when ``--trigger-file``
   appears, fio saves its verify state, stops the jobs and runs ``--trigger`` here and, through a fio
   server, ``--trigger-remote`` on each host (FIO_NOTES §5.3). The commands are the user's: a PDU,
   IPMI or hypervisor power-off, or a test's kill.
3. **wait**: ``settle_s`` seconds (a power-off takes time to act), then until every fio server
   answers its probe again (a local target: until its path exists), at most ``wait_timeout_s``.
4. **verify** (``crash-verify``): the same job and seed with ``verify_only=1``,
   ``verify_state_load=1`` (the state saved at the cut), ``verify_state_save=0`` (fio would otherwise
   overwrite it with the verify-only run's own) and ``continue_on_error=verify``, so that every bad
   block is reported, not only the first; ``thread`` keeps fio's per-block messages out of its JSON
   (a forked job writes them into the same output file unsynchronised).

The outcome of a cut (``cut_outcomes``, pure over the stored run): writes issued before the cut (fio's
verify state), writes fio checked (the verify phase's reads: the issued writes fio recorded as
complete, https://github.com/axboe/fio/issues/1440 leaves the last few out), blocks that read back as
never written (lost) or with other content (corrupt), each with its offset, and the verdict. Over the
cuts, ``loss_rate``: the share of cuts that lost an acknowledged write, with its Wilson interval.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import stats, units
from ..errors import HostError, UsageError
from ..model import ResultRecord, Run
from ..run import crashphase
from ..run.crashphase import Phase

if TYPE_CHECKING:
    from ..describe.spec import Target
    from .prober import Prober

#: The workload unless the user says otherwise (fio options, verbatim).
DEFAULT_OPTIONS = {"rw": "randwrite", "bs": "4k", "ioengine": "libaio", "direct": "1", "iodepth": "8",
                   "verify": "crc32c"}
#: fio's verify checksums that are crc32c or stronger (HOWTO ``verify``).
STRONG_VERIFY = ("crc32c", "crc32c-intel", "crc64", "md5", "sha1", "sha256", "sha512", "sha3-224", "sha3-256",
                 "sha3-384", "sha3-512", "xxhash")
#: The fio job name of the write and verify phases: fio names the state files after it.
JOB = "crash"
#: Options iolab sets itself for the phases.
OWN = ("do_verify", "verify_only", "verify_state_save", "verify_state_load", "continue_on_error", "time_based",
       "runtime", "name", "thread")
#: The first cut's randseed when the user sets none; cut k uses the seed + k − 1.
DEFAULT_SEED = 3141
#: Lint warnings about measuring that do not concern a crash test's phases, which measure nothing:
#: P4 (no ramp_time); the wipe also waives P5 (its zeros are the point).
OWN_WARNINGS = ("P4",)


class CutVerdict(enum.StrEnum):
    """What became of one cut (``cut_outcomes``)."""

    INTACT = "intact"
    LOST = "lost"
    NO_CUT = "no cut"
    FAILED = "failed"


@dataclass(frozen=True)
class Settings:
    """How to cut: ``cuts`` times, at ``trigger_timeout`` (fio's whole seconds) or when
    ``trigger_file`` appears; ``trigger`` runs here, ``trigger_remote`` on each fio server; then
    ``settle_s`` and at most ``wait_timeout_s`` for the hosts to come back; ``wipe`` the region first."""

    cuts: int = 1
    trigger_timeout: str | None = None
    trigger_file: str | None = None
    trigger: str | None = None
    trigger_remote: str | None = None
    settle_s: float = 0.0
    wait_timeout_s: float = 600.0
    wipe: bool = True

    def trigger_args(self) -> tuple[str, ...]:
        """fio's trigger options for a write phase, but the local ``--trigger`` (``run.crashphase``)."""
        args: tuple[str, ...] = ()
        if self.trigger_timeout:
            args += (f"--trigger-timeout={int(units.parse_duration_us(self.trigger_timeout) // 1_000_000)}",)
        if self.trigger_file:
            args += (f"--trigger-file={self.trigger_file}",)
        if self.trigger_remote:
            args += (f"--trigger-remote={self.trigger_remote}",)
        return args


def check(settings: Settings, options: Mapping[str, str], remote: bool) -> None:
    """Refuse what cannot give a verified crash test, before anything runs. Raises ``UsageError``."""
    if settings.cuts < 1:
        raise UsageError(f"--cuts {settings.cuts}: at least one cut")
    if not settings.trigger_timeout and not settings.trigger_file:
        raise UsageError("when should the cut happen? give --trigger-timeout DURATION or --trigger-file PATH")
    if not settings.trigger and not settings.trigger_remote:
        raise UsageError("nothing would cut: at the trigger fio only saves its verify state and stops writing, "
                         "which tests a clean stop, not a power cut, and every cut would verify as intact",
                         hint="give --trigger CMD (run here: a PDU, IPMI or hypervisor power-off) or "
                         "--trigger-remote CMD (run on each fio server's host)")
    if settings.trigger_timeout:
        try:
            seconds = units.parse_duration_us(settings.trigger_timeout) / 1e6
        except ValueError as exc:
            raise UsageError(f"--trigger-timeout {settings.trigger_timeout!r}: {exc}") from None
        if seconds < 1:
            raise UsageError("--trigger-timeout: fio counts whole seconds; give at least 1s")
    if settings.trigger_remote and not remote:
        raise UsageError("--trigger-remote runs on fio servers: give the target's hosts (--host)")
    set_by_user = sorted(k for k in OWN if k in options)
    if set_by_user:
        raise UsageError(f"{', '.join(set_by_user)}: the crash test sets these itself")
    if options.get("verify") not in STRONG_VERIFY:
        raise UsageError(f"verify={options.get('verify')}: a crash test needs a checksum, crc32c or stronger "
                         f"({', '.join(STRONG_VERIFY)})")
    rw = options.get("rw") or options.get("readwrite") or "read"
    if rw.split(":")[0] not in ("write", "randwrite"):
        raise UsageError(f"rw={rw}: a crash test writes (write or randwrite); fio replays that sequence to verify")
    if "norandommap" in options and int(options.get("iodepth") or 1) > 1:
        raise UsageError("norandommap with iodepth > 1 gives false verify failures (fio HOWTO verify; lint P14)")


def seed(options: Mapping[str, str], cut: int) -> dict[str, str]:
    """Cut ``cut``'s random sequence: its own ``randseed``, and ``randrepeat=0`` — with fio's default
    ``randrepeat=1`` fio 3.33 draws the block offsets from a fixed seed whatever ``randseed`` says
    (``init.c`` ``td_fill_rand_seeds_internal``; seen: cuts 1 and 2 wrote the same offsets), and the
    loss rate's interval assumes independent cuts. The verify phase draws the same sequence again."""
    return {"randseed": str(int(options.get("randseed") or DEFAULT_SEED) + cut - 1), "randrepeat": "0"}


def write_options(options: Mapping[str, str], cut: int) -> dict[str, str]:
    return {**options, **seed(options, cut), "do_verify": "0", "verify_state_save": "1"}


def verify_options(options: Mapping[str, str], cut: int) -> dict[str, str]:
    return {**options, **seed(options, cut), "verify_only": "1", "verify_state_load": "1",
            "verify_state_save": "0", "continue_on_error": "verify", "thread": "1"}


def wipe_options(options: Mapping[str, str]) -> dict[str, str]:
    """Zeros over the workload's region: its size and offset, sequential 1 MiB direct writes."""
    region = {k: options[k] for k in ("size", "offset", "filesize", "nrfiles") if k in options}
    return {"rw": "write", "bs": "1m", "ioengine": options.get("ioengine", "libaio"), "direct": "1",
            "iodepth": "4", "zero_buffers": "1", **region}


Wait = Callable[["Target", Settings, Callable[[str], None]], float]


def wait_for_target(target: Target, settings: Settings, note: Callable[[str], None],
                    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                    fio: str = "fio") -> float:
    """Wait ``settle_s``, then until the target is back: every host of a remote target answers (a
    fio server its probe, an ``ssh://`` host over ssh), a local target's path exists again. Returns
    the seconds waited. Raises ``HostError`` naming what did not come back within ``wait_timeout_s``."""
    from ..remote import protocol  # here: reading a crash test's results needs neither fio nor the network
    from ..runner import local
    start = clock()
    if settings.settle_s > 0:
        note(f"waiting {settings.settle_s:g} s for the cut to take effect")
        sleep(settings.settle_s)
    deadline = start + settings.settle_s + settings.wait_timeout_s
    version = protocol.local_protocol_version(local.find_fio(fio)) if target.hosts else 0
    told = False
    while True:
        missing = _missing(target, version)
        if not missing:
            return clock() - start
        if clock() > deadline:
            raise HostError(f"after the cut, {'; '.join(missing)} did not come back within "
                            f"{settings.wait_timeout_s:g} s", hint="raise --wait-timeout, or check the trigger")
        if not told:
            note(f"waiting for {', '.join(missing)} to come back")
            told = True
        sleep(0.5)


def _missing(target: Target, version: int) -> list[str]:
    """What is not back yet: fio servers that do not answer, ``ssh://`` hosts that do not (iolab
    starts their fio server again for the next job), or a local path that does not exist."""
    if not target.hosts:
        path = target.path or ""
        try:
            os.stat(path)
        except OSError:
            return [path]
        return []
    from ..remote import protocol, sshhost
    from ..remote.hosts import on_each
    served = [spec for spec in target.hosts if spec.kind != "ssh"]
    ssh = [spec for spec in target.hosts if spec.kind == "ssh"]
    probed = protocol.probe_all(served, version, 2.0) if served else {}
    logged_in = on_each(ssh, lambda spec: sshhost.answers(spec, 5.0), sshhost.CONNECT_TIMEOUT_S + 15,
                        "logging in again") if ssh else {}
    return [str(spec) for spec in target.hosts
            if isinstance(probed.get(spec), HostError) or (spec in logged_in and logged_in[spec] is not True)]


@dataclass(frozen=True)
class Cut:
    """What the workflow did for one cut: the results of its phases, the seconds it waited, and why
    it could not go on (the host did not come back)."""

    cut: int
    results: tuple[ResultRecord, ...]
    waited_s: float | None = None
    problem: str | None = None


def run_cuts(prober: Prober, options: Mapping[str, str], settings: Settings, wait: Wait = wait_for_target,
             note: Callable[[str], None] = lambda text: None) -> list[Cut]:
    """Every cut (see the module docstring), each phase one ``prober.run``; a cut whose write phase
    failed or ended before the trigger is not verified, and a host that does not come back ends the
    test (``Cut.problem``). Raises what ``prober.run`` raises (``SafetyError`` before anything is
    written, ``Interrupted`` …)."""
    done = []
    for cut in range(1, settings.cuts + 1):
        found: list[ResultRecord] = []
        if settings.wipe:
            found += prober.run("crash-wipe", wipe_options(options), first_repeat=cut - 1,
                                planned={"crash": Phase(cut, crashphase.WIPE).extra()}, waived=(*OWN_WARNINGS, "P5"))
            if found[-1].status != "ok":
                done.append(Cut(cut, tuple(found)))
                continue
        phase = Phase(cut, crashphase.WRITE, settings.trigger_args(), settings.trigger)
        (write,) = prober.run("crash-write", write_options(options, cut), first_repeat=cut - 1,
                              planned={"crash": phase.extra()}, job=JOB, waived=OWN_WARNINGS)
        found.append(write)
        record = (write.extra or {}).get("crash") or {}
        if write.status != "ok" or not record.get("fired"):
            done.append(Cut(cut, tuple(found)))
            continue
        try:
            waited = wait(prober.target, settings, note)
        except HostError as exc:
            done.append(Cut(cut, tuple(found), problem=exc.message))
            break
        states = crashphase.decode_states(record.get("states") or {})
        found += prober.run("crash-verify", verify_options(options, cut), first_repeat=cut - 1,
                            planned={"crash": Phase(cut, crashphase.VERIFY, states=states).extra()}, job=JOB,
                            waived=OWN_WARNINGS)
        done.append(Cut(cut, tuple(found), waited))
    return done


def record(cuts: Sequence[Cut], settings: Settings, options: Mapping[str, str]) -> dict[str, Any]:
    """What the run stores under ``options["crash_test"]`` (read back by ``cut_outcomes``)."""
    return {"crash_test": {"settings": {"cuts": settings.cuts, "trigger_timeout": settings.trigger_timeout,
                                        "trigger_file": settings.trigger_file, "trigger": settings.trigger,
                                        "trigger_remote": settings.trigger_remote, "settle_s": settings.settle_s,
                                        "wait_timeout_s": settings.wait_timeout_s, "wipe": settings.wipe},
                           "fio_options": dict(options),
                           "cuts": [{"cut": c.cut, "results": [r.id for r in c.results], "waited_s": c.waited_s,
                                     "problem": c.problem} for c in cuts]}}


# --- outcomes (pure, over the stored run) --------------------------------------------------------


@dataclass(frozen=True)
class CutOutcome:
    """One cut as stored: writes issued before it (fio's verify states, all hosts), writes fio checked
    after it (the verify phase's reads), blocks lost (read back as never written) and corrupt (other
    content), the bad blocks as ``(offset, fio's reason, server)`` (at most ``run.crashphase.MAX_FAILURES``),
    the verdict and what explains it (a failure, a cut that did not happen)."""

    cut: int
    verdict: CutVerdict
    issued: int | None = None
    checked: int | None = None
    lost: int = 0
    corrupt: int = 0
    bad: tuple[tuple[int, str, str | None], ...] = ()
    detail: str | None = None
    waited_s: float | None = None
    hosts: tuple[str, ...] = field(default=())

    @property
    def intact(self) -> int | None:
        return None if self.checked is None else self.checked - self.lost - self.corrupt


def _phases(run: Run) -> dict[int, dict[str, ResultRecord]]:
    out: dict[int, dict[str, ResultRecord]] = {}
    for r in run.results:
        phase = crashphase.from_extra(r.extra)
        if phase is not None and r.status != "pending":
            out.setdefault(phase.cut, {})[phase.phase] = r
    return out


def _checked(result: ResultRecord) -> int | None:
    reads = [d.total_ios for j in result.report.jobs for name, d in j.directions.items()
             if name == "read" and d.total_ios is not None] if result.report else []
    return sum(reads) if reads else None


def cut_outcomes(run: Run) -> list[CutOutcome]:
    """Every cut of a crash-test run, in order (empty for other runs)."""
    found = (run.info.options.get("crash_test") or {})
    cuts = {c["cut"]: c for c in found.get("cuts", ())}
    out = []
    for cut, phases in sorted(_phases(run).items()):
        stored = cuts.get(cut, {})
        out.append(_outcome(cut, phases, stored.get("waited_s"), stored.get("problem")))
    return out


def _outcome(cut: int, phases: Mapping[str, ResultRecord], waited: float | None,
             problem: str | None = None) -> CutOutcome:
    failed = next((r for r in phases.values() if r.status not in ("ok",)), None)
    write = phases.get(crashphase.WRITE)
    w = (write.extra or {}).get("crash", {}) if write else {}
    summary = w.get("state_summary") or {}
    issued = sum(s.get("numberio", 0) for files in summary.values() for s in files.values()) if summary else None
    hosts = tuple(summary)
    if failed is not None:
        what = (failed.extra or {}).get("crash", {}).get("phase", failed.workload)
        return CutOutcome(cut, CutVerdict.FAILED, issued,
                          detail=f"{what}: {(failed.error or failed.status).splitlines()[0]}", waited_s=waited,
                          hosts=hosts)
    if write is None or not w.get("fired"):
        return CutOutcome(cut, CutVerdict.NO_CUT, issued, detail="fio finished writing before the trigger fired: a "
                          "larger size or an earlier --trigger-timeout cuts it", waited_s=waited, hosts=hosts)
    verify = phases.get(crashphase.VERIFY)
    if verify is None:
        return CutOutcome(cut, CutVerdict.FAILED, issued, detail=problem or "no verify phase ran", waited_s=waited,
                          hosts=hosts)
    v = (verify.extra or {}).get("crash", {})
    bad = tuple((f["offset"], f["reason"], f.get("server")) for f in v.get("failures", ()))
    count = v.get("failure_count", len(bad))
    lost = sum(1 for _, reason, _ in bad if reason.startswith("verify: bad magic header 0,"))
    corrupt = count - lost
    return CutOutcome(cut, CutVerdict.LOST if count else CutVerdict.INTACT, issued, _checked(verify), lost, corrupt,
                      bad, waited_s=waited, hosts=hosts)


@dataclass(frozen=True)
class LossRate:
    """Over the cuts that were cut and verified: how many lost or corrupted an acknowledged write,
    the share with its 95 % Wilson interval (``stats.wilson``), and the blocks lost over the blocks
    checked (blocks of one cut are not independent trials, so no interval for that)."""

    verified: int
    with_loss: int
    rate: float | None
    ci95: tuple[float, float] | None
    blocks_bad: int
    blocks_checked: int


def loss_rate(outcomes: Sequence[CutOutcome]) -> LossRate:
    judged = [o for o in outcomes if o.verdict in (CutVerdict.INTACT, CutVerdict.LOST)]
    bad = sum(1 for o in judged if o.verdict == CutVerdict.LOST)
    return LossRate(len(judged), bad, bad / len(judged) if judged else None, stats.wilson(bad, len(judged)),
                    sum(o.lost + o.corrupt for o in judged), sum(o.checked or 0 for o in judged))

