"""The crash test's destructive guard on a real block device (a loop device): a device not named with
--destroy, or one that holds a filesystem, is refused before fio writes a byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clirun import iolab
from loopdev import MiB, loop_device, requires_loop

pytestmark = [pytest.mark.root, requires_loop]


def test_the_destructive_guard_refuses_before_anything_runs(tmp_path):
    """A device not named with --destroy, or one that holds a filesystem, is refused before fio
    writes a byte; nothing is stored as run."""
    db = tmp_path / "db.sqlite"
    with loop_device(tmp_path, 32 * MiB) as loop:
        before = loop.sha256()
        proc = iolab("crash-test", "-t", f"dev={loop.path}", "--destroy", loop.path, "size=8m",
                     "--trigger-timeout", "1s", db=db)  # fio would stop at 1 s, and nothing would cut
        assert proc.returncode == 2 and "nothing would cut" in proc.stderr and "--trigger CMD" in proc.stderr
        proc = iolab("crash-test", "-t", f"dev={loop.path}", "size=8m", "--trigger-timeout", "1s", "--trigger", "true",
                     db=db)
        assert proc.returncode == 2 and "not named with --destroy" in proc.stderr, proc.stderr
        loop.make_ext4()
        before = loop.sha256()
        proc = iolab("crash-test", "-t", f"dev={loop.path}", "--destroy", loop.path, "size=8m",
                     "--trigger-timeout", "1s", "--trigger", "true", db=db)
        assert proc.returncode == 2 and "ext4" in proc.stderr, proc.stderr
        assert loop.sha256() == before
        proc = iolab("crash-test", "-t", f"dev={loop.path}", "--destroy", loop.path, "verify=md5", "rw=randread",
                     "--trigger-timeout", "1s", "--trigger", "true", db=db)
        assert proc.returncode == 2 and "a crash test writes" in proc.stderr
    assert not Path(db).exists() or json.loads(iolab("runs", "--format", "json", db=db).stdout)["runs"] == []
