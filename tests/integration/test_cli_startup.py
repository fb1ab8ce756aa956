"""Start-up, in a fresh interpreter each: `iolab --help`, `--version` and completion import no command module
and none of the heavy libraries; `runs` opens the database without the planning, report or numeric code;
a command's exit and its garbage collections. (The lazy command table: ``tests/unit/cli/test_command_table.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from iolab import cli
from paths import FIO

HEAVY = ("sqlalchemy", "pydantic", "numpy", "scipy", "altair", "alembic", "jinja2", "yaml", "iolab.report",
         "iolab.store", "iolab.model", "iolab.run.execute")
SAMPLE = FIO / "fio-3.33_randrw_libaio.json"


def imported_by(*argv: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter holds after ``iolab ARGV`` (run through ``cli.main``)."""
    code = ("import json, sys\nfrom iolab.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            "    pass\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=True)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def heavy_in(modules: set[str], heavy: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in heavy))


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_help_and_version_import_no_heavy_module(argv):
    modules = imported_by(*argv)
    assert heavy_in(modules) == []
    assert not [m for m in modules if m.startswith("iolab.cli.")]  # no command module either


def test_completion_lists_commands_without_importing_them():
    modules = imported_by(env={"_IOLAB_COMPLETE": "bash_complete", "COMP_WORDS": "iolab r", "COMP_CWORD": "1",
                               "PATH": "/usr/bin:/bin"})
    assert heavy_in(modules) == []
    assert not [m for m in modules if m.startswith("iolab.cli.")]


def test_runs_opens_the_database_without_planning_report_or_numeric_code(tmp_path):
    db = str(tmp_path / "t.db")
    cli.main(["--db", db, "import", str(SAMPLE)])
    modules = imported_by("--db", db, "runs")
    assert "iolab.store" in modules
    assert heavy_in(modules, ("numpy", "scipy", "altair", "jinja2", "iolab.run.execute", "iolab.describe.suite",
                              "iolab.check.lint", "iolab.report.results", "iolab.runner", "iolab.remote")) == []


def test_show_of_a_plain_run_imports_only_the_results_report(tmp_path):
    db = str(tmp_path / "t.db")
    cli.main(["--db", db, "import", str(SAMPLE)])
    modules = imported_by("--db", db, "show", "1")
    assert "iolab.report.results" in modules
    assert heavy_in(modules, ("numpy", "scipy", "altair", "iolab.analyze.compare", "iolab.workflows.capture",
                              "iolab.report.capture",
                              "iolab.report.saturation", "iolab.report.warmup", "iolab.report.crashtest",
                              "iolab.run.execute", "iolab.runner", "iolab.remote.protocol")) == []


def test_planning_a_run_imports_neither_numpy_nor_the_database_code(tmp_path):
    """numpy is for reading fio's logs: a run imports it while its first job runs
    (``runner.local.warm_up``); SQLAlchemy while its plan waits for fio's checks
    (``cli.import_store_meanwhile``); a dry run needs neither."""
    suite = tmp_path / "s.yaml"
    suite.write_text(f"name: s\ntargets:\n  t: {{path: {tmp_path}/f, size: 1m}}\nworkloads:\n  - {{rw: read}}\n")
    modules = imported_by("--db", str(tmp_path / "t.db"), "run", str(suite), "--dry-run", "--no-observe")
    assert "iolab.run.execute" in modules
    assert heavy_in(modules, ("numpy", "sqlalchemy", "iolab.store.database")) == []


def test_a_command_closes_its_database_and_its_exit_skips_the_full_collection(tmp_path):
    """The database is closed when the command ends (its write-ahead log folded in, the -wal file
    gone) and the garbage collector is frozen at exit: the interpreter's teardown no longer walks
    every object the command made (0.1-0.3 s after every run)."""
    db = tmp_path / "t.db"
    code = ("import atexit, gc, pathlib, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count(), file=sys.stderr))\n"
            "from iolab.cli import main\n"
            "main(sys.argv[1:])\n"
            f"print('wal', pathlib.Path({str(db) + '-wal'!r}).exists(), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, "--db", str(db), "import", str(SAMPLE)], capture_output=True,
                          text=True, check=True)
    lines = done.stderr.strip().splitlines()
    assert "wal False" in lines, done.stderr
    frozen = [int(line.split()[1]) for line in lines if line.startswith("frozen ")]
    assert frozen and frozen[0] > 10_000, done.stderr  # the command's objects, left to the process's end


def test_a_commands_code_is_imported_without_collections_and_set_aside_and_collection_comes_back(tmp_path):
    """Start-up makes ~20,000 objects that live as long as the process and no garbage: no collection
    runs while the command's module is imported, and what was imported is frozen before the command runs
    (no full collection walks it again). Collection is on inside the command, and after a command line
    that was refused before any command ran."""
    db = tmp_path / "t.db"
    subprocess.run([sys.executable, "-m", "iolab", "--db", str(db), "import", str(SAMPLE)], check=True,
                   capture_output=True)
    code = ("import gc, sys\n"
            "from iolab.cli import main, show\n"
            "full = []\n"
            "gc.callbacks.append(lambda phase, info: phase == 'start' and info['generation'] == 2 and full.append(1))\n"
            "def seen(*a, **k):\n"
            "    print('inside', gc.isenabled(), gc.get_freeze_count(), file=sys.stderr)\n"
            "    return store_of(*a, **k)\n"
            "store_of, show.store_of = show.store_of, seen\n"
            "for argv in (sys.argv[1:], ['no-such-command']):\n"
            "    try:\n"
            "        main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "    print('after', gc.isenabled(), len(full), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code, "--db", str(db), "runs"], capture_output=True, text=True)
    lines = done.stderr.strip().splitlines()
    inside = [line.split() for line in lines if line.startswith("inside ")]
    assert inside and inside[0][1] == "True" and int(inside[0][2]) > 10_000, done.stderr
    assert [line for line in lines if line.startswith("after ")] == ["after True 0", "after True 0"], done.stderr
