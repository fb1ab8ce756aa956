"""History and gate: the statistics on their own (change points, Holm, the prediction interval), reports
read light as compare reads them, and what counts as a change between two runs (the commands over
imported histories: tests/cli/test_history.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as sps

from iolab.analyze import changepoints, gate, history
from iolab.analyze.metrics import metric
from iolab.errors import ParseError
from iolab.fio import parse_output
from iolab.fio.merge import by_job
from iolab.model import to_jsonable
from paths import FIO as DATA

# --- the statistics ----------------------------------------------------------------------------------------------


def test_max_f_is_the_one_way_anova_f_of_the_best_split():
    rng = np.random.default_rng(3)
    w = rng.normal(0, 1, 17)
    w[9:] += 1.5
    best = max(sps.f_oneway(w[:s], w[s:]).statistic
               for s in range(changepoints.MIN_SEGMENT, len(w) - changepoints.MIN_SEGMENT + 1))
    assert changepoints.max_f(w) == pytest.approx(best, rel=1e-9)
    batch = np.stack([w, w[::-1], np.sort(w)])
    assert np.allclose(changepoints.max_f(batch), [changepoints.max_f(b) for b in batch])


def test_a_step_is_found_where_it_is_and_flat_noise_gets_none():
    rng = np.random.default_rng(11)
    steady = rng.normal(10_000, 300, 40)
    assert changepoints.detect(steady) == []
    stepped = np.concatenate([rng.normal(10_000, 300, 30), rng.normal(9_000, 270, 30)])
    found = changepoints.detect(stepped)
    assert len(found) == 1 and abs(found[0].index - 30) <= 2 and found[0].p_value <= changepoints.ALPHA
    assert changepoints.detect([5.0] * 20) == []


def test_six_runs_cannot_show_a_significant_change():
    """3 + 3 values have C(6, 3) = 20 arrangements: the smallest p-value a permutation test can give is
    2/20, so the step is shown unconfirmed: 9 more runs at its level give 2 / C(15, 3) < 0.005."""
    assert changepoints.permutation_p([1.0, 1.0, 1.0, 2.0, 2.0, 2.0]) == pytest.approx(2 / 20)
    (step,) = changepoints.detect([1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    assert (step.index, step.confirmed, step.runs_needed) == (3, False, 9)


def test_holm_adjustment():
    assert gate.holm([0.01, 0.04, None, 0.03]) == [pytest.approx(0.03), pytest.approx(0.06), None,
                                                   pytest.approx(0.06)]


def test_prediction_p_is_one_sided_at_the_prediction_interval():
    values = [100.0, 104.0, 97.0, 101.0, 99.0, 102.0]
    logs = np.log(values)
    n, mean, sd = len(logs), logs.mean(), logs.std(ddof=1)
    lower = float(np.exp(mean - sps.t.ppf(0.95, n - 1) * sd * np.sqrt(1 + 1 / n)))  # 90 % two-sided bound
    assert gate.prediction_p(values, lower, higher_is_better=True) == pytest.approx(0.05)
    assert gate.prediction_p(values, lower, higher_is_better=False) == pytest.approx(0.95)


def test_light_reports_give_the_figures_compare_gives():
    """History reads reports without validating them into the model (``history.light_report``); every
    metric of every sample must come out as ``compare`` computes it from the validated report."""
    names = ("iops", "bw", "clat_mean", "clat_p99", "clat_p50", "clat_max", "lat_mean", "slat_mean", "lat_p99.9")
    checked = 0
    for path in sorted(DATA.glob("fio-*")):
        try:
            report = parse_output(path.read_text(errors="replace"), path.name)
        except ParseError:
            continue
        full, light = by_job(report), by_job(history.light_report(to_jsonable(report)))
        assert full.keys() == light.keys(), path.name
        for key, stats in full.items():
            for name in names:
                assert metric(name).value(light[key]) == metric(name).value(stats), (path.name, key, name)
        checked += 1
    assert checked >= 15


def test_a_firmware_update_is_what_changed(fake_sysfs):
    """NVMe controllers show ``firmware_rev``, SCSI/ATA disks ``rev``; both become the device's ``firmware``,
    and a different one between two runs is a change (``analyze.changes``)."""
    from datetime import UTC, datetime

    from iolab.analyze import changes
    from iolab.facts.targets import block_device_facts
    from iolab.model import RunInfo, TargetFacts
    from iolab.store.history import HistoryResult

    fake_sysfs.disk("nvme0n1", devnum="259:0", device={"model": "Acme NVMe", "firmware_rev": "1.0.3"})
    fake_sysfs.disk("sda", devnum="8:0", device={"model": "Disk", "rev": "GX02"})
    nvme = block_device_facts("nvme0n1", sysfs=str(fake_sysfs.root))
    assert (nvme.firmware, block_device_facts("sda", sysfs=str(fake_sysfs.root)).firmware) == ("1.0.3", "GX02")

    def facts(device):  # type: ignore[no-untyped-def]
        run = RunInfo(id=1, created_at=datetime.now(UTC), status="complete", origin="run", suite_name="s")
        result = HistoryResult(1, 1, "nvme", "w", "[w]\n", None, {}, TargetFacts("/dev/nvme0n1", "block",
                                                                                 device=device), {})
        return changes.facts(run, result)

    updated = replace(nvme, firmware="1.0.4")
    assert changes.between(facts(nvme), facts(updated)) == (changes.Change("firmware", "1.0.3", "1.0.4"),)


def test_the_cpu_latency_limit_and_idle_states_are_what_changed():
    """A run held at cpu_dma_latency=0 after one that was not, or on a host whose idle states differ: the
    change names it (``analyze.changes``), the value in force during the job winning over the host's."""
    from datetime import UTC, datetime

    from iolab.analyze import changes
    from iolab.model import HostFacts, IdleState, RunInfo
    from iolab.store.history import HistoryResult

    host = HostFacts(cpuidle_driver="haltpoll", cpu_dma_latency_us=2_000_000_000,
                     idle_states=(IdleState("POLL", 0, 0), IdleState("haltpoll idle", 1, 1)))

    def facts(host: HostFacts, in_force: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        run = RunInfo(id=1, created_at=datetime.now(UTC), status="complete", origin="run", suite_name="s", host=host)
        extra = {"tuning": {"requested": in_force, "in_force": in_force}} if in_force else {}
        return changes.facts(run, HistoryResult(1, 1, "t", "w", "[w]\n", None, extra, None, None))

    held = changes.between(facts(host), facts(host, {"cpu_dma_latency": "0"}))
    assert held == (changes.Change("CPU latency limit", "none held (2000000000 µs)", "0 µs"),
                    changes.Change("tuning", changes.NOT_SET, "cpu_dma_latency=0"))
    deeper = replace(host, cpuidle_driver="intel_idle", idle_states=(IdleState("C1", 2, 2),))
    assert [c.what for c in changes.between(facts(host), facts(deeper))] == ["cpuidle driver", "CPU idle states"]
