"""Every way of naming a device the issue found (issue 19), in-process: the vectors of
tests/integration/test_guard_vectors.py with a character device as the victim (``/dev/zero``, which
no write could harm even if one got through) instead of a loop device carrying ext4. Each run must be
refused before fio runs a job. The real runs on loop devices, md5 before and after, and the fence
stopping what the static guard would miss: tests/integration/test_guard_vectors.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fakefio import FakeFio
from inprocess import iolab
from iolab.runner import marks

MiB = 1024**2
VICTIM = "/dev/zero"
W = "rw=write\nsize=1m\nbs=64k\n"
#: (id, files to write {name: text}, iolab arguments, environment); {V} the victim, {v} its name in /dev,
#: {B} a new file the run may write, {T} the test's directory. As in the integration test's table.
VECTORS = [
    ("directory=/dev + filename", {"j.fio": "[j]\ndirectory=/dev\nfilename={v}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("second job names the device", {"j.fio": "[a]\n" + W + "[b]\nfilename={V}\n" + W},
     ["run", "{T}/j.fio", "--target", "blank={B}"], {}),
    ("filename_format", {"j.fio": "[j]\nfilename_format={V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("${DEV} from the environment", {"j.fio": "[j]\nfilename=${{DEV}}\n" + W}, ["run", "{T}/j.fio"], {"DEV": "{V}"}),
    ("include=other.fio", {"j.fio": "[j]\nrw=read\nsize=1m\ninclude=other.fio\n",
                           "other.fio": "[inc]\nfilename={V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("include other.fio at the top", {"j.fio": "include other.fio\n", "other.fio": "[inc]\nfilename={V}\n" + W},
     ["run", "{T}/j.fio"], {}),
    ("exec_prerun dd", {"j.fio": "[j]\nfilename={T}/f\nrw=read\nsize=1m\nexec_prerun=dd if=/dev/zero of={V} bs=4k "
                                 "count=16\n"}, ["run", "{T}/j.fio"], {}),
    ("ioengine=external", {"j.fio": "[j]\nfilename={T}/f\nrw=read\nsize=1m\nioengine=external:/tmp/x.so\n"},
     ["run", "{T}/j.fio"], {}),
    ("newline in a suite value", {"s.yaml": 'targets: {{t: {T}/f}}\nworkloads:\n  - {{rw: write, size: 1m, '
                                            'description: "x\\nfilename={V}"}}\n'}, ["run", "{T}/s.yaml"], {}),
    ("newline in a CLI option", {}, ["saturate", "-t", "t={T}/f", "size=1m", "description=x\nfilename={V}"], {}),
    ("newline in --target", {}, ["run", "quick", "--target", "t={T}/f\nfilename={V}"], {}),
    ("[global2] section", {"j.fio": "[global2]\nfilename={V}\n[j]\n" + W}, ["run", "{T}/j.fio"], {}),
    ("repeated filename=", {"j.fio": "[j]\nfilename={T}/f\nfilename={V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("global files added to every job", {"j.fio": "[global]\nfilename={V}\n[j]\nfilename={T}/f\n" + W},
     ["run", "{T}/j.fio"], {}),
    ("\\: escapes in a filename list", {"j.fio": "[j]\nfilename={T}/a\\:b:{V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("section named after the device", {"j.fio": "[{V}]\n" + W}, ["run", "{T}/j.fio"], {}),
    ("symlink to the device", {"j.fio": "[j]\nfilename={T}/link\n" + W}, ["run", "{T}/j.fio"], {"link": "1"}),
    ("/proc/self/root/dev/...", {"j.fio": "[j]\nfilename=/proc/self/root{V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("//dev/...", {"j.fio": "[j]\nfilename=/{V}\n" + W}, ["run", "{T}/j.fio"], {}),
    ("replay_redirect", {"j.fio": "[j]\nread_iolog={T}/log\nreplay_redirect={V}\n",
                         "log": "fio version 2 iolog\n{T}/f add\n{T}/f open\n{T}/f write 0 4096\n{T}/f close\n"},
     ["run", "{T}/j.fio"], {}),
    ("file names inside an iolog", {"j.fio": "[j]\nread_iolog={T}/log\n",
                                    "log": "fio version 2 iolog\n{V} add\n{V} open\n{V} write 0 4096\n{V} close\n"},
     ["run", "{T}/j.fio"], {}),
    ("write_iolog onto the device", {"j.fio": "[j]\nfilename={T}/f\nrw=read\nsize=1m\nwrite_iolog={V}\n"},
     ["run", "{T}/j.fio"], {}),
    ("character device without --destroy", {}, ["run", "{T}/s.yaml"], {"chardev": "1"}),
]


def _fill(text: str, tmp: Path) -> str:
    return text.format(V=VICTIM, B=tmp / "blank.bin", T=tmp, v=os.path.basename(VICTIM))


@pytest.mark.parametrize(("files", "args", "env"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS])
def test_vector_is_refused_before_fio_runs(tmp_path: Path, fake_fio: FakeFio, files: dict[str, str],
                                            args: list[str], env: dict[str, str]) -> None:
    env = dict(env)
    (tmp_path / "f").write_bytes(b"\0" * MiB)
    marks.mark(str(tmp_path / "f"))  # iolab's own: writable, so the device is what each vector must be refused for
    for name, text in files.items():
        (tmp_path / name).write_text(_fill(text, tmp_path))
    if env.pop("link", None):
        (tmp_path / "link").symlink_to(VICTIM)
    if env.pop("chardev", None):
        (tmp_path / "s.yaml").write_text("targets: {nul: /dev/null}\nworkloads:\n  - {rw: write, size: 1m}\n")
    proc = iolab(*(_fill(a, tmp_path) for a in args), "--no-observe" if args[0] == "run" else "--repeat",
                 *(["1"] if args[0] != "run" else []), db=tmp_path / "db.sqlite", cwd=tmp_path,
                 env={k: _fill(v, tmp_path) for k, v in env.items()})
    assert proc.returncode in (1, 2), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    said = proc.stderr
    named = (VICTIM, f"{tmp_path}/link: it is not a block device or regular file")  # a link: named as given
    assert (("refusing to write to" in said and any(n in said for n in named)) or "control character" in said
            or "--allow-exec" in said or "which is a device" in said or "/dev/null" in said
            or "the kernel's interface" in said), said
    assert fake_fio.runs == []  # refused before fio ran a job
