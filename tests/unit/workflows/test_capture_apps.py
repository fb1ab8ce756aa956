"""Captures of applications, the pure parts: a partition's tracefs filter, an empty fingerprint, the
fit's closeness rows, write-zeroes and iolab's own probes in a trace, a process set, skew over the
blocks a request covers. Real applications captured on loop devices: tests/integration/test_capture_apps.py."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iolab.workflows.capture import tracefs


def test_a_partitions_filter_keeps_requests_without_sectors() -> None:
    ref = tracefs.DeviceRef("/dev/loop9p2", 7 << 20 | 9, 2048, 10240)
    assert ref.filter == "dev == 7340041 && ((sector >= 2048 && sector < 10240) || nr_sector == 0)"
    assert tracefs.DeviceRef("/dev/loop9", 7 << 20 | 9).filter == "dev == 7340041"


def test_an_empty_fingerprint_says_what_was_not_measured_and_cannot_be_fitted() -> None:
    from iolab.errors import UsageError
    from iolab.report.capture import fingerprint_rows
    from iolab.workflows.capture import fingerprint as fp_mod
    from iolab.workflows.capture import fit
    from iolab.workflows.capture import trace as trace_mod

    fp = fp_mod.fingerprint(trace_mod.from_rows([], duration_ns=3_000_000_000))
    assert fp.empty and fp.duration_s == 3.0
    assert (fp.iops, fp.bw_bytes_s, fp.interarrival_cv, fp.lba_first_bytes, fp.flush_pct) == (None,) * 5
    rows = {row[0].text: (row[1].text, row[2].text) for row in fingerprint_rows(fp)}
    assert rows["inter-arrival"] == ("–", "p50 – · p99 – · CV –")
    assert rows["IOPS"][0] == "–" and rows["LBA range"][0] == "–" and rows["depth at issue"][0] == "–"
    with pytest.raises(UsageError, match="capture 7 holds no read or write request") as caught:
        fit.fit_job(fp, what="capture 7")
    assert caught.value.hint and caught.value.exit_code == 2


def test_fit_check_compares_the_sizes_with_the_largest_shares() -> None:
    """Six write sizes, the two largest (64k, 128k) holding 80 %: the closeness rows are theirs first,
    not the four smallest sizes'."""
    from iolab.workflows.capture import fingerprint as fp_mod
    from iolab.workflows.capture import fit
    from iolab.workflows.capture import trace as trace_mod
    from iolab.workflows.capture.trace import WRITE

    sizes = [1024] * 5 + [2048] * 5 + [4096] * 5 + [8192] * 5 + [65536] * 40 + [131072] * 40
    rows = [(i * 1000, i * 1000 + 500, i * 256, size, WRITE, 0, 1) for i, size in enumerate(sizes)]
    fp = fp_mod.fingerprint(trace_mod.from_rows(rows))
    assert fit.largest_sizes(fp.bs_counts["write"]) == [65536, 131072, 1024, 2048]
    metrics = [row.metric for row in fit.closeness(fp, fp) if " bs " in row.metric]
    assert metrics == ["write bs 64k share", "write bs 128k share", "write bs 1k share", "write bs 2k share"]


def test_write_zeroes_requests_are_writes() -> None:
    from iolab.workflows.capture import trace as trace_mod
    from iolab.workflows.capture.trace import OTHER, SYNC, WRITE, ZEROES

    assert trace_mod.parse_rwbs("NS", 2048) == (WRITE, ZEROES | SYNC)  # as 6.18 prints REQ_OP_WRITE_ZEROES
    assert trace_mod.parse_rwbs("N", 0) == (OTHER, 0)  # a pass-through command: no sectors


def test_a_process_set_keeps_its_requests_and_the_kernel_threads_and_counts_the_rest() -> None:
    from iolab.workflows.capture import trace as trace_mod
    from iolab.workflows.capture.trace import READ, WRITE

    rows = [(1_000_000, 1_100_000, 0, 4096, READ, 0, 10),       # dd: left out
            (2_000_000, 2_100_000, 8, 4096, WRITE, 0, 20),      # the application
            (3_000_000, 3_100_000, 16, 4096, WRITE, 0, 30),     # jbd2, by name (a trace without kthreads)
            (4_000_000, 4_100_000, 24, 4096, WRITE, 0, 20)]
    trace = trace_mod.from_rows(rows, comms={10: "dd", 20: "python3", 30: "jbd2/loop1-8"})
    only = trace_mod.of_processes(trace, ["python3"])
    assert only.pid.tolist() == [20, 30, 20] and only.left_out == {"dd": 1}
    assert only.issue_ns.tolist() == [0, 1_000_000, 2_000_000]  # the span starts at the first request kept
    by_flag = trace_mod.of_processes(trace_mod.dataclasses.replace(trace, kthreads=frozenset({10})), ["20"])
    assert by_flag.pid.tolist() == [10, 20, 20]  # kernel threads as the capture saw them, pids as names
    assert trace_mod.is_kernel_thread(2, "kthreadd") and not trace_mod.is_kernel_thread(os.getpid(), "python3")


def test_iolabs_own_probes_are_left_out_when_parsing() -> None:
    from iolab.workflows.capture import trace as trace_mod
    lines = """\
          blkid-100     [000] .....   10.000000: block_rq_issue: 7,0 R 4096 () 0 + 8 be,0,4 [blkid]
     ksoftirqd/0-14     [000] ..s..   10.000050: block_rq_complete: 7,0 R () 0 + 8 be,0,4 [0]
            fio-200     [000] .....   11.000000: block_rq_issue: 7,0 R 4096 () 0 + 8 be,0,4 [fio]
     ksoftirqd/0-14     [000] ..s..   11.000040: block_rq_complete: 7,0 R () 0 + 8 be,0,4 [0]
"""
    trace = trace_mod.parse_lines(lines.splitlines())
    assert len(trace) == 1 and trace.left_out == {"blkid": 1}
    assert trace.issue_ns.tolist() == [0] and trace.complete_ns.tolist() == [40_000]  # its own completion


def test_skew_counts_every_block_a_request_covers() -> None:
    from iolab.workflows.capture import fingerprint as fp_mod

    offsets = np.arange(64, dtype=np.int64) * 65536  # a 64k sequential write over 4 MiB
    # each block accessed once: the hottest 10 and 102 of the 1,024 blocks hold their share of accesses
    assert fp_mod.skew(offsets, np.full(64, 65536)) == (pytest.approx(100 * 10 / 1024), pytest.approx(100 * 102 / 1024),
                                                        1024)
    assert fp_mod.skew(offsets)[2] == 64  # by request start, as fingerprints stored before counted
    # a 4k block read 9 times inside a 64k region read once: of 16 blocks, the hottest (1 %: 1 block)
    # holds 10 of the 25 accesses, the hottest 2 (10 %) 11
    assert fp_mod.skew(np.array([0] + [8192] * 9), np.array([65536] + [4096] * 9)) == (40.0, 44.0, 16)


@settings(deadline=None)  # a loaded machine (the suite runs in parallel) is no reason to fail
@given(st.lists(st.tuples(st.integers(0, 300_000), st.integers(1, 70_000)), min_size=1, max_size=60))
def test_the_sweep_over_runs_of_blocks_counts_as_block_by_block(requests: list[tuple[int, int]]) -> None:
    from iolab.workflows.capture import fingerprint as fp_mod

    offsets, lengths = np.array([r[0] for r in requests]), np.array([r[1] for r in requests])
    per_block: dict[int, int] = {}
    for start, length in requests:
        for block in range(start // 4096, (start + length - 1) // 4096 + 1):
            per_block[block] = per_block.get(block, 0) + 1
    hottest = np.cumsum(sorted(per_block.values(), reverse=True))
    expected = [100.0 * hottest[max(1, round(f * len(per_block))) - 1] / hottest[-1] for f in (0.01, 0.10)]
    hot1, hot10, touched = fp_mod.skew(offsets, lengths)
    assert touched == len(per_block) and [hot1, hot10] == pytest.approx(expected)


