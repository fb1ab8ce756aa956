"""``iolab server start|stop|status``: a fio server for remote targets, on one address."""

from __future__ import annotations

import getpass
from dataclasses import replace
from pathlib import Path

import click

from ..errors import HostError, UsageError
from ..remote import hosts, server
from ..remote.hosts import HostSpec
from ..runner.fence import status as fence_status
from . import err, out


def _bind(bind: str | None, port: int | None, pidfile: str | None) -> tuple[HostSpec | None, Path]:
    if bind is None:
        if pidfile is None:
            raise UsageError("give --bind ADDRESS (and --port) or --pidfile PATH")
        return None, Path(pidfile)
    try:
        spec = hosts.parse(bind)
    except ValueError as exc:
        raise UsageError(f"--bind: {exc}") from None
    if port is not None:
        if spec.kind == "sock":
            raise UsageError("--port does not apply to a unix socket (sock:/path)")
        spec = replace(spec, port=port)
    return spec, Path(pidfile) if pidfile else server.default_pidfile(spec)


_BIND = click.option("--bind", metavar="ADDRESS", help="Address to listen on: 10.0.0.11, fd00::11, "
                     "10.0.0.11:8766 or sock:/run/fio.sock.")
_PORT = click.option("--port", type=click.IntRange(1, 65535), help="TCP port [default: 8765, fio's].")
_PIDFILE = click.option("--pidfile", metavar="PATH", help="iolab's pidfile for this server "
                        "[default: one per address under $XDG_RUNTIME_DIR/iolab or ~/.local/state/iolab].")


@click.group("server")
def server_group() -> None:
    """A fio server (fio --server) for remote targets: start, stop, status.

    \b
    iolab server start --bind 10.0.0.11              # on each host of a target
    iolab server status --bind 10.0.0.11
    iolab server stop --bind 10.0.0.11
    """


@server_group.command("start")
@_BIND
@_PORT
@_PIDFILE
@click.option("--all-interfaces", is_flag=True, help="Allow binding 0.0.0.0 or :: (every interface).")
@click.option("--fio", default="fio", show_default=True, help="The fio executable.")
@click.option("--allow", multiple=True, metavar="PATH", help="A device, file or directory the server's jobs may "
              "write (repeatable); everything else is read-only to them (the fence, as for local runs).")
@click.option("--no-fence", is_flag=True, help="Run the server without the fence.")
def start_cmd(bind: str | None, port: int | None, pidfile: str | None, all_interfaces: bool, fio: str,
              allow: tuple[str, ...], no_fence: bool) -> None:
    """Start a fio server bound to ADDRESS, in the background, inside the fence: its jobs may write
    only the --allow paths and the server's own work directory."""
    if bind is None:
        raise UsageError("give --bind ADDRESS: the fio server listens on that address only")
    spec, path = _bind(bind, port, pidfile)
    assert spec is not None
    record = server.start(spec, path, fio=fio, all_interfaces=all_interfaces, allow=allow, fenced=not no_fence)
    # soft_wrap: paths stay whole (and copyable) however narrow the terminal
    out.print(f"fio server listening on {record.label} (pid {record.pid}); pidfile {path}, log {record.log}",
              markup=False, soft_wrap=True)
    if record.fence is not None:
        out.print(f"fence: {fence_status().tool}; its jobs may write only: {', '.join(record.fence)}", markup=False,
                  soft_wrap=True)
    else:
        err.print("Warning: the server runs without the fence (--no-fence)", style="yellow", markup=False)
    warning = server.FENCED_WARNING if record.fence is not None else server.SECURITY_WARNING
    err.print("Warning: " + warning.format(user=getpass.getuser()), style="yellow", markup=False)
    err.print(f"Stop it with: iolab server stop --pidfile {path}", markup=False)


@server_group.command("stop")
@_BIND
@_PORT
@_PIDFILE
def stop_cmd(bind: str | None, port: int | None, pidfile: str | None) -> None:
    """Stop the fio server iolab started on ADDRESS (and the jobs it runs)."""
    _spec, path = _bind(bind, port, pidfile)
    record, running = server.stop(path)
    out.print(f"fio server {record.label} (pid {record.pid}) " + ("stopped" if running else "was not running; "
              "its record is removed"), markup=False)


@server_group.command("status")
@_BIND
@_PORT
@_PIDFILE
def status_cmd(bind: str | None, port: int | None, pidfile: str | None) -> None:
    """Whether the fio server iolab started on ADDRESS runs and answers; exit 1 when not."""
    _spec, path = _bind(bind, port, pidfile)
    record, running, answer = server.status(path)
    if record is None:
        out.print(f"no fio server record in {path}", markup=False)
        raise HostError(f"no fio server record in {path}", shown=True)
    elif not running:
        out.print(f"fio server {record.label} (pid {record.pid}) is not running; stale record {path}", markup=False)
        raise HostError(f"fio server {record.label} is not running", shown=True)
    elif isinstance(answer, HostError):
        out.print(f"fio server {record.label} (pid {record.pid}) runs but does not answer: {answer.message}",
                  markup=False)
        raise HostError(answer.message, shown=True)
    else:
        assert answer is not None
        out.print(f"fio server {record.label}: running (pid {record.pid}, since {record.started_at}), "
                  f"{answer.fio_version} on {answer.hostname} ({answer.os} {answer.arch}, {answer.cpus} CPUs); "
                  f"log {record.log}", markup=False)
        out.print(f"fence: its jobs may write only: {', '.join(record.fence)}" if record.fence is not None else
                  "fence: none (started with --no-fence)", markup=False)
