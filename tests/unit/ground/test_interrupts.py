"""Ctrl-C never lands inside logging, whose at-fork hooks would swallow it and keep their lock
(python/cpython#106238): the handler defers it there and raises it anywhere else."""

from __future__ import annotations

import signal
import sys
import time

import pytest

from iolab import interrupts


def _frame_of_module(name: str):  # type: ignore[no-untyped-def]
    """A live frame whose code belongs to module ``name``, as a hook of that module would run."""
    code = "def here():\n    return sys._getframe()\n"
    namespace = {"__name__": name, "sys": sys}
    exec(code, namespace)
    return namespace["here"]()


def test_an_interrupt_outside_logging_is_raised_at_once():
    with pytest.raises(KeyboardInterrupt):
        interrupts.handler(signal.SIGINT, _frame_of_module("iolab.runner.local"))


def test_an_interrupt_inside_logging_comes_again_a_moment_later():
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, _frame: seen.append(signum))
    try:
        interrupts.handler(signal.SIGUSR1, _frame_of_module("logging"))  # not raised: deferred
        assert seen == []
        deadline = time.monotonic() + 5
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert seen == [signal.SIGUSR1]
