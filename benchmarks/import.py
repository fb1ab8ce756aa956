"""How fast does `iolab import` read fio output? About 100 MB of generated json+ and normal outputs.

The files are real samples from tests/data/fio, varied so that every file is distinct (job names,
timestamps, I/O counts) and of realistic sizes: json+ reports with 1-8 jobs (28-220 kB), normal final
reports with 1-32 jobs (3-85 kB) and normal ``--status-interval=1`` streams of 60-600 s runs
(0.2-2 MB, where only the last snapshot is the result). Each set is imported into a fresh SQLite database with
``importer.import_files`` (one run per file, batched transactions, as the CLI does), and timed against
bare ``json.load`` of the same JSON files in the same run. Targets: JSON import throughput >= 0.5 x
json.load; normal text >= 20 MB/s. The store's share and the zlib level of the stored text (1, the
default, against 6) are measured too.

    .venv/bin/python benchmarks/import.py [--mb 100] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from iolab import importer
from iolab import store as store_mod
from iolab.fio import parse_output
from iolab.store import Store

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "fio"


def write_set(directory: Path, megabytes: float, name: str, text_for: Callable[[int], str]) -> list[Path]:
    """Files ``00000NAME``, … holding ``text_for(0)``, … in ``directory`` until they hold ``megabytes``."""
    paths, total = [], 0
    while total < megabytes * 1e6:
        text = text_for(len(paths))
        path = directory / f"{len(paths):05d}{name}"
        path.write_text(text)
        paths.append(path)
        total += len(text)
    return paths


def make_jsonplus(directory: Path, megabytes: float) -> list[Path]:
    """json+ reports with 1-8 jobs, each a varied copy of a real fio 3.33 json+ job."""
    doc = json.loads((DATA / "fio-3.33_randrw_libaio.jsonplus.json").read_text())

    def text_for(i: int) -> str:
        jobs = []
        for k in range(1 + i % 8):
            clone = json.loads(json.dumps(doc["jobs"][0]))
            clone["jobname"] = f"job{i}-{k}"
            clone["read"]["total_ios"] += i + k  # distinct numbers, as in real runs
            jobs.append(clone)
        return json.dumps({**doc, "timestamp": doc["timestamp"] + i, "jobs": jobs}, indent=2)

    return write_set(directory, megabytes, ".json", text_for)


def make_normal(directory: Path, megabytes: float) -> list[Path]:
    """Normal reports with 1-32 job blocks, from a real fio 3.33 normal output."""
    text = (DATA / "fio-3.33_randrw_libaio.normal.txt").read_text()
    header, rest = text.split("\n", 1)
    start = rest.index("randrw: (groupid")
    preamble, block_and_tail = rest[:start], rest[start:]
    block, tail = block_and_tail.split("\nRun status group", 1)

    def text_for(i: int) -> str:
        count = 1 + i % 32
        headers = "".join(header.replace("randrw:", f"j{k}:") + "\n" for k in range(count))
        blocks = "".join(re.sub(r"total=(\d+)", lambda m, k=k: f"total={int(m[1]) + i + k}",
                                block.replace("randrw:", f"j{k}:")) + "\n" for k in range(count))
        return headers + preamble + blocks + "Run status group" + tail

    return write_set(directory, megabytes, ".normal.txt", text_for)


def make_streams(directory: Path, megabytes: float) -> list[Path]:
    """Normal ``--status-interval=1`` outputs of 60-600 s runs, from a real fio 3.33 snapshot stream."""
    text = (DATA / "fio-3.33_status-interval-1s_normal.txt").read_text()
    first = text.index("sin: (groupid")
    head, snapshot = text[:first], text[first:text.index("sin: (groupid", first + 1)]

    def text_for(i: int) -> str:
        parts = [head]
        for s in range(1, 60 + (i * 97) % 541 + 1):
            parts.append(re.sub(r"total=(\d+)", lambda m, s=s: f"total={int(m[1]) * s + i}", snapshot)
                         .replace("(335MiB/896msec)", f"(335MiB/{s * 1000 - 104}msec)"))
        return "".join(parts)

    return write_set(directory, megabytes, ".stream.txt", text_for)


def megabytes(paths: Sequence[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / 1e6


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def import_all(paths: Sequence[Path], db: Path) -> float:
    store = Store(f"sqlite:///{db}")
    try:
        outcomes: list[object] = []
        seconds = timed(lambda: outcomes.extend(importer.import_files(store, paths)))
        failed = [o for o in outcomes if isinstance(o, importer.Failed)]
        assert not failed, failed[0]
        return seconds
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100,
                        help="size of the generated set (json+ 60 %%, normal reports 20 %%, streams 20 %%)")
    parser.add_argument("--dir", default=None, help="where the files and databases go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="iolab-bench-import-") as tmp:
        root = Path(tmp)
        for sub in ("json", "normal", "streams"):
            (root / sub).mkdir()
        js = make_jsonplus(root / "json", args.mb * 0.6)
        normal = make_normal(root / "normal", args.mb * 0.2)
        streams = make_streams(root / "streams", args.mb * 0.2)
        js_mb, normal_mb, streams_mb = megabytes(js), megabytes(normal), megabytes(streams)
        print(f"generated {len(js)} json+ reports ({js_mb:.1f} MB), {len(normal)} normal reports ({normal_mb:.1f} MB),"
              f" {len(streams)} normal --status-interval streams ({streams_mb:.1f} MB)")

        bare = timed(lambda: [json.loads(p.read_text()) for p in js])
        parse_js = timed(lambda: [parse_output(p.read_text(), p.name) for p in js])
        parse_normal = timed(lambda: [parse_output(p.read_text(), p.name) for p in normal])
        # zlib level for the stored text: alternate the levels so that neither gets the warm caches
        imports: dict[int, list[float]] = {1: [], 6: []}
        for attempt, level in enumerate((1, 6, 6, 1)):
            store_mod.RAW_ZLIB_LEVEL = level
            imports[level].append(import_all(js, root / f"json{attempt}.db"))
        store_mod.RAW_ZLIB_LEVEL = 1
        import_js, import_js_6 = min(imports[1]), min(imports[6])
        texts = [p.read_bytes() for p in js]
        zlib_s = {level: timed(lambda level=level: [zlib.compress(b, level) for b in texts]) for level in (1, 6)}
        zlib_mb = {level: sum(len(zlib.compress(b, level)) for b in texts) / 1e6 for level in (1, 6)}
        import_normal = import_all(normal, root / "normal.db")
        import_streams = import_all(streams, root / "streams.db")

        def rate(mb: float, seconds: float) -> str:
            return f"{mb / seconds:7.1f} MB/s ({seconds:5.2f} s)"

        print(f"json.load (baseline)        {rate(js_mb, bare)}")
        print(f"json+ parse only            {rate(js_mb, parse_js)}")
        print(f"json+ import                {rate(js_mb, import_js)}   store share {1 - parse_js / import_js:.0%}")
        print(f"json+ import, zlib level 6  {rate(js_mb, import_js_6)}")
        for level in (1, 6):
            print(f"  zlib level {level} alone: {rate(js_mb, zlib_s[level])}, stored text {zlib_mb[level]:.1f} MB")
        print(f"normal reports parse only   {rate(normal_mb, parse_normal)}")
        print(f"normal reports import       {rate(normal_mb, import_normal)}")
        print(f"normal streams import       {rate(streams_mb, import_streams)}")
        ratio = bare / import_js
        print(f"ratio JSON import / json.load throughput: {ratio:.2f} (target >= 0.5)  "
              f"{'ok' if ratio >= 0.5 else 'MISSED'}")
        text_mb, text_s = normal_mb + streams_mb, import_normal + import_streams
        verdict = "ok" if text_mb / text_s >= 20 else "MISSED"
        print(f"normal text import, all: {text_mb / text_s:.1f} MB/s (target >= 20)  {verdict}; "
              f"final reports alone {normal_mb / import_normal:.1f} MB/s")


if __name__ == "__main__":
    main()
