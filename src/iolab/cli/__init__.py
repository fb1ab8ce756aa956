"""The ``iolab`` command: parse arguments, make one library call, render the result.

The ``cli`` package is the only code that prints or exits. Each module holds a group of
commands; this one holds the group, the shared output helpers and ``main``. Library errors
(``IolabError``) become ``Error: …`` / ``Hint: …`` on stderr and the error's exit code;
progress goes to stderr, results to stdout, so ``iolab show 3 --format json | jq`` works.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console

from ..errors import IolabError, UsageError
from ..report.table import Table, to_csv, to_markdown, to_rich
from ..store import Store

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


def store_of(ctx: click.Context) -> Store:
    """The results database for this invocation (``--db``), opened once."""
    if "store" not in ctx.obj:
        ctx.obj["store"] = Store(ctx.obj.get("db"))
    return ctx.obj["store"]  # type: ignore[no-any-return]


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
@click.version_option(package_name="iolab")
@click.pass_context
def cli(ctx: click.Context, db: str | None) -> None:
    """iolab: storage benchmarks with fio — run suites, store every result, compare runs."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db
    if ctx.invoked_subcommand != "restore":
        _restore_leftover_tuning()


def _restore_leftover_tuning() -> None:
    """Undo host tuning left by a killed run before doing anything else (tuning.py)."""
    from ..tuning import restore_leftovers
    from .method import report_restored
    for left in restore_leftovers():
        report_restored(left, lambda text: err.print(text, style="yellow", markup=False, highlight=False))



def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI, turning iolab errors into a message and an exit code."""
    try:
        # Without standalone mode click returns ctx.exit()'s code instead of exiting.
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="iolab", standalone_mode=False)
    except click.exceptions.Abort:
        err.print("Interrupted.")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except IolabError as exc:
        _report_error(exc)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("Interrupted.")
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)


def _report_error(exc: IolabError) -> None:
    click.echo(f"Error: {exc.message}", err=True)
    if exc.hint:
        click.echo(f"Hint: {exc.hint}", err=True)


from . import compare as _compare  # noqa: E402,F401  (registers its commands)
from . import crashtest as _crashtest  # noqa: E402,F401  (registers its commands)
from . import importer as _importer  # noqa: E402,F401  (registers its commands)
from . import method as _method  # noqa: E402,F401  (registers its commands)
from . import report as _report  # noqa: E402,F401  (registers its commands)
from . import run as _run  # noqa: E402,F401  (registers its commands)
from . import saturate as _saturate  # noqa: E402,F401  (registers its commands)
from . import server as _server  # noqa: E402,F401  (registers its commands)
