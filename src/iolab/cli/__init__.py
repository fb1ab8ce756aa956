"""The ``iolab`` command: parse arguments, make one library call, render the result.

The ``cli`` package is the only code that prints or exits. Each module holds a group of
commands; this one holds the group, the shared output helpers and ``main``. Library errors
(``IolabError``) become ``Error: …`` / ``Hint: …`` on stderr and the error's exit code;
progress goes to stderr, results to stdout, so ``iolab show 3 --format json | jq`` works.
Any other exception is a bug: one ``Error: internal error: …`` line and a hint to report it,
the traceback only with ``--debug``. A stored run that cannot be read is reported with its id
and reason while the command goes on with the others, and then exits 1 (``load_runs``).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import click
import sqlalchemy
from rich.console import Console

from .. import interrupts
from ..dbfaults import DEFAULT_WAIT_S, Wait, describe
from ..errors import IolabError, UsageError
from ..model import Run
from ..report.table import Table, to_csv, to_markdown, to_rich
from ..store import Store, UnreadableRun
from ..units import format_duration, parse_duration_us

out = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)

FORMATS = ("table", "json", "csv", "markdown")


def parse_tags(values: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` from ``--tag`` options as a dict. Raises ``UsageError``."""
    tags = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise UsageError(f"--tag {value!r}: expected key=value")
        tags[key] = val
    return tags


class _Duration(click.ParamType):
    """A duration such as ``90``, ``90s``, ``3m``, ``500ms`` (fio's spellings), in seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration_us(value) / 1e6
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = _Duration()


def store_of(ctx: click.Context) -> Store:
    """The results database for this invocation (``--db``; a command's ``--db-wait``), opened once."""
    if "store" not in ctx.obj:
        ctx.obj["store"] = Store(ctx.obj.get("db"), wait_s=ctx.obj.get("db_wait", DEFAULT_WAIT_S))
        ctx.obj["store"].guard.on_wait = _WaitTeller()
    return ctx.obj["store"]  # type: ignore[no-any-return]


class _WaitTeller:
    """Waits for the database outside a run's jobs (opening a run, reading): one line when one starts,
    one when it ends (while jobs run, the progress line says it instead: ``execute``)."""

    def __init__(self) -> None:
        self.waiting = False

    def __call__(self, wait: Wait) -> None:
        if wait.back:
            err.print(f"The results database answered again after {format_duration(wait.waited_s)}.",
                      style="cyan", markup=False, highlight=False)
        elif not self.waiting:
            err.print(f"The results database is away ({wait.reason}); waiting up to "
                      f"{format_duration(wait.bound_s)} (--db-wait)…", style="yellow", markup=False, highlight=False)
        self.waiting = not wait.back


def load_runs(ctx: click.Context, ids: Sequence[int]) -> list[Run]:
    """The stored runs ``ids`` that can be read; each one that cannot is reported (``Error: run 5
    cannot be read: …``) and makes the command exit 1 once it is done with the others."""
    return read_runs(store_of(ctx), ids, lambda exc: report_unreadable(ctx, exc))


def read_runs(store: Store, ids: Sequence[int], on_unreadable: Callable[[UnreadableRun], None] | None = None
              ) -> list[Run]:
    """The runs ``ids``; one that cannot be read goes to ``on_unreadable`` and is left out (without
    it, ``UnreadableRun`` is raised)."""
    loaded = []
    for run_id in ids:
        try:
            loaded.append(store.get_run(run_id))
        except UnreadableRun as exc:
            if on_unreadable is None:
                raise
            on_unreadable(exc)
    return loaded


def report_unreadable(ctx: click.Context, exc: UnreadableRun) -> None:
    """Print why a stored run cannot be read (once per command); the command's exit code becomes 1 (``main``)."""
    reported = ctx.obj.setdefault("unreadable", set())
    if exc.run_id not in reported:
        reported.add(exc.run_id)
        _report_error(exc, ctx.obj.get("debug", False))
    ctx.obj["exit_code"] = max(ctx.obj.get("exit_code", 0), exc.exit_code)


def emit_tables(tables: Sequence[Table], fmt: str, document: Any = None) -> None:
    """Print ``tables`` in ``fmt``; ``json`` prints ``document`` instead."""
    if fmt == "json":
        click.echo(json.dumps(document, indent=2, default=str))
    elif fmt == "csv":
        click.echo(to_csv(tables), nl=False)
    elif fmt == "markdown":
        click.echo("\n".join(to_markdown(t) for t in tables), nl=False)
    else:
        for table in tables:
            out.print(to_rich(table))
            for note in table.notes:
                out.print(f"  {note}", style="yellow", markup=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--db", metavar="URL", help="Results database: SQLite path or URL, or postgresql://… "
              "[default: $IOLAB_DB or ~/.local/share/iolab/iolab.db]")
@click.option("--debug", is_flag=True, help="Show the traceback of an internal error (for a bug report).")
@click.version_option(package_name="iolab")
@click.pass_context
def cli(ctx: click.Context, db: str | None, debug: bool) -> None:
    """iolab: storage benchmarks with fio — run suites, store every result, compare runs."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    ctx.obj["debug"] = debug
    if ctx.invoked_subcommand != "restore":
        _restore_leftover_tuning()


def _restore_leftover_tuning() -> None:
    """Undo host tuning left by a killed run before doing anything else (tuning.py)."""
    from ..tuning import restore_leftovers
    from .method import report_restored
    for left in restore_leftovers():
        report_restored(left, lambda text: err.print(text, style="yellow", markup=False, highlight=False))



def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI, turning iolab errors into a message and an exit code, and any other
    exception (a bug) into one line and a hint, unless ``--debug`` asks for the traceback."""
    state: dict[str, Any] = {}  # the commands' ctx.obj: --debug, and the exit code of unreadable runs
    interrupts.install()
    try:
        # Without standalone mode click returns ctx.exit()'s code instead of exiting.
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="iolab", standalone_mode=False,
                        obj=state)
    except click.exceptions.Abort:
        err.print("Interrupted.")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except IolabError as exc:
        _report_error(exc, state.get("debug", False))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("Interrupted.")
        sys.exit(130)
    except sqlalchemy.exc.SQLAlchemyError as exc:  # a database error outside the store's guard: still the user's
        click.echo(f"Error: the results database: {describe(exc)}", err=True)
        click.echo("Hint: check --db / $IOLAB_DB and that the database is reachable and writable", err=True)
        sys.exit(1)
    except Exception as exc:
        if state.get("debug"):
            raise
        _report_internal_error(exc)
        sys.exit(1)
    code = code if isinstance(code, int) else 0
    if code or state.get("exit_code"):
        sys.exit(code or state["exit_code"])


def _report_internal_error(exc: Exception) -> None:
    text = " ".join(str(exc).split())
    detail = f"{type(exc).__name__}: {text[:300]}{'…' if len(text) > 300 else ''}" if text else type(exc).__name__
    click.echo(f"Error: internal error: {detail}", err=True)
    click.echo("Hint: this is a bug in iolab; please report it with the output of the same command run with "
               "--debug (iolab --debug …)", err=True)


def _report_error(exc: IolabError, debug: bool = False) -> None:
    """``Error: …`` / ``Hint: …`` on stderr; with ``debug``, first the traceback of what caused it."""
    if debug and exc.__cause__ is not None:
        traceback.print_exception(exc.__cause__)
    click.echo(f"Error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"Hint: {exc.hint}", err=True)


from . import capture as _capture  # noqa: E402,F401  (registers its commands)
from . import compare as _compare  # noqa: E402,F401  (registers its commands)
from . import crashtest as _crashtest  # noqa: E402,F401  (registers its commands)
from . import importer as _importer  # noqa: E402,F401  (registers its commands)
from . import method as _method  # noqa: E402,F401  (registers its commands)
from . import report as _report  # noqa: E402,F401  (registers its commands)
from . import run as _run  # noqa: E402,F401  (registers its commands)
from . import saturate as _saturate  # noqa: E402,F401  (registers its commands)
from . import server as _server  # noqa: E402,F401  (registers its commands)
