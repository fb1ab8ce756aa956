"""Run ``iolab`` in this process, as the fast tier does: ``iolab.cli.main`` with the arguments, its
stdout and stderr captured (click's ``CliRunner`` isolation), its exit code from ``SystemExit``.

The result has the fields of a finished subprocess (``returncode``, ``stdout``, ``stderr``), so a
test reads the same whether it runs iolab here or as a process (``clirun.iolab``). What a process
would not share with the test is put back after each call: the working directory, environment
variables, signal handlers, the garbage collector's state.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from iolab.cli import main


def iolab(*args: str, db: Path | str | None, cwd: Path | None = None, env: Mapping[str, str] | None = None,
          input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``iolab ARGS`` with ``IOLAB_DB=db`` in this process; never raises on the exit code (an
    exception that is not iolab's own reaches the test, as a traceback would)."""
    full_env = {"IOLAB_DB": str(db) if db is not None else None, "COLUMNS": "200", **(env or {})}
    runner = CliRunner()
    with _restored(cwd), runner.isolation(input=input, env=full_env) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        stdout, stderr = out.getvalue().decode(), err.getvalue().decode()
    return subprocess.CompletedProcess(["iolab", *args], code, stdout, stderr)


@contextmanager
def _restored(cwd: Path | None) -> Iterator[None]:
    here = os.getcwd()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    collecting = gc.isenabled()
    if cwd is not None:
        os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(here)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        gc.unfreeze()  # ``cli`` freezes what its command imported: a process would end here
        if collecting:
            gc.enable()
