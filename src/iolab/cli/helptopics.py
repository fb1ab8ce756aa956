"""``iolab help TOPIC``: references printed offline, from the code they describe: ``suite`` (a suite file's keys,
from its model, ``describe.schema``) and ``lint`` (the catalogue, as ``iolab lint --list``)."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from . import emit_tables
from .options import format_option

TOPICS = ("suite", "lint")


@click.command("help")
@click.argument("topic", required=False, metavar="TOPIC")
@format_option()
@click.pass_context
def help_command(ctx: click.Context, topic: str | None, fmt: str) -> None:
    """Print a reference offline: `iolab help suite` (a suite file's keys), `iolab help lint` (the lint
    catalogue); `iolab help COMMAND` is `iolab COMMAND --help`."""
    if topic is None:
        click.echo(ctx.find_root().get_help())
        return
    if topic == "suite":
        suite_reference(fmt)
    elif topic == "lint":
        from .method import lint_command
        ctx.invoke(lint_command, suite=None, listing=True, fmt=fmt)
    else:
        root = ctx.find_root()
        command = root.command.get_command(root, topic) if isinstance(root.command, click.Group) else None
        if command is None:
            raise UsageError(f"no help topic or command {topic!r}",
                             hint=f"topics: {', '.join(TOPICS)}; commands: iolab --help")
        click.echo(command.get_help(click.Context(command, info_name=topic, parent=root)))


def suite_reference(fmt: str) -> None:
    """The keys of a suite file and of a target, from their models (name, type, default, what it is)."""
    from ..describe.schema import LintModel, SuiteModel, TargetModel
    from ..report.table import Cell, Column, Table
    tables = []
    for title, model in (("a suite file (YAML): its keys", SuiteModel), ("a target (targets: NAME: {…})", TargetModel),
                         ("lint: {…}", LintModel)):
        rows = tuple((Cell(name), Cell(_type(field.annotation)), Cell(_default(field)), Cell(field.description or ""))
                     for name, field in model.model_fields.items())
        tables.append(Table(title, (Column("key", "key", whole=True), Column("type", "type"),
                                    Column("default", "default"), Column("what", "what")), rows))
    document = {"schema": "iolab.suite-reference/1", "models": {
        t.title: [dict(zip(("key", "type", "default", "what"), (c.text for c in r), strict=True)) for r in t.rows]
        for t in tables}, "json_schema": SuiteModel.model_json_schema()}
    emit_tables(tables, fmt, document)


def _type(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    text = text.replace("iolab.describe.schema.", "").replace(" | None", "")
    return {"Any": "see what", "str": "text", "bool": "true/false", "int": "number", "str | int": "size",
            "dict[str, Any]": "mapping", "dict[str, TargetModel]": "NAME: target", "list[str]": "list of text",
            "list[dict[str, Any]]": "list of mappings", "LintModel": "mapping"}.get(text, text)


def _default(field: Any) -> str:
    if field.is_required():
        return "(required)"
    if field.default_factory is not None:
        return "empty"
    return "–" if field.default is None else str(field.default).lower() if isinstance(field.default, bool) \
        else str(field.default) or '""'
