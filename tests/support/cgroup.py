"""cgroup v1 blkio throttling for tests: an HDD-like block device next to a fast one.

    with cgroup.throttled("/dev/loop3", iops=200) as group:
        subprocess.run([*group.wrapper(), "iolab", "run", ...])   # runs inside the cgroup

The child cgroup caps the device at ``iops`` reads and writes per second for every process in
it; ``wrapper()`` is a command prefix that moves the command into the cgroup before it starts
(children such as fio inherit it). The cgroup is removed afterwards, by its path.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")
_count = itertools.count()


def unavailable_reason() -> str | None:
    """Why throttling cannot be used here, or None."""
    if os.geteuid() != 0:
        return "needs root to create a blkio cgroup"
    if not (BLKIO / "blkio.throttle.read_iops_device").exists():
        return f"no cgroup v1 blkio throttling at {BLKIO}"
    return None


@dataclass(frozen=True)
class Group:
    path: Path

    def wrapper(self) -> list[str]:
        """A command prefix: the shell joins the cgroup, then execs the command."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path)]


@contextlib.contextmanager
def throttled(device: str, iops: int) -> Iterator[Group]:
    """A child blkio cgroup capping ``device`` (e.g. ``/dev/loop3``) at ``iops`` per direction."""
    majmin = Path(f"/sys/class/block/{os.path.basename(device)}/dev").read_text().strip()
    path = BLKIO / f"iolab-test-{os.getpid()}-{next(_count)}"
    path.mkdir()
    try:
        (path / "blkio.throttle.read_iops_device").write_text(f"{majmin} {iops}\n")
        (path / "blkio.throttle.write_iops_device").write_text(f"{majmin} {iops}\n")
        yield Group(path)
    finally:
        for _ in range(50):  # the last task may still be exiting
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
