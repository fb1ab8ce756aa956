"""Every command that runs fio takes the same options (``cli.options.fio_command_options``), and they act
alike: a workflow run quietly, unobserved, into the database its own --db names, labelled and tagged.
In-process, fio replayed (``fakefio``)."""

from __future__ import annotations

import json
import re

import pytest

from inprocess import iolab
from iolab.store.database import Store

FIO_COMMANDS = ("run", "saturate", "autotune", "crash-test", "replay", "fit")
SHARED = ("-q, --quiet", "--no-observe", "--db URL", "--db-wait DURATION", "--label TEXT", "--tag KEY=VALUE",
          "--destroy DEVICE")


@pytest.mark.parametrize("command", FIO_COMMANDS)
def test_every_fio_command_lists_the_shared_options(command, tmp_path):
    shown = iolab(command, "--help", db=tmp_path / "db").stdout
    options = [" ".join(line.split()[:3]) for line in shown.splitlines() if line.lstrip().startswith("-")]
    missing = [o for o in SHARED if not any(re.match(re.escape(o) + r"\b", text) for text in options)]
    assert not missing, f"iolab {command} lacks {missing}"


@pytest.mark.parametrize("command", [
    ("saturate", "size=8m", "--max-iodepth", "2", "--max-numjobs", "1", "--probe-runtime", "1s", "--runtime", "1s",
     "--repeat", "1"),
    ("crash-test", "size=8m", "--trigger-timeout", "1s", "--trigger", "true"),
])
def test_a_workflow_takes_them_as_run_does(command, tmp_path):
    db = tmp_path / "own.db"
    name, *rest = command
    done = iolab(name, "-t", f"f={tmp_path}/scratch.bin", *rest, "-q", "--no-observe", "--db", str(db),
                 "--label", "mine", "--tag", "k=v", "--format", "json", db=tmp_path / "elsewhere.db", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "elsewhere.db").exists()  # --db after the command wins over $IOLAB_DB
    assert done.stderr.strip().splitlines() == [f"Run 1 stored in sqlite:///{db}"]  # no plan, no progress
    run = Store(f"sqlite:///{db}").get_run(1)
    assert (run.info.label, dict(run.info.tags)) == ("mine", {"k": "v"})
    assert run.results and all(r.status == "ok" and "observed" not in r.extra for r in run.results)
    assert json.loads(done.stdout)["run"]["id"] == 1
