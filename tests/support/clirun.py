"""Run the real ``iolab`` command in a subprocess, with its own database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def iolab(*args: str, db: Path, cwd: Path | None = None, env: dict[str, str] | None = None,
          timeout: float = 300, wrapper: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``iolab ARGS`` with ``IOLAB_DB=db``; returns the finished process (never raises on exit code).
    ``wrapper`` is a command prefix (e.g. one that joins a cgroup first)."""
    full_env = {**os.environ, "IOLAB_DB": str(db), "COLUMNS": "200", **(env or {})}
    return subprocess.run([*wrapper, sys.executable, "-m", "iolab", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def popen(*args: str, db: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``iolab ARGS`` started in the background (for kill and Ctrl-C tests)."""
    full_env = {**os.environ, "IOLAB_DB": str(db), "COLUMNS": "200", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "iolab", *args], cwd=cwd, env=full_env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for(condition: Callable[[], object], timeout_s: float = 60.0) -> None:
    """Return once ``condition()`` is true (checked every 50 ms); fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s"
        time.sleep(0.05)
