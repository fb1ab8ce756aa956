"""`iolab report` of the realistic demo: real fio on a fast file against a loop device throttled to 200
IOPS (a cgroup): the throughput, the verdicts at the top, the environment's differences."""

from __future__ import annotations

import re
from html import unescape

import pytest

import cgroup
from clirun import iolab
from iolab.report import chartdata
from iolab.store.database import Store
from loopdev import loop_device, loop_unavailable_reason


def test_report_of_a_file_against_a_throttled_loop_device(tmp_path):
    reason = cgroup.unavailable_reason() or loop_unavailable_reason()
    if reason:
        pytest.skip(reason)
    suite = tmp_path / "tiny.yaml"
    suite.write_text("name: tiny\ndefaults: {ioengine: libaio, direct: 1, size: 16m, time_based: 1, runtime: 2s}\n"
                     "workloads:\n  - {rw: randread, bs: 4k, iodepth: [1, 8]}\n")
    db = tmp_path / "iolab.db"
    with loop_device(tmp_path, size_bytes=32 * 1024**2) as loop, cgroup.throttled(loop.path, iops=200) as group:
        fast = iolab("run", str(suite), "--target", f"fast={tmp_path / 'fast.dat'}", "--label", "fast", db=db)
        assert fast.returncode == 0, fast.stderr
        slow = iolab("run", str(suite), "--target", f"slow={loop.path}", "--label", "slow", db=db,
                     wrapper=group.wrapper())
        assert slow.returncode == 0, slow.stderr
    proc = iolab("report", "fast", "slow", "-o", str(tmp_path / "r.html"), "--png", str(tmp_path / "png"), db=db)
    assert proc.returncode == 0, proc.stderr
    store = Store(f"sqlite:///{db}")
    runs = [store.get_run(i) for i in (1, 2)]
    rows = {(r["subject"], r["category"]): r["iops"] for r in chartdata.repeat_rows(
        runs, chartdata.subjects(runs), chartdata.Categories(runs))}
    slow_iops, fast_iops = rows[("slow", "randread-4k-qd8")], rows[("fast", "randread-4k-qd8")]
    assert slow_iops < 260 and fast_iops > 5 * slow_iops
    assert (tmp_path / "png" / "sweep-saturation.png").exists() and (tmp_path / "png" / "timeseries-iops.png").exists()
    page = (tmp_path / "r.html").read_text()
    summary = unescape(page[page.index('<section id="summary">'):page.index("</section>")])
    assert "<caption>fast (run 1) → slow (run 2)</caption>" in summary
    iops = re.findall(r"<td>(randread-4k-qd\d)</td><td>read</td><td>IOPS</td>"
                      r".*?<td(?: class=\"([^\"]*)\")?>([^<]*)</td></tr>", summary)
    assert iops == [("randread-4k-qd1", "", "worse (untested)"),  # one run a side: untested, not coloured
                    ("randread-4k-qd8", "", "worse (untested)")]
    assert "<caption>Environment differences</caption>" in summary
    assert re.search(r"<td>device</td><td>[^<]+</td><td>loop\d+</td>", summary)
