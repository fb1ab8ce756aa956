"""Record ``fio-loop/``: real ring-buffer pages of the block events, with the text of the same events.

Run as root from the repository (``.venv/bin/python tests/data/ringbuf/make_ringbuf.py``). It
attaches a 64 MiB loop device over a file in /dev/shm, makes an ftrace instance filtered to it with
``block_rq_issue`` and ``block_rq_complete`` enabled, runs three small fio jobs (random reads and
writes of 4k and 64k with an fsync every 8 writes, so flushes too; a pause of 0.3 s, longer than a
time delta's 27 bits of ns, so a time extend follows; discards), disables the events, and then
writes, into ``fio-loop/``:

- ``trace.txt.xz``: the instance's ``trace`` file (the events as text, read without consuming them);
- ``cpuN.raw.xz``: everything ``per_cpu/cpuN/trace_pipe_raw`` then gave, whole pages as read;
- ``header_page``, ``header_event``, ``block_rq_issue.format``, ``block_rq_complete.format``: the
  format files, as this kernel wrote them;
- ``made.txt``: when, on which kernel, with which trace clock.

Then it removes the instance and detaches the device."""

from __future__ import annotations

import contextlib
import lzma
import os
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

OUT = Path(__file__).with_name("fio-loop")
TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("block_rq_issue", "block_rq_complete")


def _fio(device: str, *options: str) -> None:
    subprocess.run(["fio", "--name=rec", f"--filename={device}", "--direct=1", "--ioengine=libaio", "--iodepth=4",
                    "--size=32M", "--randrepeat=0", "--output=/dev/null", *options], check=True)


def main() -> None:
    OUT.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="iolab-ringbuf-", dir="/dev/shm") as tmp:
        image = Path(tmp) / "dev.img"
        with open(image, "wb") as f:
            f.truncate(64 * 1024**2)
        device = subprocess.run(["losetup", "--find", "--show", str(image)], check=True, capture_output=True,
                                text=True).stdout.strip()
        inst = TRACEFS / "instances" / f"iolab-record-{os.getpid()}"
        try:
            inst.mkdir()
            st = os.stat(device)
            for event in EVENTS:
                (inst / "events/block" / event / "filter").write_text(
                    f"dev == {os.major(st.st_rdev) << 20 | os.minor(st.st_rdev)}")
                (inst / "events/block" / event / "enable").write_text("1")
            _fio(device, "--rw=randrw", "--bssplit=4k/70:64k/30", "--io_size=2M", "--fsync=8")
            time.sleep(0.3)
            _fio(device, "--rw=randread", "--bs=4k", "--io_size=1M")
            _fio(device, "--rw=randtrim", "--bs=64k", "--io_size=1M", "--iodepth=1")
            for event in EVENTS:
                (inst / "events/block" / event / "enable").write_text("0")
            (OUT / "trace.txt.xz").write_bytes(lzma.compress((inst / "trace").read_bytes(), preset=9))
            for cpu in sorted(inst.glob("per_cpu/cpu*")):
                fd = os.open(cpu / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
                pages = []
                try:
                    while True:
                        try:
                            page = os.read(fd, 4096)
                        except BlockingIOError:
                            break
                        if not page:
                            break
                        pages.append(page)
                finally:
                    os.close(fd)
                (OUT / f"{cpu.name}.raw.xz").write_bytes(lzma.compress(b"".join(pages), preset=9))
            for name, source in (("header_page", "events/header_page"), ("header_event", "events/header_event"),
                                 *((f"{e}.format", f"events/block/{e}/format") for e in EVENTS)):
                (OUT / name).write_bytes((inst / source).read_bytes())
            clock = (inst / "trace_clock").read_text().split("[")[1].split("]")[0]
            (OUT / "made.txt").write_text(f"{datetime.now(UTC):%Y-%m-%d}, Linux {os.uname().release}, trace clock "
                                          f"{clock}, {os.cpu_count()} CPUs, loop device over /dev/shm, by "
                                          "make_ringbuf.py\n")
        finally:
            for event in EVENTS:
                with contextlib.suppress(OSError):
                    (inst / "events/block" / event / "enable").write_text("0")
            with contextlib.suppress(OSError):
                inst.rmdir()
            subprocess.run(["losetup", "-d", device], check=True)
    print(f"{OUT}: {sorted(p.name for p in OUT.iterdir())}")


if __name__ == "__main__":
    main()
