"""Canonical fio job options: the workload key that decides whether two results compare.

Two jobs do the same I/O when their workload options agree after normalising fio's spellings:

* aliases become the main name (``readwrite`` -> ``rw``, ``blocksize`` -> ``bs``, ``timeout`` ->
  ``runtime``, …; the ``.alias`` fields of ``options.c@fio-3.33``), ``rwmixwrite=30`` becomes
  ``rwmixread=70`` and ``buffered=0`` becomes ``direct=1``;
* sizes are compared as bytes (``units.parse_size``, honouring ``kb_base``): ``4k`` = ``4096`` =
  ``4K``; ``bs`` is expanded per direction (HOWTO ``blocksize``: ``8k,32k`` is 8k for reads, 32k
  for writes and trims) and written back compactly (``4k``, ``8k,32k,32k``);
* durations are compared in time (``runtime=1m`` = ``60`` = ``60s``);
* booleans are ``1``/``0`` (a flag without value, ``time_based``, is ``time_based=1``);
* ``rw`` values: ``readwrite`` = ``rw``; ``rwmixread`` only matters for ``rw``/``randrw``;
* an option left out has fio's default (``KEY_DEFAULTS``, ``DEFAULTS``): ``iodepth`` 1, ``numjobs``
  1, ``direct`` 0, ``rw`` read, ``bs`` 4k, ``ioengine`` psync (sync before fio 2.10, commit
  df96a39e), … — but only where the source is complete. Where it is not (an imported normal
  or terse output, JSON's dropped bare flags; see ``workflows.importer``), a left-out option is unknown.

``KEY`` options are always part of the key, present or not. Options in ``fio.jobfile.NOT_WORKLOAD``
(file names, logging, reporting) are never part of it. ``SOFT`` options change how long or how a
job is measured but not which I/O it does (``runtime``, ``ramp_time``, seeds …): a difference in
them is reported but does not make results "not comparable"; ``time_based`` is in the key, so a
time-based run never pairs with a size-bound one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from .. import units
from ..errors import SuiteError
from ..fio import jobfile
from ..fio.jobfile import NOT_WORKLOAD
from ..fio.num2str import version_tuple
from ..model import ResultRecord

ALIASES = {
    "readwrite": "rw", "blocksize": "bs", "blockalign": "ba", "blocksize_range": "bsrange",
    "blocksize_unaligned": "bs_unaligned", "iodepth_batch_submit": "iodepth_batch",
    "iodepth_batch_complete": "iodepth_batch_complete_min", "io_limit": "io_size", "fill_fs": "fill_device",
    "fileoffset": "offset", "nr_files": "nrfiles", "timeout": "runtime", "iomem": "mem", "mem_align": "iomem_align",
    "ratemin": "rate_min", "ratecycle": "rate_cycle", "wait_for_previous": "stonewall",
    "disable_bw": "disable_bw_measurement", "ss": "steadystate", "ss_dur": "steadystate_duration",
    "ss_ramp": "steadystate_ramp_time",
}

#: Always part of the key; absent means this default (when the source is complete).
KEY_DEFAULTS = {"rw": "read", "bs": "4k", "iodepth": "1", "numjobs": "1", "rwmixread": "50", "direct": "0",
                "time_based": "0"}
KEY = (*KEY_DEFAULTS, "ioengine", "size")

#: fio's defaults of other workload options (``.def`` in options.c@fio-3.33), so that ``randrepeat=1``
#: equals a job that does not set it. An option missing here that one side sets and the other not is
#: shown as set against "(default)".
DEFAULTS = {
    "allrandrepeat": "0", "atomic": "0", "bs_is_seq_rand": "0", "bs_unaligned": "0", "create_on_open": "0",
    "do_verify": "1", "end_fsync": "0", "exitall": "0", "exitall_on_error": "0", "fadvise_hint": "1",
    "fallocate": "native", "fdatasync": "0", "file_append": "0", "file_service_type": "roundrobin",
    "fill_device": "0", "fsync": "0", "fsync_on_close": "0", "gtod_reduce": "0", "invalidate": "1",
    "io_submit_mode": "inline", "iodepth_batch": "1", "iodepth_batch_complete_min": "1", "kb_base": "1024",
    "loops": "1", "mem": "malloc", "new_group": "0", "norandommap": "0", "nrfiles": "1", "offset": "0",
    "offset_increment": "0", "overwrite": "0", "percentage_random": "100", "pre_read": "0",
    "random_distribution": "random", "random_generator": "tausworthe", "randrepeat": "1", "rate_process": "linear",
    "refill_buffers": "0", "rw_sequencer": "sequential", "scramble_buffers": "1", "softrandommap": "0",
    "startdelay": "0s", "ramp_time": "0s", "stonewall": "0", "sync": "none", "thinktime": "0", "thread": "0",
    "unlink": "0", "verify": "0", "verify_only": "0", "zero_buffers": "0", "zonemode": "none",
    "disable_lat": "0", "disable_clat": "0", "disable_slat": "0", "disable_bw_measurement": "0",
}

#: Differences reported but not blocking: how long or how a job is measured, not which I/O it does.
SOFT = frozenset({
    "runtime", "ramp_time", "startdelay", "loops", "randseed", "randrepeat", "allrandrepeat", "random_generator",
    "thread", "clocksource", "gtod_reduce", "gtod_cpu", "disable_lat", "disable_clat", "disable_slat",
    "disable_bw_measurement", "steadystate", "steadystate_duration", "steadystate_ramp_time", "kb_base",
    "unit_base", "exitall", "exitall_on_error", "create_serialize", "create_fsync", "unlink", "unlink_each_loop",
    "nice", "uid", "gid", "stats",
})

_BOOLEAN = frozenset({
    "direct", "buffered", "time_based", "norandommap", "randrepeat", "allrandrepeat", "invalidate", "thread",
    "zero_buffers", "refill_buffers", "scramble_buffers", "gtod_reduce", "disable_lat", "disable_clat",
    "disable_slat", "disable_bw_measurement", "overwrite", "end_fsync", "fsync_on_close", "bs_unaligned",
    "bs_is_seq_rand", "fill_device", "create_on_open", "pre_read", "unlink", "verify_only", "do_verify", "atomic",
    "softrandommap", "stonewall", "new_group", "exitall", "exitall_on_error", "file_append", "hipri",
    "fixedbufs", "registerfiles", "sqthread_poll", "nonvectored", "uncached", "nowait", "force_async",
})
_SIZES = frozenset({"ba", "size", "io_size", "offset", "offset_increment", "filesize", "zonesize", "zonerange",
                    "zoneskip", "rate", "rate_min", "buffer_compress_chunk"})
_PER_DIRECTION = frozenset({"bs", "ba", "rate", "rate_min"})
_DURATIONS = frozenset({"runtime", "ramp_time", "startdelay"})
_INTEGERS = frozenset({"iodepth", "numjobs", "rwmixread", "rwmixwrite", "nrfiles", "loops", "fsync", "fdatasync",
                       "iodepth_batch", "iodepth_batch_complete_min", "iodepth_batch_complete_max", "iodepth_low",
                       "percentage_random", "rate_iops", "rate_iops_min", "openfiles", "thinktime",
                       "thinktime_blocks", "buffer_compress_percentage", "dedupe_percentage", "kb_base"})
_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}
_MIXED_RW = ("rw", "randrw")
#: ``Options.unknown`` value: every option not in ``values`` is unknown.
ALL = None


@dataclass(frozen=True)
class Options:
    """One job's canonical options. ``unknown``: the options whose absence is not fio's default
    (``ALL``/None: every option not in ``values``)."""

    values: Mapping[str, str]
    unknown: frozenset[str] | None = field(default_factory=frozenset)

    def get(self, option: str) -> str | None:
        """The option's canonical value, its default, ``"(default)"``, or None when unknown."""
        if option in self.values:
            return self.values[option]
        if self.unknown is ALL or option in self.unknown:
            return None
        return KEY_DEFAULTS.get(option) or DEFAULTS.get(option) or NOT_SET

    @property
    def key(self) -> tuple[object, ...]:
        """A hashable identity: equal keys mean identical knowledge of the workload."""
        return (tuple(sorted(self.values.items())), None if self.unknown is ALL else tuple(sorted(self.unknown)))


NOT_SET = "(default)"


def default_ioengine(fio_version: str | None) -> str | None:
    """fio's default engine on Linux: psync from fio 2.10 (commit df96a39e), sync before; None when
    the version is unknown. Git builds (``3.35-18-gabc``) count as their release."""
    version = version_tuple(fio_version)
    if version is None:
        return None
    return "psync" if version >= (2, 10) else "sync"


def canonical(options: Mapping[str, str | None], unknown: Iterable[str] | None = (),
              fio_version: str | None = None) -> Options:
    """The canonical form of one job's effective options (global + job section).

    ``unknown`` lists options whose absence does not mean fio's default; None means every absent
    option is unknown. ``fio_version`` decides the default ``ioengine``.
    """
    kb_base = 1000 if str(options.get("kb_base") or "").strip() == "1000" else 1024
    values: dict[str, str] = {}
    for raw_key, raw_value in options.items():
        key = ALIASES.get(raw_key.strip(), raw_key.strip())
        if key in NOT_WORKLOAD or not key:
            continue
        values[key] = normalise(key, raw_value, kb_base)
    if "rwmixwrite" in values:
        mix = values.pop("rwmixwrite")
        if "rwmixread" not in values and mix.isdigit():
            values["rwmixread"] = str(100 - int(mix))
    if "buffered" in values:
        buffered = values.pop("buffered")
        if "direct" not in values and buffered in ("0", "1"):
            values["direct"] = "0" if buffered == "1" else "1"
    rw = values.get("rw")
    if rw is not None and rw.split(":")[0] not in _MIXED_RW:
        values.pop("rwmixread", None)  # no effect on a one-direction job
    unknown_set = None if unknown is None else frozenset(ALIASES.get(u, u) for u in unknown)
    if unknown_set is not None:
        engine = default_ioengine(fio_version)
        defaults = {**KEY_DEFAULTS, **({"ioengine": engine} if engine else {})}
        if rw is not None and rw.split(":")[0] not in _MIXED_RW:
            defaults.pop("rwmixread")
        for key, default in defaults.items():
            if key not in values and key not in unknown_set:
                values[key] = default
        if "ioengine" not in values:
            unknown_set |= {"ioengine"}
        if "size" not in values:
            unknown_set |= {"size"}  # fio's default is the file's or device's size
    return Options(values=dict(sorted(values.items())), unknown=unknown_set)


def normalise(key: str, value: str | None, kb_base: int = 1024) -> str:
    """One option value in canonical spelling (see module docstring); unreadable values stay as
    given (stripped), so they still compare equal to themselves."""
    if value is None:
        return "1"
    text = value.strip()
    lowered = text.lower()
    try:
        if key in _BOOLEAN:
            return "1" if lowered in _TRUE else "0" if lowered in _FALSE else text
        if key in _PER_DIRECTION:
            return _per_direction(lowered, kb_base, KEY_DEFAULTS["bs"] if key == "bs" else "0")
        if key in _SIZES:
            return lowered if lowered.endswith("%") else units.format_size_fio(units.parse_size(lowered, kb_base))
        if key in _DURATIONS:
            return f"{units.parse_duration_us(lowered) / 1e6:g}s"
        if key in _INTEGERS:
            return str(int(lowered))
    except ValueError:
        return text
    if key == "rw":
        return "rw" + lowered[len("readwrite"):] if lowered.startswith("readwrite") else lowered
    return text


def _per_direction(text: str, kb_base: int, default: str) -> str:
    """``8k,32k`` -> ``8k,32k,32k``; ``4k`` -> ``4k`` (HOWTO ``blocksize``: a value not ended by a
    comma applies to the following directions, an empty one is the default)."""
    parts = text.split(",")
    spelled = []
    for i in range(3):
        part = parts[i] if i < len(parts) else parts[-1]
        size = units.parse_size(part or default, kb_base)
        spelled.append(units.format_size_fio(size) if size else "0")
    return spelled[0] if len(set(spelled)) == 1 else ",".join(spelled)


def common(a: Options, b: Options) -> Options:
    """What ``a`` and ``b`` both say: an option is known only where both know it with one value.

    For repetitions pooled from sources that record different options (a JSON and a normal
    output of the same job), so that the pool claims nothing one of them does not show.
    """
    names = {*a.values, *b.values}
    agreed = {}
    for name in names:
        value = a.get(name)
        if value is not None and value == b.get(name):
            agreed[name] = value
    if a.unknown is ALL or b.unknown is ALL:
        return Options(agreed, ALL)
    return Options(agreed, frozenset(a.unknown | b.unknown | (names - agreed.keys())))


@dataclass(frozen=True)
class Difference:
    """One option on which two jobs disagree, with each side's value (None = unknown).

    ``effect``: ``blocking`` (not comparable), ``ignored`` (blocking, but ``--ignore``d), ``soft``
    (does not change the I/O pattern)."""

    option: str
    a: str | None
    b: str | None
    effect: str


def differences(a: Options, b: Options, ignore: Iterable[str] = ()) -> tuple[list[Difference], list[str]]:
    """The options ``a`` and ``b`` disagree on, and the key options unknown on a side (unchecked).

    ``ignore`` (aliases allowed) turns blocking differences into ``ignored`` ones.
    """
    ignored = {ALIASES.get(o, o) for o in ignore}
    found: list[Difference] = []
    unchecked: list[str] = []
    mixed = any((o.get("rw") or "").split(":")[0] in _MIXED_RW for o in (a, b))
    for option in sorted({*a.values, *b.values, *KEY}):
        if option == "rwmixread" and not mixed:
            continue
        va, vb = a.get(option), b.get(option)
        if va is None or vb is None:
            if option in KEY and option not in ignored:
                unchecked.append(option)
            continue
        if va != vb:
            effect = "soft" if option in SOFT else "ignored" if option in ignored else "blocking"
            found.append(Difference(option, va, vb, effect))
    return found, unchecked


#: The pseudo-option that carries a result's warm-up pass (``extra["pass"]``, ``describe.spec.PlannedJob``):
#: pass 3 of one run compares with pass 3 of another, never with pass 1, as any option that differs.
PASS = "pass"


def job_options(result: ResultRecord, fio_version: str | None) -> dict[str, Options]:
    """Canonical options per fio job name of a stored result, from its job text.

    iolab's own runs store the job file fio ran: complete, and a size left out is the target's.
    Imported results carry ``extra["unknown_options"]`` (see ``workflows.importer``). A warm-up pass adds
    ``PASS`` to every job's options.
    """
    facts = result.target_facts
    size = facts.size_bytes if facts is not None and facts.kind in ("block", "file") else None
    found = job_text_options(result.job_text, result.extra.get("unknown_options"), fio_version, size)
    number = (result.extra or {}).get("pass")
    if not number:
        return found
    return {job: Options(dict(sorted({**o.values, PASS: str(number)}.items())), o.unknown) for job, o in found.items()}


def job_text_options(job_text: str, unknown_options: Sequence[str] | None, fio_version: str | None,
                     size_bytes: int | None = None) -> dict[str, Options]:
    """Canonical options per fio job name of a job file. ``unknown_options`` is what an import says
    is unknown (``["*"]``: every absent option; None: nothing, the job file is complete, and a job
    without ``size`` uses ``size_bytes``, its target's). Unreadable job text gives ``{}``. Worked
    out once per distinct arguments (a report asks for each result's several times, and a
    capture's replay job text holds hundreds of jobs)."""
    unknown = None if unknown_options is None else tuple(unknown_options)
    return dict(_job_text_options(job_text, unknown, fio_version, size_bytes))


@lru_cache(maxsize=256)
def _job_text_options(job_text: str, unknown_options: tuple[str, ...] | None, fio_version: str | None,
                      size_bytes: int | None) -> tuple[tuple[str, Options], ...]:
    try:
        jobs = jobfile.effective_jobs(jobfile.parse(job_text))
    except SuiteError:
        return ()
    unknown = None if unknown_options is not None and "*" in unknown_options else tuple(unknown_options or ())
    out: dict[str, Options] = {}
    for name, options in jobs:
        if unknown_options is None and "size" not in options and size_bytes:
            options = {**options, "size": str(size_bytes)}
        out.setdefault(name, canonical(options, unknown, fio_version))
    return tuple(out.items())
