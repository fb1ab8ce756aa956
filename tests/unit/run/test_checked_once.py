"""fio's ``--parse-only`` is asked once per distinct job text of a plan (``run.plan``), not per
repeat nor per workflow step; fio's verdicts are replayed (``fakefio``)."""

from __future__ import annotations

import pytest

from iolab.describe import suite as suite_mod
from iolab.run.plan import RunOptions, prepare
from iolab.runner import local


def test_fio_checks_each_distinct_job_text_once(tmp_path, monkeypatch):
    calls: list[str] = []
    real = local.check_job

    def counted(text, workdir, fio="fio", fence=None):
        calls.append(text)
        return real(text, workdir, fio, fence)

    monkeypatch.setattr(local, "check_job", counted)
    suite = suite_mod.load_yaml(
        f"targets: {{t: {{path: {tmp_path / 'data'}, size: 4m}}}}\n"
        "defaults: {ioengine: psync, time_based: 1, runtime: 1s}\n"
        "workloads:\n  - {rw: randread, bs: [4k, 8k], unique_option_for_this_test: 1}\n", "s.yaml")
    with pytest.raises(Exception, match=r"workloads\[0\] \(randread-4k-qd1\): fio rejects the job"):
        prepare(suite, RunOptions())  # the first rejected job in plan order is named
    assert len(calls) == 2
    suite = suite_mod.load_yaml(suite.text.replace(", unique_option_for_this_test: 1", ""), "s.yaml")
    first = prepare(suite, RunOptions(), repeat=3)
    assert len(first.items) == 6 and len(calls) == 4  # each block size once, not per repeat
    prepare(suite, RunOptions())  # a workflow's next step: the same texts
    assert len(calls) == 4
