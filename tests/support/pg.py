"""A throw-away PostgreSQL server for tests: initdb in a temp dir, unix socket only (no TCP).

Uses Debian's server binaries (/usr/lib/postgresql/<ver>/bin). As root, the server runs as the
``postgres`` user (PostgreSQL refuses to run as root). Everything is removed on ``stop``. A test run
starts one (``conftest.pg_server``) and gives each test a database of its own (``database``).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

_numbers = itertools.count(1)


def pg_bin() -> str | None:
    """The newest installed server bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else None


@dataclass
class PostgresServer:
    url: str
    datadir: str
    bindir: str
    base: str
    port: int = 54329

    def pg_ctl(self, *args: str) -> None:
        """``pg_ctl -D DATADIR ARGS`` as the server's owner; raises CalledProcessError."""
        subprocess.run(self._as_owner(f"{self.bindir}/pg_ctl", "-D", self.datadir, *args), capture_output=True,
                       check=True, timeout=120)

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every connection is closed, the server is back when this returns."""
        self.pg_ctl("-l", f"{self.base}/log", "-w", "-m", "fast", "restart")

    def halt(self) -> None:
        """Stop the server (``-m fast``), keeping its data for ``resume``."""
        self.pg_ctl("-w", "-m", "fast", "stop")

    def resume(self) -> None:
        """Start a halted server again, on its own socket only."""
        self.pg_ctl("-l", f"{self.base}/log", "-w", "-t", "60", "-o", _options(self.port, self.base), "start")

    def _as_owner(self, *argv: str) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)

    @contextmanager
    def database(self) -> Iterator[str]:
        """A new, empty database on this server: its URL; dropped when the block ends (its
        connections closed first)."""
        name = f"t{next(_numbers)}"
        self._admin(f"CREATE DATABASE {name}")
        try:
            yield self.url.replace("@/postgres?", f"@/{name}?")
        finally:
            self._admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def _admin(self, sql: str) -> None:
        import psycopg
        host = self.url.split("host=")[1].split("&")[0]
        with psycopg.connect(host=host, port=self.port, user="postgres", dbname="postgres", autocommit=True) as c:
            c.execute(sql)  # type: ignore[arg-type]

    def stop(self) -> None:
        subprocess.run(self._as_owner(f"{self.bindir}/pg_ctl", "-D", self.datadir, "-m", "immediate", "stop"),
                       capture_output=True, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


def start(port: int = 54329) -> PostgresServer:
    """Start a server; raises RuntimeError with the server's log when it does not come up."""
    bindir = pg_bin()
    if bindir is None:
        raise RuntimeError("PostgreSQL server binaries are not installed (Debian package postgresql)")
    base = tempfile.mkdtemp(prefix="iolab-pg-")
    datadir, sockdir = f"{base}/data", f"{base}/sock"
    os.makedirs(sockdir)
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        shutil.chown(sockdir, "postgres")
    server = PostgresServer(
        url=f"postgresql+psycopg://postgres@/postgres?host={sockdir}&port={port}",
        datadir=datadir, bindir=bindir, base=base, port=port,
    )
    steps = [
        [f"{bindir}/initdb", "-D", datadir, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        [f"{bindir}/pg_ctl", "-D", datadir, "-l", f"{base}/log", "-w", "-t", "60", "-o", _options(port, base),
         "start"],
    ]
    for argv in steps:
        proc = subprocess.run(server._as_owner(*argv), capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log = Path(base, "log").read_text() if Path(base, "log").exists() else ""
            server.stop()
            raise RuntimeError(f"{argv[0]} failed: {proc.stderr}{log}")
    return server


def _options(port: int, base: str) -> str:
    """The server's options: its own unix socket in ``base``, no TCP."""
    return f"-p {port} -k {base}/sock -c listen_addresses='' -c fsync=off"
