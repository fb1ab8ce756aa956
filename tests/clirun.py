"""Run the real ``iolab`` command in a subprocess, with its own database."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
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
