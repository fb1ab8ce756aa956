"""The chart specs a report makes outside the tests, in a fresh process (``IOLAB_CHECK_CHARTS`` unset, as
a user runs iolab), are the ones the tests check. The rest of the chart rules: tests/unit/report/test_charts.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROWS = [{"subject": s, "category": c, "repeat": 0, "iops": v, "mib_s": v / 256}
        for s, c, v in (("fast", "a", 124_723.0), ("slow", "a", 2_000.0), ("fast", "b", 311_675.0),
                        ("slow", "b", 3_000.0))]


def test_a_report_outside_the_tests_makes_the_charts_the_checked_ones_are():
    """Outside the tests altair checks nothing as it builds (``charts.CHECKED`` off): the specs must be
    the ones the tests check, byte for byte (a faceted bar chart, a capture's block sizes and heat)."""
    program = """
import json, sys
from iolab.report import charts
from iolab.report.capture import _bs_spec, _heat_spec
from iolab.workflows.capture import fingerprint, trace
rows = json.loads(sys.argv[1])
fp = fingerprint.fingerprint(trace.from_rows([(i * 1000, i * 1000 + 50, i * 64, (4096, 65536)[i % 2], i % 2, 0, 1)
                                              for i in range(500)]))
print(json.dumps([charts.bars(rows, ["fast", "slow"], ["a", "b"], "iops", "IOPS", ",.0f"), _bs_spec(fp, "cap"),
                  _heat_spec(fp, "cap")], sort_keys=True))
"""
    made = {}
    for checked in ("1", ""):
        made[checked] = subprocess.run([sys.executable, "-c", program, json.dumps(ROWS)], capture_output=True,
                                       env={**os.environ, "IOLAB_CHECK_CHARTS": checked}, text=True,
                                       check=True).stdout
    assert made["1"] == made[""] and len(made["1"]) > 1000
