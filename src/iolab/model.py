"""The records iolab passes around: parsed fio reports, facts, stored runs.

All are frozen dataclasses with units in their field names (``_ns``, ``_ms``, ``_bytes``,
``_bytes_s``, ``_pct``). A field a source format does not carry is ``None`` ("unknown"), never
zero: a terse v2 line has no CPU figures, normal output has no bytes for mixed block sizes.

``to_jsonable``/``from_jsonable`` convert any of them to and from plain JSON values (pydantic
does the work); the store and the JSON report use them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from .histogram import Histogram, histogram_jsonable

if TYPE_CHECKING:
    from pydantic import TypeAdapter

#: Directions as fio names them; ``sync`` is fsync/fdatasync latency (fio 3.4+), ``mixed`` is
#: ``unified_rw_reporting``.
DIRECTIONS = ("read", "write", "trim", "sync", "mixed")


def pct_key(percentile: float | str) -> str:
    """Canonical key for a percentile: ``99.900000`` / ``99.9`` / ``"99.90"`` -> ``"99.9"``."""
    return f"{float(percentile):g}"


@dataclass(frozen=True)
class Latency:
    """One of fio's slat/clat/lat objects (or the sync latency), in nanoseconds.

    ``percentiles_ns`` maps a ``pct_key`` ("99.9") to fio's value, which is the midpoint of a
    histogram bucket (error <= 1/128, ``stat.h``). ``bins_ns`` is json+'s histogram: bucket
    midpoint in ns -> I/O count (a ``Histogram``); ``None`` when the output carries no histogram.
    """

    min_ns: float | None = None
    max_ns: float | None = None
    mean_ns: float | None = None
    stddev_ns: float | None = None
    samples: int | None = None
    percentiles_ns: Mapping[str, float] = field(default_factory=dict)
    bins_ns: Histogram | None = None

    def percentile(self, pct: float | str) -> float | None:
        return self.percentiles_ns.get(pct_key(pct))


@dataclass(frozen=True)
class SampleStats:
    """fio's periodic bandwidth or IOPS samples (every ``bwavgtime``/``iopsavgtime`` ms).

    Bandwidth values are in bytes/s here (fio prints KiB/s). They describe the spread over
    time, not the total: use ``DirectionStats.iops``/``bw_bytes_s`` for the result.
    """

    min: float | None = None
    max: float | None = None
    mean: float | None = None
    stddev: float | None = None
    samples: int | None = None


@dataclass(frozen=True)
class DirectionStats:
    """Totals and latencies of one direction of one fio job (or reporting group).

    ``iops`` is fio's exact value, ``1000 * total_ios / runtime_ms`` (``stat.c``), never the
    rounded display. ``runtime_ms`` is fio's per-direction runtime (the max over a group).
    ``iops_shown`` and ``bw_bytes_s_shown`` (B/s) are fio's printed values, rounded to its 3–4
    significant figures, kept only where the exact ones cannot be had (normal output without its
    ``issued`` totals or a fixed block size: a pasted excerpt).
    """

    direction: str
    total_ios: int | None = None
    io_bytes: int | None = None
    runtime_ms: int | None = None
    iops: float | None = None
    bw_bytes_s: float | None = None
    slat: Latency | None = None
    clat: Latency | None = None
    lat: Latency | None = None
    short_ios: int | None = None
    drop_ios: int | None = None
    bw_samples: SampleStats | None = None
    iops_samples: SampleStats | None = None
    iops_shown: float | None = None
    bw_bytes_s_shown: float | None = None

    @property
    def iops_or_shown(self) -> float | None:
        """The exact IOPS, else fio's rounded display of it."""
        return self.iops if self.iops is not None else self.iops_shown

    @property
    def bw_or_shown(self) -> float | None:
        """The exact bandwidth (B/s), else fio's rounded display of it."""
        return self.bw_bytes_s if self.bw_bytes_s is not None else self.bw_bytes_s_shown


@dataclass(frozen=True)
class JobResult:
    """One element of fio's report: a job, a clone of a job, or a whole reporting group.

    ``name`` is not unique: numjobs clones share it (FIO_NOTES §1.6); ``index`` (position in
    the report) is. ``members`` is the number of jobs in the group when the format says so
    (normal output's ``jobs=N``), else ``None``. ``directions`` holds only directions that did
    I/O. ``error`` is fio's errno (0 = no error). ``hostname``/``port`` are set for
    client/server output (the connect string's host part, not the server's own name).

    ``job_options`` are the options fio lists for the job (JSON ``job options``). Normal output
    lists none, but shows some effective values elsewhere; ``shown_options`` holds those, in fio's
    option spelling: ``rw``, ``bs`` (fixed sizes only), ``ioengine``, ``iodepth`` from the job header line
    (``rw=randrw, bs=(R) 4096B-4096B, …, ioengine=libaio, iodepth=16``), ``iodepth`` from the
    ``latency : target=0, …, depth=N`` line, ``size`` from ``Laying out IO file (1 file / NMiB)``.
    """

    name: str
    index: int = 0
    groupid: int = 0
    error: int = 0
    directions: Mapping[str, DirectionStats] = field(default_factory=dict)
    usr_cpu_pct: float | None = None
    sys_cpu_pct: float | None = None
    ctx: int | None = None
    majf: int | None = None
    minf: int | None = None
    job_runtime_ms: int | None = None
    iodepth_level_pct: Mapping[str, float] = field(default_factory=dict)
    latency_dist_pct: Mapping[str, float] = field(default_factory=dict)
    job_options: Mapping[str, str] = field(default_factory=dict)
    members: int | None = None
    hostname: str | None = None
    port: int | None = None
    steadystate: Mapping[str, Any] | None = None
    shown_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def measured_ms(self) -> int | None:
        """How long the job measured (after ``ramp_time``), in ms: its longest direction runtime,
        which fio takes as the max over a reporting group's members, else ``job_runtime`` — which
        fio sums over the members (4 clones × 4 s: 16,000), so only for a job that did no I/O."""
        runtimes = [d.runtime_ms for d in self.directions.values() if d.runtime_ms]
        return max(runtimes) if runtimes else self.job_runtime_ms


#: The keys of ``DiskUtil.aggregate``, in the order terse and normal output print them: fio's JSON
#: names for a device-mapper/md device's members (``stat.c``, ``write_merge`` sic).
DISK_AGGREGATE_KEYS = ("aggr_read_ios", "aggr_write_ios", "aggr_read_merges", "aggr_write_merge",
                       "aggr_read_ticks", "aggr_write_ticks", "aggr_in_queue", "aggr_util")


@dataclass(frozen=True)
class DiskUtil:
    """fio's disk statistics for one block device (Linux), ``ticks`` and ``in_queue`` in ms;
    ``aggregate`` holds its members' sums by ``DISK_AGGREGATE_KEYS``."""

    name: str
    read_ios: int | None = None
    write_ios: int | None = None
    read_merges: int | None = None
    write_merges: int | None = None
    read_ticks_ms: int | None = None
    write_ticks_ms: int | None = None
    in_queue_ms: int | None = None
    util_pct: float | None = None
    hostname: str | None = None
    aggregate: Mapping[str, float] | None = None


@dataclass(frozen=True)
class FioReport:
    """Everything iolab reads from one fio output, whatever its format and version.

    ``source_format`` is one of ``json``, ``json+``, ``client-json``, ``normal``, ``terse``.
    ``warnings`` are problems found while reading (e.g. a printed value that disagrees with
    the exact one); they are stored with the result.
    """

    source_format: str
    jobs: tuple[JobResult, ...]
    fio_version: str | None = None
    timestamp_ms: int | None = None
    global_options: Mapping[str, str] = field(default_factory=dict)
    disk_util: tuple[DiskUtil, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class BlockDeviceFacts:
    """A block device as sysfs describes it. Sizes in bytes; ``queues`` maps hctx -> cpu_list."""

    name: str
    path: str
    size_bytes: int | None = None
    model: str | None = None
    serial: str | None = None
    vendor: str | None = None
    rotational: bool | None = None
    logical_block_bytes: int | None = None
    physical_block_bytes: int | None = None
    scheduler: str | None = None
    rq_affinity: int | None = None
    nr_requests: int | None = None
    read_ahead_kb: int | None = None
    nomerges: int | None = None
    write_cache: str | None = None
    numa_node: int | None = None
    queues: Mapping[str, str] = field(default_factory=dict)
    parent: str | None = None
    holders: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    #: The device's firmware revision: NVMe ``device/firmware_rev``, SCSI/ATA ``device/rev``.
    firmware: str | None = None


@dataclass(frozen=True)
class TargetFacts:
    """What a target path is: ``kind`` is ``file``, ``directory``, ``block``, ``missing`` or ``other``.

    ``other`` is a character device, FIFO or socket (e.g. an NVMe generic node ``/dev/ng0n1``).

    For files and directories: the filesystem, its mount point and options, free space, and
    the block device underneath (``device``), when there is one. For block devices:
    ``mounted_at`` (mount points, ``[SWAP]`` and ``[BUSY]`` of it, its partitions and holders),
    ``signatures`` found by blkid/wipefs, and ``probe_errors`` when no probe could run
    (the safety guard refuses such a device).
    """

    path: str
    kind: str
    size_bytes: int | None = None
    fs_type: str | None = None
    mount_point: str | None = None
    mount_options: str | None = None
    mount_source: str | None = None
    free_bytes: int | None = None
    device: BlockDeviceFacts | None = None
    mounted_at: tuple[str, ...] = ()
    signatures: tuple[str, ...] = ()
    probe_errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class IdleState:
    """One CPU idle state as cpuidle lists it (``cpuN/cpuidle/stateK``, ``facts.idle``): its ``name``
    (``POLL``, ``C1``, ``haltpoll idle`` …), ``exit_latency_us`` (the kernel's ``latency``: the worst
    time to leave it, in µs), ``residency_us`` (``residency``: the least time worth entering it for)
    and whether it is ``disabled`` (its ``disable`` file). None where the kernel shows no number."""

    name: str
    exit_latency_us: int | None = None
    residency_us: int | None = None
    disabled: bool = False


@dataclass(frozen=True)
class HostFacts:
    """The machine a result came from. Memory in bytes.

    CPU idle (``facts.idle``): ``cpuidle_driver`` and ``cpuidle_governor`` as cpuidle names them,
    ``idle_states`` cpu0's states (None: unknown; ``()``: cpuidle lists none), and
    ``cpu_dma_latency_us`` the CPU latency limit in force (``/dev/cpu_dma_latency``: the least of
    every process's request, 2,000,000,000 µs when none is held; None when it cannot be read).
    """

    hostname: str | None = None
    kernel: str | None = None
    distribution: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    memory_bytes: int | None = None
    virtualization: str | None = None
    fio_version: str | None = None
    cpu_governor: str | None = None
    cpuidle_driver: str | None = None
    cpuidle_governor: str | None = None
    idle_states: tuple[IdleState, ...] | None = None
    cpu_dma_latency_us: int | None = None


@dataclass(frozen=True)
class RunInfo:
    """A stored run without its results.

    ``status``: ``running``, ``complete``, ``failed`` (some job failed), ``interrupted``,
    ``partial`` (hosts of a remote target were lost mid-run; the other hosts' results are kept).
    ``origin``: ``run`` (iolab ran fio) or ``imported`` (read from existing fio output).
    ``options`` are the run's settings needed to resume it (``keep_files``, ``repeat`` ...).
    """

    id: int
    created_at: datetime
    status: str
    origin: str
    suite_name: str
    suite_text: str = ""
    finished_at: datetime | None = None
    label: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    fio_version: str | None = None
    host: HostFacts | None = None
    warnings: tuple[str, ...] = ()
    source: Mapping[str, str] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Accepted:
    """An intended change, accepted by someone (``iolab accept``): from run ``run_id`` on, its series are
    judged against their new level. ``by`` is who accepted it (``user@host``), ``at`` when."""

    run_id: int
    reason: str
    at: datetime
    by: str


@dataclass(frozen=True)
class ResultRecord:
    """One fio invocation of a run: a job on a target, one repetition.

    ``status``: ``pending`` (not run yet), ``ok``, ``failed`` (fio error; ``error`` says which),
    ``interrupted``, ``partial`` (a remote target's job where some hosts were lost).
    ``params`` are the fio options that define the workload (no file names) and the settings iolab
    applied around it (``tune.KNOB``, ``pin``), ``job_hash`` their digest: equal hashes mean the same
    I/O pattern. ``extra`` holds what later features attach (tuning values in force, time series ...;
    a remote target's per-host records under ``hosts``, see ``run.remote.HostRecord``).
    """

    id: int
    run_id: int
    seq: int
    target: str
    workload: str
    repeat: int
    status: str
    job_text: str
    job_hash: str
    target_path: str | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    command: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    error: str | None = None
    report: FioReport | None = None
    target_facts: TargetFacts | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TimeSeries:
    """One fio log over time: a metric of one fio job (thread) in one direction.

    ``metric`` is ``iops``, ``bw_bytes_s`` (fio logs KiB/s; converted), ``clat_ns``, ``lat_ns``
    or ``slat_ns``. ``t_ms`` is the end of each averaging window in ms since the job's measured
    phase began (fio's ``epoch``, after ``ramp_time``); ``values`` the window averages, one per
    time. ``job_index`` is fio's thread number (1-based, numjobs clones counted) or 0 when the
    log names none (``per_job_logs=0``); ``interval_ms`` is the averaging window
    (``log_avg_msec``); ``hostname`` is set for logs a ``fio --client`` run brought back: the
    host's label (``10.0.0.11:8765``) in iolab's multi-host runs, fio's name for it in imports.
    """

    job: str
    job_index: int
    direction: str
    metric: str
    t_ms: tuple[int, ...]
    values: tuple[float, ...]
    interval_ms: int | None = None
    hostname: str | None = None


@dataclass(frozen=True)
class Gap:
    """Scrapes of an observer that failed in a row: from the first failed attempt (``start_ms``)
    to the last (``end_ms``), in ms since the observation began, ``attempts`` of them, and why
    (the first failure's message). A host unreachable the whole time is one gap."""

    start_ms: int
    end_ms: int
    attempts: int
    error: str


@dataclass(frozen=True)
class Series:
    """One node_exporter time series: its metric name, its labels (without ``instance``/``job``),
    and its value at each scrape of ``HostSamples.t_ms`` (None where a scrape lacked it).
    Units are node_exporter's: seconds, bytes, bytes/s, counts."""

    metric: str
    labels: Mapping[str, str]
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class HostSamples:
    """What an observer read from one host's node_exporter while one job ran.

    ``host`` is how iolab names the host (``local``, a fio server's label such as
    ``10.0.0.11:8765``, or the name of a host only watched); ``role`` is ``local``, ``server`` or
    ``observed``; ``source`` the URL scraped (or the Prometheus server and instance queried).
    ``t_ms`` are the scrape times in ms since ``started_at`` (wall clock, just before fio
    started); ``window_ms`` the job's measured phase (after ``ramp_time``) on the same clock, None
    when fio gave no report; samples before it are the ramp (and file layout). ``cpu_count`` is
    the number of CPUs node_exporter reported.
    """

    host: str
    role: str
    source: str
    started_at: datetime
    t_ms: tuple[int, ...]
    series: tuple[Series, ...]
    window_ms: tuple[int, int] | None = None
    gaps: tuple[Gap, ...] = ()
    cpu_count: int | None = None


@dataclass(frozen=True)
class NicUsage:
    """One network interface over a job's measured phase: bytes received and sent
    (``node_network_{receive,transmit}_bytes_total``) and its link speed in bytes/s
    (``node_network_speed_bytes``; None when the driver reports none, e.g. -1 Mbit/s)."""

    rx_bytes: float
    tx_bytes: float
    speed_bytes_s: float | None = None


@dataclass(frozen=True)
class DiskUsage:
    """One block device over a job's measured phase, from /proc/diskstats through node_exporter:
    completed reads, writes and discards (``node_disk_{reads,writes,discards}_completed_total``),
    bytes (``node_disk_read_bytes_total``, ``node_disk_written_bytes_total``) and busy time in
    seconds (``node_disk_io_time_seconds_total``: time with at least one I/O in flight);
    ``weighted_s`` is the time-weighted I/O time (``node_disk_io_time_weighted_seconds_total``:
    I/Os in flight × time, so its increase over a window's length is the mean number in flight),
    None where the source did not give it (figures stored before it was kept)."""

    reads: float
    writes: float
    read_bytes: float
    write_bytes: float
    busy_s: float
    discards: float = 0.0
    weighted_s: float | None = None


@dataclass(frozen=True)
class HostUsage:
    """What one host did during one job's measured phase: counter increases between the
    phase's start and end (each counter read at those instants by linear interpolation between
    the scrapes around them), stored with the result (``extra["observed"]``).

    ``window_s`` is the phase's length; None (and no figures) when the samples do not reach
    both ends of it (the observer was unreachable then: see ``gaps``, and ``error`` when it
    never answered). ``cpu_seconds`` are CPU seconds by mode summed over all CPUs
    (``node_cpu_seconds_total``: user, nice, system, idle, iowait, irq, softirq, steal).
    ``bcache`` maps ``metric{labels}`` of every ``node_bcache_*`` counter to its increase.
    ``facts`` are the host's facts as node_exporter shows them (``observe.facts``).
    """

    host: str
    role: str
    source: str
    window_s: float | None
    cpu_count: int | None = None
    cpu_seconds: Mapping[str, float] = field(default_factory=dict)
    nics: Mapping[str, NicUsage] = field(default_factory=dict)
    disks: Mapping[str, DiskUsage] = field(default_factory=dict)
    bcache: Mapping[str, float] = field(default_factory=dict)
    gaps: tuple[Gap, ...] = ()
    error: str | None = None
    facts: HostFacts | None = None
    devices: tuple[BlockDeviceFacts, ...] = ()


@dataclass(frozen=True)
class Run:
    """A stored run with all its results, in plan order."""

    info: RunInfo
    results: tuple[ResultRecord, ...]


T = TypeVar("T")


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(cls: Any) -> TypeAdapter[Any]:
    """One pydantic TypeAdapter per type, built on first use (building one costs milliseconds). pydantic
    itself is imported then (~0.08 s): ``iolab import`` parses and stores fio output without it."""
    if cls not in _ADAPTERS:
        from pydantic import TypeAdapter
        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def to_jsonable(obj: Any) -> Any:
    """A dataclass (or list of them) as plain JSON values; datetimes as ISO 8601 strings."""
    if isinstance(obj, list | tuple):  # each by its own type: a bare list's adapter would guess types
        return [to_jsonable(item) for item in obj]
    return _adapter(type(obj)).dump_python(obj, mode="json")


def to_json_text(obj: Any) -> str:
    """``json.dumps(to_jsonable(obj))`` in one pass: by orjson, which writes dataclasses, int keys (as
    decimal strings), datetimes and (through ``Histogram.jsonable``) histograms as pydantic does, and
    several times as fast; by pydantic-core for what orjson does not know (an int beyond 64 bits)."""
    try:
        return orjson.dumps(obj, default=histogram_jsonable, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return _adapter(type(obj)).dump_json(obj).decode()


def from_jsonable(cls: type[T], data: Any) -> T:
    """The inverse of ``to_jsonable``. Raises ``pydantic.ValidationError`` on a shape mismatch."""
    return _adapter(cls).validate_python(data)  # type: ignore[no-any-return]
