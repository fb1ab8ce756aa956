"""Every remote job has a time bound (``run.remote.time_bound_s``), whatever its job file says."""

from __future__ import annotations

from iolab.fio import jobfile
from iolab.run.remote import DEFAULT_BOUND_S, time_bound_s


def test_every_remote_job_has_a_time_bound():
    timed = jobfile.parse("[global]\nruntime=30s\nramp_time=5\n[a]\nrw=read\n[b]\nruntime=1m\n")
    assert time_bound_s(timed, 300) == 2 * 65 + 300  # the longest job, ramp included, twice, plus slack
    assert time_bound_s(jobfile.parse("[a]\nsize=1g\n"), 300) == DEFAULT_BOUND_S + 300  # fio decides: still bounded
