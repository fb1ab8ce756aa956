"""``iolab label``, ``iolab tag``, ``iolab delete``: curating stored runs (``store.curation``)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence

import click

from ..errors import UsageError
from . import parse_tags, store_of
from .options import db_option


@click.command()
@click.argument("selector", metavar="RUN")
@click.argument("name", required=False)
@click.option("--remove", is_flag=True, help="Take the label off instead.")
@db_option
@click.pass_context
def label(ctx: click.Context, selector: str, name: str | None, remove: bool) -> None:
    """Label RUN NAME (RUN: an id, `latest`, a range 3-7, a list 3,5,9, a label or a tag KEY=VALUE; every run
    it matches takes the label, in place of the one it had)."""
    if remove == (name is not None):
        raise UsageError("give a NAME, or --remove to take the label off" if not remove
                         else "give a NAME or --remove, not both")
    if name is not None and not name.strip():
        raise UsageError("the label is empty", hint="to take a label off: iolab label RUN --remove")
    store = store_of(ctx)
    ids = store.resolve(selector)
    store.retag(ids, label=name, unlabel=name is None)
    click.echo(f"{_runs(ids)}: {'no label' if name is None else f'labelled {name}'}")


@click.command()
@click.argument("selector", metavar="RUN")
@click.argument("tags", nargs=-1, metavar="KEY=VALUE...")
@click.option("--remove", "removed", multiple=True, metavar="KEY", help="Remove this tag (repeatable).")
@db_option
@click.pass_context
def tag(ctx: click.Context, selector: str, tags: Sequence[str], removed: Sequence[str]) -> None:
    """Tag RUN with KEY=VALUE (a key it has takes the new value), or remove tags with --remove KEY (RUN as for
    `iolab label`)."""
    if not tags and not removed:
        raise UsageError("give KEY=VALUE to set, or --remove KEY", hint="iolab tag 12 disk=nvme0 --remove old")
    values = parse_tags(tags)
    if clash := sorted(set(values) & set(removed)):
        raise UsageError(f"tag {', '.join(clash)} is both set and removed")
    store = store_of(ctx)
    ids = store.resolve(selector)
    store.retag(ids, values, removed)
    done = [*(f"{k}={v}" for k, v in values.items()), *(f"{k} removed" for k in removed)]
    click.echo(f"{_runs(ids)}: {', '.join(done)}")


@click.command()
@click.argument("selectors", nargs=-1, required=True, metavar="RUN...")
@click.option("--yes", is_flag=True, help="Delete them (without it: only say what would go).")
@db_option
@click.pass_context
def delete(ctx: click.Context, selectors: Sequence[str], yes: bool) -> None:
    """Delete RUN... with their results, fio logs, observers' samples and traces (RUN as for `iolab show`);
    nothing of other runs. A run in progress is refused. Without --yes, say what would go and exit 2."""
    from ..run.spool import Spool
    store = store_of(ctx)
    ids = list(dict.fromkeys(i for s in selectors for i in store.resolve(s)))
    deleted = store.delete_runs(ids, confirm=yes)
    verb = "Deleted" if yes else "Would delete"
    for d in deleted:
        named = f" ({d.label})" if d.label else ""
        click.echo(f"{verb} run {d.run_id}{named}: {_n(d.results, 'result')}, {_n(d.logs, 'fio log')}, "
                   f"{_n(d.samples, 'host sample set')}, {_n(d.traces, 'trace')}")
        if yes:  # what a run left in the spool (fio's files of a job not stored) is its own too
            shutil.rmtree(Spool(store.display_url, d.run_id, d.created_at).path, ignore_errors=True)
    if not yes:
        raise UsageError("nothing was deleted", hint=f"to delete {'it' if len(deleted) == 1 else 'them'}: the same "
                         "command with --yes")


def _runs(ids: Sequence[int]) -> str:
    return f"run {ids[0]}" if len(ids) == 1 else f"runs {', '.join(map(str, ids))}"


def _n(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"
