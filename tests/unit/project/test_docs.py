"""The manual (mkdocs.yml, docs/): its nav lists every page, the reference generated from the code covers
every command, error class and suite key, and the README stays the short front door to it. The build
itself (``make docs``: ``mkdocs build --strict``, links checked) runs in CI after the tests."""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from types import ModuleType
from typing import Any

import click
import yaml

from iolab import errors
from iolab.cli import COMMANDS, cli
from iolab.describe.schema import SuiteModel
from paths import ROOT

DOCS = ROOT / "docs"


@cache
def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("iolab_docs_reference", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _pages() -> dict[str, str]:
    return _hook().pages()  # type: ignore[no-any-return]


def _nav_files(entries: list[Any]) -> list[str]:
    found = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        found += _nav_files(value) if isinstance(value, list) else [value]
    return found


def _config() -> dict[str, Any]:
    text = (ROOT / "mkdocs.yml").read_text()
    return yaml.safe_load(text)  # type: ignore[no-any-return]


def test_the_nav_lists_every_page_once():
    nav = _nav_files(_config()["nav"])
    written = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.parts}
    generated = set(_hook().PAGES)
    assert not written & generated, "a generated page is also written by hand"
    assert sorted(nav) == sorted(written | generated), (set(nav) ^ (written | generated))
    assert {"index.md", "design.md", "development.md", "history.md"} <= set(nav)


def test_the_commands_reference_has_every_commands_help():
    page = _pages()["reference/commands.md"]
    names = set(COMMANDS) | set(cli.commands)
    assert len(names) >= 19
    for name in names:
        assert f"## `iolab {name}`" in page and f"Usage: iolab {name} [OPTIONS]" in page, name
        command = cli.get_command(click.Context(cli), name)
        for sub in getattr(command, "commands", {}):  # a group's own commands (server start, …)
            assert f"## `iolab {name} {sub}`" in page and f"Usage: iolab {name} {sub}" in page, (name, sub)
    assert "--db URL" in page and "Usage: iolab [OPTIONS] COMMAND" in page
    # every option of `run` is in its help, as the user gets it
    run = cli.get_command(click.Context(cli), "run")
    assert run is not None
    section = page.split("## `iolab run`", 1)[1].split("\n## ", 1)[0]
    for param in run.params:
        for opt in getattr(param, "opts", []):
            if opt.startswith("--"):
                assert opt in section, opt


def test_the_reference_covers_the_exit_codes_suite_keys_and_lint_rules():
    codes = _pages()["reference/exit-codes.md"]
    for cls in vars(errors).values():
        if isinstance(cls, type) and issubclass(cls, errors.IolabError):
            assert re.search(rf"\| `{cls.__name__}` \| {cls.exit_code} \|", codes), cls
    for code in (0, 1, 2, 3, 130):
        assert f"\n| {code} |" in codes
    schema = _pages()["reference/suite-schema.md"]
    for key in SuiteModel.model_fields:
        assert f"| `{key}` |" in schema, key
    lint = _pages()["reference/lint.md"]
    for rule in [*(f"P{i}" for i in range(1, 17) if i != 10), "FIO"]:
        assert f"## {rule}: " in lint, rule
    assert "set ramp_time (e.g. ramp_time=10s)" in lint  # a remedy as the code gives it
    assert "`IOLAB_DB`" in _pages()["reference/environment.md"]


def test_an_undescribed_suite_key_fails_the_build():
    hook = _hook()
    schema = {"properties": {"tiers": {"type": "object"}, "name": {"type": "string", "description": "its name"}}}
    try:
        hook._key_table(schema, {}, "suite")
    except ValueError as exc:
        assert "['tiers']" in str(exc)
    else:
        raise AssertionError("an undescribed suite key did not fail the build")


def test_the_readme_is_the_short_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    quick = ("```sh\nmake run     # sets everything up, runs the built-in quick suite on a scratch file here, "
             "stores the run\nmake test    # sets everything up (incl. PostgreSQL, Chromium), runs the tests\n```")
    assert quick in readme
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 15
    for link in links:
        assert (ROOT / link).exists(), link
    assert not re.search(r"measured[^.]*20\d\d-\d\d-\d\d", readme, re.I)  # dated notes: benchmarks/RESULTS.md


#: A fenced block and the marker line before it, if any; a block that shows `iolab` commands.
BLOCK = re.compile(r"^(<!-- [^\n]* -->\n)?```[^\n]*\n(.*?)^```", re.M | re.S)
COMMAND = re.compile(r"^\s*(?:\$ |- )?(?:[^\n]*; )?iolab ", re.M)


def test_every_example_is_run_by_a_test_or_marked_illustrative():
    """``<!-- example: NAME -->``: tests/cli/test_docs_examples.py runs it and compares what it prints;
    ``<!-- illustrative -->``: it needs a device, a host or a long run, and shows real output once printed."""
    kinds = {"example": 0, "illustrative": 0}
    for page in DOCS.rglob("*.md"):
        text = page.read_text()
        for m in BLOCK.finditer(text):
            if not COMMAND.search(m.group(2)):
                continue
            marker = m.group(1) or ""
            kind = re.fullmatch(r"<!-- (example): [\w-]+ -->\n|<!-- (illustrative) -->\n", marker)
            line = text[:m.start()].count("\n") + 1
            assert kind, f"{page.relative_to(ROOT)}:{line}: an example neither tested nor marked illustrative"
            kinds[kind.group(1) or kind.group(2)] += 1
    assert kinds["example"] >= 4 and kinds["illustrative"] >= 1, kinds
