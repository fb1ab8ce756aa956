"""Writable means new, iolab's own, or named with --destroy (issue 29), in-process: the guard's rows on
files of tests/integration/test_guard_data.py with fio replayed — an existing file of someone's data
as a target, every file under an ``opendir=`` tree, storage reached by address. What only real fio
shows (the named file really written, the data of the refused ones unchanged by a run, the NBD
export written only when named): the integration test."""

from __future__ import annotations

import os
from pathlib import Path

from fakefio import FakeFio
from inprocess import iolab
from iolab.runner import marks

MiB = 1024**2


def _run(tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    return iolab("run", *args, "--no-observe", db=tmp_path / "db.sqlite", cwd=tmp_path)


def test_an_existing_file_with_data_needs_destroy_then_is_iolabs(tmp_path: Path, fake_fio: FakeFio) -> None:
    data = tmp_path / "old.bin"
    data.write_bytes(os.urandom(8 * MiB))
    suite_file = tmp_path / "s.yaml"
    suite_file.write_text("targets: {}\nworkloads:\n  - {rw: randwrite, bs: 4k, size: 8m, runtime: 1s, "
                          "time_based: 1}\n")
    refused = _run(tmp_path, str(suite_file), "--target", f"f={data}")
    assert refused.returncode == 2
    assert (f"Error: refusing to write to {data}: it is an existing file with 8.00 MiB of data that iolab did not "
            "lay out, and it is not named with --destroy") in refused.stderr
    assert f"--destroy {data}" in refused.stderr
    assert fake_fio.runs == []
    ran = _run(tmp_path, str(suite_file), "--target", f"f={data}", "--destroy", str(data))
    assert ran.returncode == 0, ran.stderr
    assert f"fio may write only: {data} (--destroy)" in " ".join(ran.stderr.split())
    assert marks.is_iolab(str(data)) and len(fake_fio.runs) == 1
    again = _run(tmp_path, str(suite_file), "--target", f"f={data}")
    assert again.returncode == 0, again.stderr
    assert f"fio may write only: {data} (iolab's)" in " ".join(again.stderr.split())
    with open(data, "r+b") as f:  # someone writes into it: its data, not iolab's any more
        f.write(b"mine")
    assert not marks.is_iolab(str(data))
    assert _run(tmp_path, str(suite_file), "--target", f"f={data}").returncode == 2
    assert len(fake_fio.runs) == 2


def test_every_file_under_a_written_opendir_tree_is_checked(tmp_path: Path, fake_fio: FakeFio) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    for f in (docs / "a.txt", docs / "sub" / "b.txt"):
        f.write_bytes(os.urandom(64 * 1024))
    (tmp_path / "j.fio").write_text(f"[j]\nopendir={docs}\nrw=write\nbs=4k\n")
    refused = _run(tmp_path, str(tmp_path / "j.fio"))
    assert refused.returncode == 2
    assert f"refusing to write to {docs}/a.txt: it is an existing file with 64.00 KiB of data" in refused.stderr
    assert fake_fio.runs == []
    (tmp_path / "r.fio").write_text(f"[j]\nopendir={docs}\nrw=read\nbs=4k\n")
    read = _run(tmp_path, str(tmp_path / "r.fio"))
    assert read.returncode == 0, read.stderr
    named = _run(tmp_path, str(tmp_path / "j.fio"), "--destroy", str(docs))
    assert named.returncode == 0, named.stderr
    assert len(fake_fio.runs) == 2


def test_storage_reached_by_address_is_refused_unless_named(tmp_path: Path, fake_fio: FakeFio) -> None:
    uri = f"nbd+unix:///?socket={tmp_path}/nbd.sock"
    (tmp_path / "j.fio").write_text(f"[j]\nioengine=nbd\nuri={uri}\nrw=randwrite\nbs=4k\nsize=8m\ntime_based\n"
                                    "runtime=1\n")
    refused = _run(tmp_path, str(tmp_path / "j.fio"))
    assert refused.returncode == 2
    assert f"refusing to write through ioengine=nbd to {uri}: the engine reaches storage by address" \
        in refused.stderr
    assert f"--destroy '{uri}'" in refused.stderr
    assert fake_fio.runs == []
