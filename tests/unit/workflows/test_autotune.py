"""Auto-tuning's search as a pure function of its probes (a device model whose best setting is
known), its axes, and the suite it writes, read back by iolab's own suite loader."""

from __future__ import annotations

import pytest

from iolab.analyze import saturation
from iolab.analyze.saturation import Point
from iolab.describe import suite
from iolab.describe.spec import Target
from iolab.remote import hosts as remote_hosts
from iolab.workflows import autotune
from iolab.workflows.autotune import Axis, Descent, Measured, best_suite

AXES = (Axis("ioengine", ("io_uring",)), Axis("numjobs", ("2",)), Axis("scheduler", ("mq-deadline", "bfq")),
        Axis("nomerges", ("2",)))


def model(config: autotune.Config) -> Point:
    """io_uring +20 %, 2 jobs +10 %, bfq −30 % and p99 over 1 ms, nomerges=2 +5 % only with io_uring."""
    c = dict(config)
    iops = 50_000 * (1.2 if c.get("ioengine") == "io_uring" else 1) * (1.1 if c.get("numjobs") == "2" else 1)
    iops *= 0.7 if c.get("scheduler") == "bfq" else 1.0
    iops *= 1.05 if c.get("nomerges") == "2" and c.get("ioengine") == "io_uring" else 1.0
    p99 = 2e6 if c.get("scheduler") == "bfq" else 0.5e6
    return Point(16, 1, iops, p99 / 2, p99)


def descend(descent: Descent) -> list[Measured]:
    measured: list[Measured] = []
    while (config := descent.next(measured)) is not None:
        measured.append(Measured(config, model(config)))
    return measured


def test_one_pass_tries_each_value_once_and_keeps_the_best():
    descent = Descent(AXES, saturation.parse_slo("p99<=1ms"))
    measured = descend(descent)
    assert len(measured) == 1 + 1 + 1 + 2 + 1  # as it is, then every other value of each axis
    best = descent.best(measured)[0]
    assert dict(best) == {"ioengine": "io_uring", "numjobs": "2", "nomerges": "2"}
    grid = [((("ioengine", e), ("numjobs", j), ("scheduler", s), ("nomerges", n)))
            for e in ("libaio", "io_uring") for j in ("1", "2") for s in ("none", "bfq") for n in ("0", "2")]
    best_in_grid = max(model(c).iops for c in grid if model(c).slo_ns <= 1e6)  # type: ignore[operator]
    assert model(best).iops >= 0.95 * best_in_grid


def test_a_configuration_that_breaks_the_slo_is_never_best():
    descent = Descent((Axis("scheduler", ("bfq",)),), saturation.parse_slo("p99<=1ms"))
    measured = [Measured((), Point(16, 1, 10_000, 1e5, 5e5)), Measured((("scheduler", "bfq"),),
                                                                       Point(16, 1, 90_000, 1e6, 3e6))]
    assert descent.best(measured) == [()]


def test_ranking_is_feasible_first_then_by_mean_iops_with_intervals():
    slo = saturation.parse_slo("p99<=1ms")
    fast_late = (("ioengine", "io_uring"),)
    ranked = autotune.rank({(): [Point(16, 1, v, 1e5, 5e5) for v in (100, 110, 105)],
                            fast_late: [Point(16, 1, v, 1e6, 2e6) for v in (200, 210, 190)]}, slo)
    assert [r.config for r in ranked] == [(), fast_late] and ranked[0].feasible and not ranked[1].feasible
    low, high = ranked[0].interval  # type: ignore[misc]
    assert low < 105 < high and low > 0


def test_axes_leave_out_the_value_in_force_and_what_does_not_apply():
    found = autotune.axes(["ioengine", "numjobs", "read_ahead_kb", "scheduler"], {}, {"ioengine": "libaio",
                          "rw": "randread", "direct": "1"}, cpus=4, device=None)
    assert [(a.name, a.values) for a in found] == [("ioengine", ("io_uring",)), ("numjobs", ("2", "4"))]
    with pytest.raises(ValueError, match="unknown axis"):
        autotune.axes(["turbo"], {}, {}, 2, None)


def test_the_cpu_latency_axis_where_idle_cpus_can_go_deep_and_iolab_can_hold_a_request(fake_sysfs, tmp_path):
    """``cpu_dma_latency`` 0 is an axis on a host whose idle CPUs may enter a state with an exit latency
    (a fake haltpoll tree), where the latency device is writable and not already held at 0; a probe of it
    holds the request (its tuning) and is named for it; the best suite keeps it."""
    fake_sysfs.cpuidle([0, 1], [("POLL", 0, 0), ("haltpoll idle", 1, 1)], driver="haltpoll", governor="haltpoll")
    pm_qos = tmp_path / "cpu_dma_latency"
    pm_qos.write_bytes(b"\0\0\0\0")
    base = {"ioengine": "io_uring", "rw": "randread", "bs": "4k", "direct": "1"}

    def found(in_force: dict[str, str], path: str = str(pm_qos)) -> list[tuple[str, tuple[str, ...]]]:
        return [(a.name, a.values) for a in autotune.axes(["cpu_dma_latency"], in_force, base, 2, None,
                                                          sysfs=str(fake_sysfs.root), pm_qos=path)]

    assert found({"cpu_dma_latency": "2000000000"}) == [("cpu_dma_latency", ("0",))]
    assert found({}) == [("cpu_dma_latency", ("0",))]  # not readable: the kernel's default is assumed
    assert found({"cpu_dma_latency": "0"}) == []  # held at 0 already (tuned, a benchmark)
    assert found({}, str(tmp_path / "missing")) == []  # iolab cannot hold one here
    no_cpuidle = str(tmp_path / "x" / "sys")
    assert autotune.axes(["cpu_dma_latency"], {}, base, 2, None, sysfs=no_cpuidle, pm_qos=str(pm_qos)) == []
    config = (("ioengine", "libaio"), ("cpu_dma_latency", "0"))
    options, tune, pin = autotune.configured(base, config, Point(8, 1, 1000.0))
    assert tune == {"cpu_dma_latency": "0"} and pin is None
    assert autotune.config_name(base, config, options) == "randread-4k-qd8-j1-libaio-dmalat0"
    text = best_suite(Target("ssd", "/mnt/ssd/f"), base, config, Point(8, 1, 1000.0), "30s", "best")
    assert suite.load_yaml(text, "best.yaml").tune == {"cpu_dma_latency": ("0",)}
    assert "cpu_dma_latency" in autotune.HERE  # this machine's: not tried for a target on remote hosts


def test_the_best_configuration_is_a_suite_iolab_runs_again(tmp_path):
    target = Target("dev", "/dev/loop9")
    text = best_suite(target, {"rw": "randread", "bs": "4k", "ioengine": "libaio", "direct": "1", "time_based": "1"},
                      (("ioengine", "io_uring"), ("numjobs", "2"), ("scheduler", "none"), ("pin", "mq")),
                      Point(16, 1, 1000.0), "30s", "iolab autotune, run 7")
    assert text.startswith("# iolab autotune, run 7\n")
    loaded = suite.load_yaml(text, "best.yaml")
    (workload,) = loaded.workloads
    options = dict(workload.sections[0].options)
    assert (options["ioengine"], options["numjobs"], options["iodepth"], options["runtime"]) == (
        "io_uring", "2", "8", "30s")  # 16 outstanding I/Os over 2 jobs
    assert loaded.tune == {"scheduler": ("none",)} and loaded.method.pin == "mq"
    assert [t.path for t in loaded.targets] == ["/dev/loop9"]


def test_the_best_suite_of_a_target_on_hosts_names_them_and_their_facts_over_ssh():
    """Loopback specs only: the suite is written and read back, no host is contacted."""
    target = Target("vm", "/dev/vdb", hosts=(remote_hosts.parse("ssh://lab@127.0.0.1:2222"),
                                              remote_hosts.parse("127.0.0.1:8766")), ssh=True)
    text = best_suite(target, {"rw": "randread", "bs": "4k", "ioengine": "libaio"}, (("numjobs", "2"),),
                      Point(4, 1, 1000.0), "10s", "iolab autotune, run 3")
    (loaded,) = suite.load_yaml(text, "best.yaml").targets
    assert (loaded.path, loaded.hosts, loaded.ssh, loaded.size) == ("/dev/vdb", target.hosts, True, None)


def test_a_best_whose_interval_overlaps_as_it_is_is_not_distinguishable_and_the_rounds_would_separate():
    """The field report's autotune: pin=mq 133,961 IOPS against as it is 108,115, three noisy repetitions
    each: overlapping intervals; the repetitions it names separate intervals as wide as these."""
    pinned = (("pin", "mq"),)
    values = {pinned: [100_000, 134_000, 168_000], (): [60_000, 108_000, 156_000]}
    judged = autotune.against_as_is(autotune.rank({c: [Point(16, 1, v) for v in vs] for c, vs in values.items()},
                                                  None))
    assert judged is not None and judged.best.config == pinned and not judged.distinguishable
    assert judged.rounds is not None and 3 < judged.rounds <= autotune.MAX_ROUNDS
    more = {c: [Point(16, 1, v) for v in (vs * judged.rounds)[:judged.rounds]] for c, vs in values.items()}
    again = autotune.against_as_is(autotune.rank(more, None))
    assert again is not None and again.distinguishable
    apart = autotune.against_as_is(autotune.rank({pinned: [Point(16, 1, v) for v in (200, 205, 210)],
                                                  (): [Point(16, 1, v) for v in (100, 104, 98)]}, None))
    assert apart is not None and apart.distinguishable and apart.rounds is None
    assert autotune.against_as_is(autotune.rank({(): [Point(16, 1, v) for v in (200, 205, 210)],
                                                 pinned: [Point(16, 1, v) for v in (100, 104, 98)]}, None)) is None
