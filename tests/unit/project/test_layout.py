"""The layout a newcomer reads (docs/design.md, "The tree"): each package imports only the layers below
it, no module is over 600 lines, the CLI takes its exit codes from error classes and no command module
imports another module's private names; and the run pipeline tells its watch in order."""

from __future__ import annotations

import ast
import re
from contextlib import contextmanager
from pathlib import Path

from iolab.describe.suite import load_yaml
from iolab.run import pipeline
from iolab.run.plan import RunOptions
from iolab.store.database import Store
from paths import ROOT

SRC = ROOT / "src" / "iolab"

#: The layers, bottom to top: a package imports only packages of lower layers (peers in one layer do not
#: import each other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "units", "histogram", "stats", "interrupts"),
    ("model", "outputs"),
    ("fio",),
    ("facts", "runner"),
    ("remote", "store"),
    ("describe",),
    ("check", "observe"),
    ("analyze",),
    ("run",),
    ("workflows",),
    ("report",),
    ("cli",),
    ("__main__",),
)
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _modules() -> dict[Path, str]:
    """Every source file and its package (its top-level name under ``iolab``)."""
    return {p: p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")
            if p.relative_to(SRC).parts[0] != "__init__.py"}


def _imported(path: Path) -> set[str]:
    """The top-level iolab names ``path`` imports (relative or absolute; lazy imports included)."""
    package = list(path.relative_to(SRC).parts[:-1])  # where ``from .`` starts
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            parts = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        elif node.module and (node.module == "iolab" or node.module.startswith("iolab.")):
            parts = node.module.split(".")[1:]
        else:
            continue
        found.update([parts[0]] if parts else [a.name for a in node.names])
    return {n for n in found if n in LEVEL}


def test_every_package_imports_only_the_layers_below_it():
    unplaced = sorted({package for package in _modules().values()} - set(LEVEL))
    assert unplaced == [], "a package or top-level module in no layer: place it in LAYERS"
    wrong = []
    for path, package in _modules().items():
        for name in _imported(path) - {package}:
            if LEVEL[name] >= LEVEL[package]:
                wrong.append(f"{path.relative_to(SRC)} imports {name}")
    assert wrong == []


def test_at_most_six_modules_at_the_top_and_none_over_600_lines():
    top = [p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= 6, top
    long = [f"{p.relative_to(SRC)}: {n}" for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600]
    assert long == []


def test_commands_exit_through_error_classes_and_import_no_private_names():
    for path in (SRC / "cli").glob("*.py"):
        text = path.read_text()
        assert path.name == "__init__.py" or "ctx.exit(" not in text, path.name  # main() alone exits
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.level:
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, (path.name, node.module, private)
    assert not re.search(r"def run\(([^)]*,){12}", (SRC / "cli" / "run.py").read_text())  # a few objects, not 23


class _Told(pipeline.Watch):
    def __init__(self) -> None:
        super().__init__()
        self.told: list[str] = []

    def planned(self, plan):
        self.told.append(f"planned {len(plan.items)}")

    def stored(self, run_id, store):
        self.told.append(f"stored {run_id}")

    @contextmanager
    def _running(self):
        self.told.append("running")
        yield
        self.told.append("ran")

    def running(self):
        return self._running()

    def event(self, event):
        if event.kind in ("start", "end"):
            self.told.append(event.kind)


def test_the_pipeline_plans_tells_stores_runs_and_returns_the_stored_run(tmp_path):
    suite = load_yaml(f"name: s\ntargets:\n  t: {{path: {tmp_path}/f, size: 1m}}\n"
                      "workloads:\n  - {rw: read, bs: 64k, ioengine: psync}\n", "s.yaml")
    watch, opened = _Told(), []

    def store() -> Store:
        opened.append(True)
        return Store(f"sqlite:///{tmp_path}/t.db")

    run = pipeline.run(store, suite, RunOptions(), label="shape", watch=watch)
    assert watch.told == ["planned 1", f"stored {run.info.id}", "running", "start", "end", "ran"]
    assert opened == [True] and run.info.label == "shape" and run.info.status == "complete"
    assert [r.status for r in run.results] == ["ok"]


def test_the_modules_shipped_to_a_host_over_ssh_import_only_each_other():
    """``remote.ssh`` (facts) and ``remote.sshagent`` (facts and the fence) run iolab's code on other hosts
    from source they send: an import they do not send fails there (``ModuleNotFoundError``), never here."""
    from iolab.remote import ssh, sshagent

    missing = []
    for modules, packages in ((ssh._MODULES, ssh._PACKAGES), (sshagent._MODULES, sshagent._PACKAGES)):
        shipped = set(modules)
        for name in shipped:
            parts = name.split(".")[1:]
            path = SRC.joinpath(*parts, "__init__.py") if name in packages else SRC.joinpath(*parts[:-1],
                                                                                            parts[-1] + ".py")
            package = parts if name in packages else parts[:-1]
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level:
                    base = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
                    names = [".".join(["iolab", *base])] if node.module else [".".join(["iolab", *base, a.name])
                                                                            for a in node.names]
                    missing += [f"{name} imports {n}" for n in names if n not in shipped]
    assert missing == []
