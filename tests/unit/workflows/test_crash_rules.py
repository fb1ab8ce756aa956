"""A crash test's rules without fio: what is refused up front, the trigger options, how a phase's fio
ending is judged, and the loss rate's interval. That each cut's options make real fio write its own
random sequence is tests/integration/test_crash_offsets.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab import stats
from iolab.errors import UsageError
from iolab.model import DirectionStats, FioReport, JobResult
from iolab.run import crashphase
from iolab.workflows import crashtest
from paths import FIO

STATE = (FIO / "not-output" / "local-pc-0-verify.state").read_bytes()


def test_what_cannot_give_a_verified_crash_test_is_refused():
    ok = crashtest.Settings(trigger_timeout="2s", trigger="virsh reset vm")
    crashtest.check(ok, crashtest.DEFAULT_OPTIONS, remote=False)
    for settings, options, message in (
        (crashtest.Settings(trigger="x"), {}, "when should the cut happen"),
        (crashtest.Settings(trigger_timeout="2s"), {}, "nothing would cut"),  # fio would only stop
        (crashtest.Settings(trigger_file="/tmp/cut"), {}, "nothing would cut"),
        (crashtest.Settings(trigger_timeout="500ms", trigger="x"), {}, "whole seconds"),
        (crashtest.Settings(trigger_timeout="2s", trigger_remote="x"), {}, "runs on fio servers"),
        (ok, {"verify": "md5", "time_based": "1"}, "time_based: the crash test sets these itself"),
        (ok, {"verify": "pattern"}, "needs a checksum, crc32c or stronger"),
        (ok, {"verify": "crc32c", "rw": "randrw"}, "a crash test writes"),
        (ok, {"verify": "crc32c", "norandommap": None, "iodepth": "8"}, "false verify failures"),
    ):
        with pytest.raises(UsageError, match=message):
            crashtest.check(settings, {**crashtest.DEFAULT_OPTIONS, **options}, remote=False)


def test_trigger_options_and_the_phases_options():
    settings = crashtest.Settings(trigger_timeout="1m", trigger_remote="kill -9 1", trigger="virsh reset vm")
    assert settings.trigger_args() == ("--trigger-timeout=60", "--trigger-remote=kill -9 1")
    phase = crashphase.Phase(2, crashphase.WRITE, settings.trigger_args(), settings.trigger)
    args = crashphase.fio_args(phase, Path("/w"), local=True)
    assert args == ("--aux-path=/w", "--trigger-timeout=60", "--trigger-remote=kill -9 1",
                    f"--trigger=touch /w/{crashphase.MARKER} && virsh reset vm")
    assert crashphase.from_extra({"crash": phase.extra()}) == phase
    options = {**crashtest.DEFAULT_OPTIONS, "randseed": "10"}
    assert crashtest.write_options(options, 3)["randseed"] == crashtest.verify_options(options, 3)["randseed"] == "12"
    assert crashtest.verify_options(options, 1)["verify_state_save"] == "0"
    assert crashtest.wipe_options({**options, "size": "1g", "offset": "4k"}) == {
        "rw": "write", "bs": "1m", "ioengine": "libaio", "direct": "1", "iodepth": "4", "zero_buffers": "1",
        "size": "1g", "offset": "4k"}


def _report(error: int) -> FioReport:
    read = DirectionStats("read", total_ios=100, runtime_ms=10)
    write = DirectionStats("write", total_ios=4096, runtime_ms=0)  # verify_only's planned writes
    return FioReport("json", (JobResult("crash", error=error, directions={"read": read, "write": write}),))


def test_a_verify_phase_that_finds_bad_blocks_did_its_work():
    phase = crashphase.Phase(1, crashphase.VERIFY, states={"local": {"crash-0": STATE}})
    bad = "verify: bad magic header 0, wanted acca at file /dev/x offset 8192, length 4096\n"
    judged = crashphase.judge(phase, crashphase.Ended("failed", "errno 84", _report(84), bad, {}, False, ["local"]))
    assert (judged.status, judged.error, judged.record["failure_count"]) == ("ok", None, 1)
    assert set(judged.report.jobs[0].directions) == {"read"}  # type: ignore[union-attr]
    other = crashphase.judge(phase, crashphase.Ended("failed", "errno 2", _report(2), bad, {}, False, ["local"]))
    assert other.status == "failed"


def test_a_write_phase_is_a_cut_when_the_trigger_fired_and_every_state_came_back():
    phase = crashphase.Phase(1, crashphase.WRITE, ("--trigger-timeout=2",))
    lost = crashphase.Ended("partial", "h2: lost", None, "", {"h1": {"crash-0": STATE}}, True, ["h1", "h2"])
    judged = crashphase.judge(phase, lost)
    assert judged.status == "failed" and "no verify state came back from h2" in (judged.error or "")
    both = crashphase.judge(phase, crashphase.Ended("partial", "h2: lost", None, "",
                                                    {"h1": {"crash-0": STATE}, "h2": {"crash-0": STATE}}, True,
                                                    ["h1", "h2"]))
    assert both.status == "ok" and both.record["state_summary"]["h2"]["crash-0"]["numberio"] == 4961
    early = crashphase.judge(phase, crashphase.Ended("ok", None, None, "", {"h1": {"crash-0": STATE}}, False, ["h1"]))
    assert early.status == "ok" and early.record["fired"] is False


def test_the_wilson_interval_of_a_loss_rate():
    assert stats.wilson(0, 20) == pytest.approx((0.0, 0.1611), abs=1e-4)
    assert stats.wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert stats.wilson(0, 0) is None
    with pytest.raises(ValueError):
        stats.wilson(3, 2)
