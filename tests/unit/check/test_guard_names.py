"""The static guard reads option names as fio does: a name fio does not know is refused, naming the
nearest; fio's aliases are names it knows. (`iolab run` on such jobs, with fio's own verdict:
tests/integration/test_guard_data.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from iolab.check import guard
from iolab.errors import SafetyError
from iolab.runner import optionnames


@pytest.fixture(autouse=True)
def _keep_dev_null(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recording (IOLAB_RECORD=1) asks real fio about the aliases, and ``optionnames._save`` would write
    its cache through a temporary file renamed over the fake's cache file, ``os.devnull``: /dev/null
    replaced by a regular file. The fake keeps what fio said in machine.json; no cache file here."""
    monkeypatch.setattr(optionnames, "_save", lambda known: None)


def test_a_name_fio_does_not_know_is_refused_naming_the_nearest(tmp_path: Path) -> None:
    with pytest.raises(SafetyError, match=r"\[j\] iodeph: it is not one of fio's option names \(did you mean "
                                          r"iodepth\?\)"):
        guard.check(f"[j]\nfilename={tmp_path}/x\nrw=read\niodeph=4\n", None, (), tmp_path)


def test_fios_aliases_are_names_it_knows(tmp_path: Path) -> None:
    checked = guard.check(f"[j]\nfilename={tmp_path}/x\nreadwrite=read\nblocksize=4k\ntimeout=1\nthreads=1\n"
                          "size=1m\n", None, (), tmp_path)
    assert checked.paths == (f"{tmp_path}/x",) and not checked.writes
