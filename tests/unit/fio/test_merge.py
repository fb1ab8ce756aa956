"""Latency over jobs and hosts as fio's numbers allow (``fio.merge``): the mean weighted by each part's
I/O count and the pooled standard deviation are those of all the I/Os together."""

from __future__ import annotations

import numpy as np
import pytest

from iolab.fio.merge import merge_latency
from iolab.model import Latency


def latency(samples: np.ndarray) -> Latency:
    """What fio reports of ``samples`` (its stddev of one sample is 0)."""
    sd = float(samples.std(ddof=1)) if len(samples) > 1 else 0.0
    return Latency(min_ns=float(samples.min()), max_ns=float(samples.max()), mean_ns=float(samples.mean()),
                   stddev_ns=sd, samples=len(samples), percentiles_ns={})


@pytest.mark.parametrize("sizes", [(100, 300), (5_000, 7), (1, 2, 3_000)])
def test_the_mean_and_deviation_of_the_parts_are_those_of_every_io(sizes):
    """Two numjobs clones rarely complete the same number of I/Os: an unweighted mean of their means would
    give the slow clone's latency the fast clone's weight."""
    rng = np.random.default_rng(len(sizes))
    parts = [rng.lognormal(np.log(20_000 * (i + 1)), 0.4, n) for i, n in enumerate(sizes)]
    merged = merge_latency([latency(p) for p in parts])
    every = np.concatenate(parts)
    assert merged is not None and merged.samples == len(every)
    assert merged.mean_ns == pytest.approx(every.mean(), rel=1e-12)
    assert merged.stddev_ns == pytest.approx(every.std(ddof=1), rel=1e-9)
    assert (merged.min_ns, merged.max_ns) == (every.min(), every.max())
