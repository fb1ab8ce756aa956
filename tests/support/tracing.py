"""The ftrace instances of iolab's captures (``instances/iolab-<pid>-<start>-<pidns>-<n>`` in tracefs,
``facts/ftrace.py``), for the tests that capture for real: which exist, whether one is recording, and
the removal of those a test's captures left behind (a capture ended by SIGKILL cannot remove its own;
the next iolab command would, but a test does not wait for one).

    @pytest.fixture(autouse=True)
    def _tracefs_clean():
        with tracing.cleaned_up():
            yield
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from iolab.workflows.capture import tracefs

EVENTS = ("block_rq_issue", "block_rq_complete")


def instances(pid: int | None = None) -> list[Path]:
    """iolab's ftrace instances (of the capturing process ``pid``, or all)."""
    return sorted(tracefs.TRACEFS.glob(f"instances/iolab-{'*' if pid is None else pid}-*"))


def recording(pid: int) -> bool:
    """A capture of process ``pid`` has its events enabled (it records from now on)."""
    for inst in instances(pid):
        try:
            return (inst / "events/block/block_rq_complete/enable").read_text().strip() == "1"
        except OSError:
            return False
    return False


def _pid(instance: Path) -> int:
    return int(instance.name.split("-")[1])


def _remove(instance: Path) -> None:
    for event in EVENTS:
        with contextlib.suppress(OSError):
            (instance / "events" / "block" / event / "enable").write_text("0")
    for _ in range(50):
        try:
            instance.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY while a reader still holds trace_pipe
            time.sleep(0.1)


@contextlib.contextmanager
def cleaned_up() -> Iterator[list[Path]]:
    """Yields a list that holds, after the block, the instances that appeared during it and whose
    capturing process is gone (left behind), which are removed; instances of captures still running
    (another test's) are left alone."""
    before = set(instances())
    left: list[Path] = []
    try:
        yield left
    finally:
        for inst in instances():
            if inst not in before and not os.path.exists(f"/proc/{_pid(inst)}"):
                left.append(inst)
                _remove(inst)
