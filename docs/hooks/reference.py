"""The manual's reference pages, generated from the code at build time (an mkdocs hook, ``hooks:`` in
mkdocs.yml), so they cannot drift from it: every command's ``--help`` (from the click command table
``iolab.cli.COMMANDS``), the suite schema (``describe.schema.SuiteModel``'s JSON schema), the lint
catalogue with its remedies (the ``Finding`` calls of ``check/lint.py`` and ``run/plan.py`` beside the
catalogue table of docs/design.md, section 2), the exit codes (the ``IolabError`` classes) and the
environment variables the code reads.

The build fails (``mkdocs build --strict`` turns a raised error into a failed build) when the code has
something these pages cannot describe: a suite key without a description here, an environment variable
read by the code and not listed, a lint rule the design document's catalogue lacks.
``tests/unit/project/test_docs.py`` builds the same pages with ``pages()``.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

#: The pages this hook writes, by path under docs/ (mkdocs.yml's nav lists each).
PAGES = ("reference/commands.md", "reference/suite-schema.md", "reference/lint.md", "reference/exit-codes.md",
         "reference/environment.md")

#: Environment variables: name -> what it does. Those the code reads (``src/``) must all be here; the
#: test suite's own are listed apart.
ENVIRONMENT = {
    "IOLAB_DB": "The results database when `--db` is not given: a SQLite path or an SQLAlchemy URL "
                "(`postgresql://…`). Default: `$XDG_DATA_HOME/iolab/iolab.db` (`~/.local/share/iolab/iolab.db`).",
    "IOLAB_SSH": "The ssh client command for `ssh://` hosts, split as a shell would (e.g. `ssh -F lab_config`). "
                 "Default: `ssh`.",
    "IOLAB_CHECK_CHARTS": "When set, every chart spec is checked against Vega-Lite's schema as it is built (the "
                          "tests set it; it costs a tenth of a report's time).",
    "XDG_DATA_HOME": "Where the default SQLite database lives (`iolab/iolab.db`; default `~/.local/share`).",
    "XDG_STATE_HOME": "Where iolab keeps its state (default `~/.local/state`): the tuning journal "
                      "(`iolab/tuning`), the spool of results waiting for the database, file marks, ssh masters "
                      "and fio servers' files.",
    "XDG_CACHE_HOME": "Where iolab caches (under `iolab/`; default `~/.cache`): fio's option names per fio "
                      "version, a capture's replay iologs (`replay/`) and the Vega bundle HTML reports embed.",
    "XDG_RUNTIME_DIR": "When set, ssh control sockets (`iolab/ssh`) and the pidfiles and logs of `iolab server` "
                       "go there instead of `$XDG_STATE_HOME/iolab`.",
}
TEST_ENVIRONMENT = {
    "IOLAB_TEST_REQUIRE_ALL": "CI sets it (`.ci/run`): a test skipped for want of root, PostgreSQL, a browser … fails "
                              "instead.",
    "IOLAB_RECORD": "`1`: the fake fio records what a fast-tier test asks of real fio (`make record`).",
    "IOLAB_NOFIO_LOG": "The file where the fast tier's guard notes any fio started (`make test-fast`).",
    "IOLAB_SCREENSHOT_DIR": "Where the browser tests save their screenshots (default: the test's tmp_path).",
    "IOLAB_FUZZ_COUNT": "How many damaged inputs the import fuzz test makes.",
    "IOLAB_FUZZ_SEED": "The fuzz test's seed.",
    "_IOLAB_COMPLETE": "click's shell completion: `eval \"$(_IOLAB_COMPLETE=bash_source iolab)\"` in ~/.bashrc "
                       "(`zsh_source`, `fish_source` likewise).",
}


def _import_iolab() -> None:
    """This tree's iolab first on the path (the venv may hold another checkout's, installed editable).
    mkdocs imports no iolab before this; a test that imports this module has its own on the path."""
    if "iolab" not in sys.modules and str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))


# --- commands -------------------------------------------------------------------------------------------


def _help_texts() -> Iterator[tuple[str, str, str]]:
    """(command path, one-line help, full ``--help`` text) for ``iolab`` and every command and subcommand,
    at 100 columns."""
    import click

    from iolab.cli import COMMANDS, cli

    root = click.Context(cli, info_name="iolab", terminal_width=100, max_content_width=100)
    yield "iolab", "", cli.get_help(root)

    def walk(group: click.Group, parent: click.Context, prefix: str) -> Iterator[tuple[str, str, str]]:
        for name in group.list_commands(parent):
            command = group.get_command(parent, name)
            assert command is not None, name
            ctx = click.Context(command, info_name=name, parent=parent)
            short = COMMANDS[name][1] if prefix == "iolab" and name in COMMANDS else command.get_short_help_str(100)
            yield f"{prefix} {name}", short, command.get_help(ctx)
            if isinstance(command, click.Group):
                yield from walk(command, ctx, f"{prefix} {name}")

    yield from walk(cli, root, "iolab")


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


def commands_page() -> str:
    helps = list(_help_texts())
    lines = ["# Commands", "",
             "Every command's `--help`, as `iolab COMMAND --help` prints it (generated from the code when the manual",
             "is built). Every command also takes the global options of `iolab` itself, before the command name.", "",
             "| command | what it does |", "|---|---|"]
    bar = "\\|"
    lines += [f"| [`{path}`](#{_anchor(path)}) | {short.replace('|', bar)} |" for path, short, _ in helps[1:]]
    for path, _, text in helps:
        lines += ["", f"## `{path}` {{ #{_anchor(path)} }}", "", "```text", text.rstrip(), "```"]
    return "\n".join(lines) + "\n"


# --- suite schema --------------------------------------------------------------------------------------------


def _type_of(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1].removesuffix("Model").lower()
    if "anyOf" in prop:
        return " or ".join(_type_of(p, defs) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type_of(prop.get('items', {}), defs)}"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"mapping to {_type_of(extra, defs)}" if isinstance(extra, dict) and extra else "mapping"
    return "any" if kind is None else str(kind)


def _key_table(schema: dict[str, Any], defs: dict[str, Any], what: str) -> list[str]:
    """The keys of a model's JSON schema as a table; each must carry its ``Field(description=...)``."""
    props = schema["properties"]
    missing = [k for k, p in props.items() if not p.get("description")]
    if missing:
        raise ValueError(f"describe/schema.py: {what} key(s) {missing} have no description (Field(description=…))")
    required = set(schema.get("required", ()))
    rows = ["| key | type | default | what |", "|---|---|---|---|"]
    for key, prop in props.items():
        bounds = [f"{word} {prop[k]}" for k, word in (("minimum", "≥"), ("maximum", "≤"), ("minItems", "items ≥"))
                  if k in prop]
        default = "required" if key in required else f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        kind = _type_of(prop, defs) + (f" ({', '.join(bounds)})" if bounds else "")
        what_it_is = " ".join(prop["description"].split()).replace("|", "\\|")
        rows.append(f"| `{key}` | {kind} | {default} | {what_it_is} |")
    return rows


def suite_schema_page() -> str:
    from iolab.describe.schema import SuiteModel

    schema = SuiteModel.model_json_schema()
    defs = schema.get("$defs", {})
    lines = ["# Suite schema", "",
             "The keys of a suite file, from the model iolab validates suites with (`describe/schema.py`); an",
             "unknown key is an error that names its line. Workload keys and `defaults` are fio options, used",
             "verbatim (the [Suites](../suites.md) page shows a suite and what becomes of it).", "",
             "## Top-level keys", ""]
    lines += _key_table(schema, defs, "suite")
    lines += ["", "## A target", "", "A target is a path, or a mapping with these keys:", ""]
    lines += _key_table(defs["TargetModel"], defs, "target")
    lines += ["", "## The JSON schema", "", "As pydantic gives it (`SuiteModel.model_json_schema()`):", "",
              "```json", json.dumps(schema, indent=2), "```"]
    return "\n".join(lines) + "\n"


# --- lint catalogue ------------------------------------------------------------------------------------------


def _text(node: ast.expr) -> str | None:
    """A string argument as the reader sees it: the figures an f-string fills in as ``…``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "…" for v in node.values).replace("….", "…")
    return None


def remedies() -> dict[str, list[str]]:
    """Rule id -> the remedies the code gives it (from each ``Finding(ID, SEVERITY, message, remedy, …)``)."""
    found: dict[str, list[str]] = {}
    for rel in ("iolab/check/lint.py", "iolab/run/plan.py"):
        for node in ast.walk(ast.parse((SRC / rel).read_text())):
            name = getattr(node, "func", None)
            name = getattr(name, "attr", None) or getattr(name, "id", None)
            if not (isinstance(node, ast.Call) and name == "Finding" and len(node.args) >= 4):
                continue
            rule = node.args[0]
            if not (isinstance(rule, ast.Constant) and re.fullmatch(r"P\d+|FIO", str(rule.value))):
                continue
            remedy = _text(node.args[3]) or "what the refusal's hint says (it names the device or file and what to do)"
            if remedy not in found.setdefault(str(rule.value), []):
                found[str(rule.value)].append(remedy)
    return found


def lint_page() -> str:
    design = (ROOT / "docs" / "design.md").read_text()
    rows = {m.group(1): [c.strip() for c in m.group(2).split(" | ")]
            for m in re.finditer(r"^\| (P\d+|FIO) \| (.*) \|$", design, re.M)}
    given = remedies()
    if set(given) - set(rows):
        raise ValueError(f"lint rule(s) {sorted(set(given) - set(rows))} are not in docs/design.md's catalogue")
    lines = ["# Lint catalogue", "",
             "Every methodology rule `iolab lint` and `iolab run` check, with its remedies as the code gives them",
             "(`check/lint.py`; `…` stands for the figures a finding fills in for the plan) and the rule's source.",
             "Why each rule exists is in the [design document](../design.md#2-methodology-lint-the-catalogue);",
             "[Method and tuning](../method.md) shows findings as a run prints them.", ""]
    for rule, (finding, why, source) in sorted(rows.items(), key=lambda kv: (kv[0] == "FIO", int(kv[0][1:] or 0)
                                                                              if kv[0] != "FIO" else 0)):
        severity = "error" if "**error**" in finding else "warning"
        lines += [f"## {rule}: {finding.replace('**error**: ', '')}", "",
                  f"- **severity:** {severity}", f"- **why:** {why}", f"- **source:** {source}"]
        fixes = given.get(rule, [])
        if fixes:
            lines += ["- **remedy:**" if len(fixes) == 1 else "- **remedies:**"]
            lines += [f"    - {fix}" for fix in fixes]
        lines.append("")
    return "\n".join(lines)


# --- exit codes and environment ----------------------------------------------------------------------------


def exit_codes_page() -> str:
    from iolab import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, errors.IolabError)]
    by_code: dict[int, list[type]] = {}
    for c in classes:
        by_code.setdefault(c.exit_code, []).append(c)
    meaning = {1: "runtime failure", 2: "usage or suite error, or a refused plan", 3: "a regression, or a loss of "
               "data the user asked to fail on", 130: "interrupted (Ctrl-C, SIGTERM); finished results are kept"}
    lines = ["# Exit codes", "",
             "Every command exits with one of these; the code comes from the class of the error alone",
             "(`iolab/errors.py`, generated from it here). An error prints one `Error: …` line and, when there is one,",
             "a `Hint: …` line on stderr (on a terminal each is wrapped to its width, continued under its text;",
             "piped, each stays one line for scripts to match); an unexpected exception (a bug) is",
             "`Error: internal error: …`, exit 1, its traceback only with `iolab --debug`.", "",
             "| code | meaning | errors |", "|---:|---|---|", "| 0 | success | |"]
    for code in sorted(by_code):
        if code not in meaning:
            raise ValueError(f"exit code {code} ({by_code[code]}) has no meaning in docs/hooks/reference.py")
        names = ", ".join(f"`{c.__name__}`" for c in sorted(by_code[code], key=lambda c: c.__name__))
        lines.append(f"| {code} | {meaning[code]} | {names} |")
    lines += ["", "A command line click cannot parse (an unknown option, a missing argument) exits 2 as well.", "",
              "## The errors", "", "| error | exit | when |", "|---|---:|---|"]
    for c in sorted(classes, key=lambda c: (c.exit_code, c.__name__)):
        doc = " ".join((c.__doc__ or "").split("\n\n")[0].split()).replace("``", "`")
        lines.append(f"| `{c.__name__}` | {c.exit_code} | {doc} |")
    return "\n".join(lines) + "\n"


def read_variables(where: Path, pattern: str) -> set[str]:
    """The environment variables named in the Python files under ``where`` (``pattern``: a regex)."""
    return {m for p in where.rglob("*.py") for m in re.findall(pattern, p.read_text())}


def environment_page() -> str:
    read = read_variables(SRC, r"environ\.get\(\"([A-Z_]+)\"\)") | read_variables(SRC, r"\$(IOLAB_[A-Z_]+)")
    if read - set(ENVIRONMENT):
        raise ValueError(f"environment variable(s) {sorted(read - set(ENVIRONMENT))} read by iolab are not "
                         "described in docs/hooks/reference.py")
    lines = ["# Environment variables", "", "What iolab reads from its environment (every variable the code reads "
             "is listed: the manual's build checks it).", "", "| variable | what |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in ENVIRONMENT.items() if k in read]
    lines += ["", "## For the test suite", "", "| variable | what |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in TEST_ENVIRONMENT.items()]
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Every generated page: its path under docs/ -> its Markdown."""
    _import_iolab()
    made = {"reference/commands.md": commands_page(), "reference/suite-schema.md": suite_schema_page(),
            "reference/lint.md": lint_page(), "reference/exit-codes.md": exit_codes_page(),
            "reference/environment.md": environment_page()}
    assert tuple(made) == PAGES
    return made


def on_files(files: Any, config: Any) -> Any:
    """mkdocs' hook: add the generated pages to the site's files (before the nav is built)."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files
