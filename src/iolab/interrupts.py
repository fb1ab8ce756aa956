"""Ctrl-C and SIGTERM as ``KeyboardInterrupt``, but never raised inside the logging module.

Python raises a signal's exception wherever the main thread is. Before 3.13 that includes logging's
at-fork hooks (``logging._acquireLock``/``_releaseLock``, run around every subprocess fork, so around
every fio, ssh or losetup iolab starts): there the exception is printed as "Exception ignored" and
swallowed, so the interrupt is lost, and logging's module lock stays held, so the next logging call
(any library's) hangs for good (python/cpython#106238). ``handler`` therefore defers an interrupt
that lands inside logging: it sends the same signal again ``RETRY_S`` later.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

#: How long an interrupt that landed inside logging waits before it is sent again (s).
RETRY_S = 0.05


def handler(signum: int, frame: FrameType | None) -> None:
    """A signal handler (``signal.signal``) raising ``KeyboardInterrupt``, or deferring it (see the
    module docstring)."""
    if _in_logging(frame):
        threading.Timer(RETRY_S, os.kill, (os.getpid(), signum)).start()
        return
    raise KeyboardInterrupt


def install() -> None:
    """Ctrl-C (SIGINT) goes through ``handler``; call it from the main thread."""
    signal.signal(signal.SIGINT, handler)


def _in_logging(frame: FrameType | None) -> bool:
    while frame is not None:
        name = frame.f_globals.get("__name__") or ""
        if name == "logging" or name.startswith("logging."):
            return True
        frame = frame.f_back
    return False
