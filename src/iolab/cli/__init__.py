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

import atexit
import contextlib
import gc
import importlib
import json
import os
import shutil
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from .. import interrupts
from ..errors import IolabError, UsageError
from ..units import format_duration, parse_duration_us

if TYPE_CHECKING:
    from ..model import Run
    from ..report.table import Table
    from ..run.tuning import LeftOver
    from ..store.database import Store
    from ..store.faults import Wait
    from ..store.records import UnreadableRun

#: How wide tables are printed without a terminal and without ``COLUMNS`` (a file, a CI log): one
#: row a line for most tables, where nobody's window sets a width.
UNBOUNDED_WIDTH = 160

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)


def output_width(stream: Any) -> int | None:
    """The width tables are fitted to (``report.table.to_terminal``): ``$COLUMNS`` when set (also
    when piped: ``COLUMNS=80 iolab compare … | less``), else None (the terminal's width, asked
    anew at each print) when ``stream`` or another standard stream is a terminal, else
    ``UNBOUNDED_WIDTH``."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    streams = (stream, sys.stdin, sys.stdout, sys.stderr)
    if any(s is not None and hasattr(s, "isatty") and s.isatty() for s in streams):
        return None
    return UNBOUNDED_WIDTH


def size_consoles() -> None:
    """Fit ``out`` and ``err`` to the width this invocation prints at (``output_width``): read at
    each ``main``, as the environment and the streams are then (tests run commands in-process)."""
    out.width = output_width(sys.stdout)  # type: ignore[assignment]  # None: rich asks the terminal
    err.width = output_width(sys.stderr)  # type: ignore[assignment]

#: Every command: its name, where it lives (``MODULE:FUNCTION`` in ``iolab.cli``) and its one-line
#: help (the first sentence of its own) for ``iolab --help`` and shell completion, which then
#: import no command module. A command module is imported only when its command runs
#: (``LazyGroup``), and with it SQLAlchemy, pydantic, numpy or the report package as it needs
#: them. A new command is one line here (tests/unit/cli/test_command_table.py checks each line against
#: its command).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run:run", "Run a suite (a built-in name such as `quick` or `cdm`, a .yaml suite, or a fio job file)."),
    "runs": ("show:runs", "List stored runs, newest first."),
    "show": ("show:show", "Show stored runs: RUN is an id, `latest`, a range 3-7, a list 3,5,9, a label or a tag "
                          "KEY=VALUE."),
    "import": ("importer:import_", "Import fio output: JSON, json+, client/server JSON, normal text (any fio "
                                   "version, also pasted from a web page), terse."),
    "compare": ("compare:compare", "Compare stored runs: each of B, C, … against A (the baseline)."),
    "history": ("history:history", "Show each workload's history across stored runs: change points, what changed "
                                   "at each, and the level of each stretch."),
    "gate": ("history:gate", "Judge RUN against the history before it, for CI: exit 3 on a significant regression, "
                             "2 without history to judge it by."),
    "accept": ("history:accept", "Accept the change RUN shows as intended: the gate judges its series against their "
                                 "new level from it on."),
    "report": ("report:report", "Write a report of stored runs: RUN is an id, `latest`, a range 3-7, a list 3,5,9, "
                                "a label or a tag KEY=VALUE."),
    "label": ("curate:label", "Label RUN NAME (RUN: an id, `latest`, a range 3-7, a list 3,5,9, a label or a tag "
                              "KEY=VALUE; every run it matches takes the label, in place of the one it had)."),
    "tag": ("curate:tag", "Tag RUN with KEY=VALUE (a key it has takes the new value), or remove tags with --remove "
                          "KEY (RUN as for `iolab label`)."),
    "delete": ("curate:delete", "Delete RUN... with their results, fio logs, observers' samples and traces (RUN as "
                                "for `iolab show`); nothing of other runs."),
    "lint": ("method:lint_command", "Check a suite or fio job file for methodology problems (catalogue P1–P16), "
                                    "on the targets and host it would run on."),
    "host": ("method:host_command", "Print the facts iolab records with a run: the host, and one device with its "
                                    "queue settings, blk-mq queues and the CPUs `pin: mq` / `pin: numa` would use."),
    "restore": ("method:restore_command", "Write back host tuning left behind by an iolab run that was killed, and "
                                          "remove the ftrace instances of captures that were killed (every command "
                                          "also does both first)."),
    "saturate": ("saturate:saturate", "Find where a target saturates: the knee of its latency–IOPS curve and, with "
                                      "--slo, the most IOPS whose latency stays under the objective"),
    "autotune": ("saturate:autotune_command", "Find the host and fio settings with the most IOPS under --slo within "
                                              "--budget"),
    "crash-test": ("crashtest:crash_test", "Write with fio's verification, cut at a trigger, wait for the host, "
                                           "verify what was acknowledged."),
    "capture": ("capture:capture", "Record DEVICE's block I/O and store it as a run (origin capture) with its "
                                   "fingerprint."),
    "replay": ("capture:replay", "Replay a capture on other storage with fio; the result is a run like any other."),
    "fit": ("capture:fit", "Write a fio job file that reproduces a capture's fingerprint; with --check, show how "
                           "close it is."),
    "help": ("helptopics:help_command", "Print a reference offline: `iolab help suite` (a suite file's keys), `iolab "
                                        "help lint` (the lint catalogue); `iolab help COMMAND` is `iolab COMMAND "
                                        "--help`."),
    "server": ("server:server_group", "A fio server (fio --server) for remote targets: start, stop, status."),
}

#: Commands that may create the results database; every other one refuses a --db that does not
#: exist (``store_of``), so a typo never leaves an empty database behind.
CREATES_DB = frozenset({"run", "import", "saturate", "autotune", "crash-test", "capture", "replay", "fit"})
#: Commands that open the results database: each takes ``--db`` after its name too (``options.db_option``),
#: as ``iolab --db URL COMMAND`` (tests/unit/cli/test_command_table.py holds every one to it).
OPENS_DB = CREATES_DB | frozenset({"runs", "show", "compare", "history", "gate", "accept", "report", "label", "tag",
                                   "delete"})


class LazyGroup(click.Group):
    """A group whose commands are imported when used (click's documented lazy-loading pattern,
    https://click.palletsprojects.com/en/stable/complex/#lazily-loading-subcommands), with
    ``--help`` and completion served from ``COMMANDS`` without importing any of them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))  # a command registered the eager way still shows

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        module_name, _, attr = COMMANDS[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(f"{__name__}.{module_name}"), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attr} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))  # as click.Group.format_commands
        rows = [(name, click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit) if name in COMMANDS
                 else self.commands[name].get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem
        items = [CompletionItem(name, help=COMMANDS[name][1] if name in COMMANDS
                                else self.commands[name].get_short_help_str()) for name in self.list_commands(ctx)
                 if name.startswith(incomplete)]
        if incomplete.startswith("-"):
            items += click.Command.shell_complete(self, ctx, incomplete)
        return items


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
    """The results database for this invocation (``--db``; a command's ``--db-wait``), opened once. Only
    the commands of ``CREATES_DB`` create it; the others raise ``UsageError`` for a database that does
    not exist."""
    from ..store.database import Store, require_existing
    from ..store.faults import DEFAULT_WAIT_S
    if "store" not in ctx.obj:
        command = ctx.find_root().invoked_subcommand
        if command not in CREATES_DB:
            require_existing(ctx.obj.get("db"))
        ctx.obj["store"] = Store(ctx.obj.get("db"), wait_s=ctx.obj.get("db_wait", DEFAULT_WAIT_S))
        ctx.obj["store"].guard.on_wait = _WaitTeller()
    return ctx.obj["store"]  # type: ignore[no-any-return]


def store_opened_late(ctx: click.Context) -> Store:
    """``store_of`` for a command that opens the database once its work has begun (``import`` opens it
    while its workers read): SQLAlchemy, imported then, is imported as the command's own code is
    (``cli``), without collections, and its objects are set aside after (collections over them had
    cost the import 0.03-0.05 s of CPU)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return store_of(ctx)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def import_store_meanwhile() -> None:
    """Import the results database's code (SQLAlchemy: ~0.2 s of start-up, more on a loaded
    machine) in a thread, for a command that waits on other processes before it opens the database
    (a run's plan: fio's checks, the hosts' probes); ``store_of`` then finds it imported, or waits
    for the rest of the import."""
    threading.Thread(target=importlib.import_module, args=("iolab.store.database",), name="iolab-import-store",
                     daemon=True).start()


class _WaitTeller:
    """Waits for the database outside a run's jobs (opening a run, reading): one line when one starts,
    one when it ends (while jobs run, the progress line says it instead: ``run.execute``)."""

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
    from ..store.records import UnreadableRun
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
        report_error(exc, ctx.obj.get("debug", False))
    ctx.obj["exit_code"] = max(ctx.obj.get("exit_code", 0), exc.exit_code)


def emit_tables(tables: Sequence[Table], fmt: str, document: Any = None) -> None:
    """Print ``tables`` in ``fmt``; ``json`` prints ``document`` instead."""
    from ..report.table import to_csv, to_markdown, to_terminal
    if fmt == "json":
        click.echo(json.dumps(document, indent=2, default=str))
    elif fmt == "csv":
        main, context = csv_parts(tables)
        for title in main.notes:  # what the table is of: context, on stderr, so that stdout is one CSV table
            click.echo(f"# {title}", err=True)
        if context:  # after a blank line: read_csv(stderr) reads the titles, then each table under its own
            click.echo("\n" + to_csv(context, titled=True), err=True, nl=False)
        click.echo(to_csv([replace(main, notes=())]), nl=False)
    elif fmt == "markdown":
        click.echo("\n".join(to_markdown(t) for t in tables), nl=False)
    else:
        from rich.padding import Padding
        from rich.text import Text
        for table in tables:
            if table.rows:
                out.print(to_terminal(table, out.width))
            else:  # its title and notes say it all (the gate with nothing failing): no empty grid
                out.print(table.title, style="bold", markup=False, highlight=False)
            for note in table.notes:  # a note that wraps keeps its indent
                out.print(Padding(Text(note, style="yellow"), (0, 0, 0, 2)))


def csv_parts(tables: Sequence[Table]) -> tuple[Table, list[Table]]:
    """What ``--format csv`` prints: on stdout one CSV table, its header the first line (``pandas.read_csv``
    and any CSV reader take it as it is): the first table, with every later one of the same columns (a
    table per run of ``show``, per pair of ``compare``) under a first column ``table`` holding their
    titles; its notes are the titles it holds, for stderr. The other tables (summaries, grids), each
    with its title, go to stderr (``to_csv``'s blocks)."""
    from ..report.table import Cell, Column, Table
    first, *rest = tables
    keys = [c.key for c in first.columns]
    same = [first, *(t for t in rest if [c.key for c in t.columns] == keys)]
    context = [t for t in rest if t not in same]
    if len(same) == 1:
        return replace(first, notes=(first.title,)), context
    rows = tuple((Cell(t.title), *row) for t in same for row in t.rows)
    return Table(first.title, (Column("table", "table"), *first.columns), rows, tuple(t.title for t in same),
                 first.name), context


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--db", metavar="URL", help="Results database: SQLite path or URL, or postgresql://… "
              "[default: $IOLAB_DB or ~/.local/share/iolab/iolab.db]")
@click.option("--debug", is_flag=True, help="Show the traceback of an internal error (for a bug report).")
@click.version_option(package_name="iolab")
@click.pass_context
def cli(ctx: click.Context, db: str | None, debug: bool) -> None:
    """iolab: storage benchmarks with fio — run suites, store every result, compare runs."""
    # The command's module is imported now, and with it most of what it uses (SQLAlchemy, pydantic,
    # click, rich: ~90,000 objects that live as long as the process, and no garbage). Collections during
    # that import would only walk them (a tenth of a report's start-up), and every full collection after
    # would walk them again: imported without collections (``main``), then set aside for good.
    gc.freeze()
    gc.enable()
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    ctx.obj["debug"] = debug
    if ctx.invoked_subcommand != "restore":
        _restore_leftover_tuning()
        _remove_leftover_instances()


def _restore_leftover_tuning() -> None:
    """Undo host tuning left by a killed run before doing anything else (run/tuning.py)."""
    from ..run.tuning import restore_leftovers
    left_overs = restore_leftovers()
    if not left_overs:
        return
    for left in left_overs:
        report_restored(left, lambda text: err.print(text, style="yellow", markup=False, highlight=False))


def _remove_leftover_instances() -> None:
    """Remove the ftrace instances of captures whose process is gone (facts/ftrace.py)."""
    from ..facts import ftrace
    for removed in ftrace.sweep().removed:
        err.print(ftrace.describe(removed) + ("; see `iolab restore`" if removed.error else ""), style="yellow",
                  markup=False, highlight=False)


def report_restored(left: LeftOver, echo: Callable[[str], Any]) -> None:
    """One line per journal: whose it was and each value written back (values that were
    already right are not listed)."""
    owner = left.owner
    changes = []
    for r in left.restored:
        if r.error is not None:
            changes.append(f"{r.scope} {r.key}: FAILED ({r.error})")
        elif r.was is None:
            changes.append(f"{r.scope} {r.key}: device gone")
        elif r.was != r.value:
            changes.append(f"{r.scope} {r.key} {r.was} -> {r.value}")
    echo(f"Restored host tuning left by iolab (pid {owner.get('pid', '?')}, started {owner.get('started_at', '?')}):"
         f" {', '.join(changes) or 'every value was already back'}"
         + ("; journal kept, see `iolab restore --discard`" if left.kept else ""))


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI, turning iolab errors into a message and an exit code, and any other
    exception (a bug) into one line and a hint, unless ``--debug`` asks for the traceback."""
    state: dict[str, Any] = {}  # the commands' ctx.obj: --debug, and the exit code of unreadable runs
    collecting = gc.isenabled()
    gc.disable()  # until the command's code is imported: see ``cli``
    interrupts.install()
    atexit.unregister(gc.freeze)  # once however often main runs in a process (tests)
    atexit.register(gc.freeze)  # see _close
    size_consoles()
    try:
        _main(argv, state)
    finally:
        _close(state)
        if collecting:  # also when the command line was refused before ``cli`` ran
            gc.enable()


def _close(state: dict[str, Any]) -> None:
    """Close the command's database now (SQLite folds its write-ahead log back into the file on the
    last close); the exit's teardown would close it too, after a garbage collection over every
    object the command made. That collection is skipped: ``gc.freeze`` at exit leaves the objects
    to the process's end (~0.1 s after a run, several times that on a loaded machine)."""
    store = state.get("store")
    if store is not None:
        with contextlib.suppress(Exception):  # it was away, or broke: its own error is reported already
            store.close()


def _main(argv: Sequence[str] | None, state: dict[str, Any]) -> None:
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
        if not exc.shown:
            report_error(exc, state.get("debug", False))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("Interrupted.")
        sys.exit(130)
    except Exception as exc:
        if state.get("debug"):
            raise
        if _database_error(exc):  # outside the store's guard: still the user's, not a bug
            from ..store.faults import describe
            say("Error", f"the results database: {describe(exc)}")
            say("Hint", "check --db / $IOLAB_DB and that the database is reachable and writable")
            sys.exit(1)
        _report_internal_error(exc)
        sys.exit(1)
    code = code if isinstance(code, int) else 0
    if code or state.get("exit_code"):
        sys.exit(code or state["exit_code"])


def _database_error(exc: Exception) -> bool:
    """Whether ``exc`` is SQLAlchemy's (looked up only if it was imported: start-up stays light)."""
    sqlalchemy = sys.modules.get("sqlalchemy.exc")
    return sqlalchemy is not None and isinstance(exc, sqlalchemy.SQLAlchemyError)


def _report_internal_error(exc: Exception) -> None:
    text = " ".join(str(exc).split())
    detail = f"{type(exc).__name__}: {text[:300]}{'…' if len(text) > 300 else ''}" if text else type(exc).__name__
    say("Error", f"internal error: {detail}")
    say("Hint", "this is a bug in iolab; please report it with the output of the same command run with --debug "
        "(iolab --debug …)")


def report_error(exc: IolabError, debug: bool = False) -> None:
    """``Error: …`` / ``Hint: …`` on stderr; with ``debug``, first the traceback of what caused it."""
    if debug and exc.__cause__ is not None:
        traceback.print_exception(exc.__cause__)
    say("Error", exc.message)
    if exc.hint:
        say("Hint", exc.hint)


def say(label: str, text: str) -> None:
    """``label: text`` on stderr: on a terminal wrapped to its width (``wrapped``), else as it is, as
    scripts and logs match it."""
    width = shutil.get_terminal_size().columns if sys.stderr.isatty() else None
    click.echo(f"{label}: {text}" if width is None else "\n".join(wrapped(label, text, width)), err=True)


def wrapped(label: str, text: str, width: int) -> list[str]:
    """The lines of ``label: text`` at most ``width`` columns wide: each of ``text``'s lines wrapped
    at spaces and continued under its own start (the first line's under the text, past the label);
    a word longer than the width is left whole (a path, a URL)."""
    import textwrap

    out = []
    for i, line in enumerate(text.splitlines() or [""]):
        start = f"{label}: " if i == 0 else line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line.lstrip(), width, initial_indent=start, subsequent_indent=" " * len(start),
                             break_long_words=False, break_on_hyphens=False) or [start]
    return out
