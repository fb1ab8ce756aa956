"""Fio reports of every shape for the store's round-trip property (hypothesis strategies: drawn ones
with values a parser could be tricked into, and real ones changed), and storing one as an imported run.
Used by the property on SQLite (``tests/unit/store/test_store_read.py``) and on PostgreSQL
(``tests/system/test_store_read_postgresql.py``)."""

from __future__ import annotations

import itertools
from dataclasses import replace

from hypothesis import strategies as st

from iolab.fio import parse_output
from iolab.fio.validate import Violation, check_report
from iolab.histogram import Histogram
from iolab.model import DirectionStats, DiskUtil, FioReport, JobResult, Latency, SampleStats
from iolab.store.database import Store
from iolab.store.records import FinishedResult, FinishedRun, ImportedFile
from paths import FIO as DATA

# -- values of every kind a parser could be tricked into: huge, negative, not finite, not numbers, bad text --

TEXT = st.one_of(st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8),
                 st.sampled_from(["é", "", "99.9", "\n", "\x7f\ufffe"]))
ANY_TEXT = TEXT | st.sampled_from(["a\x00b", "\ud800"])  # used in a few places: most texts must pass
INTS = st.one_of(st.integers(0, 10**6), st.integers(-(2**70), 2**70), st.sampled_from([2**64 - 1, 2**64, -1]))
FLOATS = st.one_of(st.floats(0, 1e9), st.floats(allow_nan=True, allow_infinity=True), st.integers(0, 10**6),
                   st.sampled_from([2**53 + 1, -0.0, 1e308]))
NUMBER = st.one_of(FLOATS, INTS, st.booleans(), TEXT, st.none())
MAYBE_INT = st.one_of(st.none(), INTS, st.booleans())
MAYBE_FLOAT = st.one_of(st.none(), FLOATS, st.booleans())
PCT_KEYS = st.one_of(st.sampled_from(["1", "50", "99", "99.9", "100"]), st.sampled_from(["0", "150", "nan", "x"]),
                     TEXT)
JSON = st.recursive(st.one_of(st.none(), st.booleans(), INTS, st.floats(), TEXT),
                    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)),
                    max_leaves=12)

latencies = st.builds(
    Latency, min_ns=MAYBE_FLOAT, max_ns=MAYBE_FLOAT, mean_ns=MAYBE_FLOAT, stddev_ns=MAYBE_FLOAT, samples=MAYBE_INT,
    percentiles_ns=st.dictionaries(PCT_KEYS, FLOATS | st.none(), max_size=4),
    bins_ns=st.one_of(st.none(), st.dictionaries(st.integers(0, 10**19 - 1), st.integers(1, 2**62), max_size=4)
                      .map(Histogram)),  # a Histogram refuses anything else (tests/test_fio_validate.py)
)
samples = st.builds(SampleStats, min=MAYBE_FLOAT, max=MAYBE_FLOAT, mean=MAYBE_FLOAT, stddev=MAYBE_FLOAT,
                    samples=MAYBE_INT)


@st.composite
def directions(draw: st.DrawFn) -> dict[str, DirectionStats]:
    names = draw(st.lists(st.sampled_from(["read", "write", "trim", "sync", "mixed"]), unique=True, max_size=2))
    return {name: DirectionStats(
        direction=name, total_ios=draw(MAYBE_INT), io_bytes=draw(MAYBE_INT), runtime_ms=draw(MAYBE_INT),
        iops=draw(MAYBE_FLOAT), bw_bytes_s=draw(MAYBE_FLOAT), slat=draw(st.none() | latencies),
        clat=draw(st.none() | latencies), lat=draw(st.none() | latencies), short_ios=draw(MAYBE_INT),
        drop_ios=draw(MAYBE_INT), bw_samples=draw(st.none() | samples), iops_samples=draw(st.none() | samples),
    ) for name in names}


jobs = st.builds(
    JobResult, name=ANY_TEXT, index=st.integers(0, 3), groupid=INTS, error=st.integers(-200, 200) | INTS,
    directions=directions(),
    usr_cpu_pct=MAYBE_FLOAT, sys_cpu_pct=MAYBE_FLOAT, ctx=MAYBE_INT, majf=MAYBE_INT, minf=MAYBE_INT,
    job_runtime_ms=MAYBE_INT, iodepth_level_pct=st.dictionaries(TEXT, NUMBER, max_size=3),
    latency_dist_pct=st.dictionaries(TEXT, NUMBER, max_size=3), job_options=st.dictionaries(TEXT, TEXT, max_size=3),
    members=MAYBE_INT, hostname=st.none() | TEXT, port=MAYBE_INT,
    steadystate=st.none() | st.dictionaries(TEXT, JSON, max_size=3) | JSON,
    shown_options=st.dictionaries(st.sampled_from(["bs", "rw", "iodepth", "size"]), TEXT, max_size=2),
)
disks = st.builds(
    DiskUtil, name=TEXT, read_ios=MAYBE_INT, write_ios=MAYBE_INT, read_merges=MAYBE_INT, write_merges=MAYBE_INT,
    read_ticks_ms=MAYBE_INT, write_ticks_ms=MAYBE_INT, in_queue_ms=MAYBE_INT, util_pct=MAYBE_FLOAT,
    hostname=st.none() | TEXT, aggregate=st.none() | st.dictionaries(TEXT, FLOATS, max_size=2),
)
reports = st.builds(
    FioReport, source_format=st.sampled_from(["json", "json+", "normal", "terse"]) | TEXT,
    jobs=st.lists(jobs, max_size=2).map(tuple), fio_version=st.none() | TEXT,
    timestamp_ms=st.none() | st.integers(0, 253_402_300_799_999),
    global_options=st.dictionaries(TEXT, TEXT, max_size=2), disk_util=st.lists(disks, max_size=2).map(tuple),
    warnings=st.lists(ANY_TEXT, max_size=2).map(tuple),
)
#: Reports that pass the rules, so that the property tests the store on many of them: real ones, changed.
REAL = [parse_output((DATA / name).read_text(), name) for name in (
    "fio-3.33_randrw_libaio.jsonplus.json", "fio-2.2.8_randrw_posixaio.json", "fio-3.33_randrw_libaio.normal.txt",
    "fio-3.33_randrw_libaio.terse-v5.txt", "fio-3.33_client_two_hosts.json",
    "fio-3.33_steadystate_json_plus_normal.txt",
)]


@st.composite
def near_real(draw: st.DrawFn) -> FioReport:
    """A real report with some of its texts and optional numbers replaced by drawn ones."""
    report = draw(st.sampled_from(REAL))
    job = replace(report.jobs[0], name=draw(ANY_TEXT), hostname=draw(st.none() | TEXT),
                  job_options=draw(st.dictionaries(TEXT, TEXT, max_size=3)), usr_cpu_pct=draw(MAYBE_FLOAT),
                  steadystate=draw(st.none() | st.dictionaries(TEXT, JSON)))
    return replace(report, jobs=(job, *report.jobs[1:]), warnings=tuple(draw(st.lists(TEXT))),
                   timestamp_ms=draw(st.none() | st.integers(0, 253_402_300_799_999)))


_sources = itertools.count()


def store_report(store: Store, report: FioReport) -> int:
    """Store ``report`` as the result of an imported run; its id."""
    sha256 = f"{next(_sources):064x}"
    run = FinishedRun(suite_name="prop", origin="imported", source={"name": "prop"},
                      files=(ImportedFile(sha256, "prop.json"),),
                      results=(FinishedResult(seq=0, target="local", target_path=None, workload="w", repeat=0,
                                              job_text="[w]\n", job_hash="h", params={}, report=report),))
    return store.add_finished_runs([run])[0]


def store_and_read(store: Store, report: FioReport) -> FioReport | None:
    """What reads back after storing ``report``, if the rules accept it (else None: nothing stored)."""
    try:
        check_report(report)
    except Violation:
        return None
    return store.get_run(store_report(store, report)).results[0].report
