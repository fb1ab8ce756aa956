"""How fast does `iolab import` read fio output? About 100 MB of generated json+ and normal outputs.

The files are real samples from tests/data/fio, varied so that every file is distinct (job names,
timestamps, I/O counts) and of realistic sizes: json+ reports with 1-8 jobs (28-220 kB), normal final
reports with 1-32 jobs (3-85 kB) and normal ``--status-interval=1`` streams of 60-600 s runs
(0.2-2 MB, where only the last snapshot is the result). Each set is imported into a fresh SQLite database with
``importer.import_sources`` (one run per file, batched transactions, as the CLI does), and timed against
bare ``json.load`` of the same JSON files in the same run. Baseline and imports alternate for ``--rounds``
rounds and the best of each counts: this machine's speed varies from second to second (other jobs, CPU
steal), which only ever slows a measurement down. Targets: JSON import throughput >= 0.5 x json.load;
normal text >= 20 MB/s.

Then each stage of the import is timed alone over the same files, so that where the time goes can be
checked: read (bytes and decoding), sha256, compress (the stored text), parse (for JSON: of which
decoding with orjson, as the parser does), plan (job text, workload parameters), serialise (the report
as stored JSON), SQL (storing prepared runs, less serialising), and for normal text the construction of
the parsed model's frozen dataclasses alone (rebuilding them from their fields). For normal final
reports it also prints a floor for an exact parser in CPython: converting each number a job block
prints, one regular-expression match per line, and building the block's model objects. The codecs
for the stored text are compared too.

    .venv/bin/python benchmarks/import.py [--mb 100] [--rounds 3] [--dir DIR] [--json]

``--dir /dev/shm`` keeps other jobs' disk traffic out of the figures (the generated files: the
databases go to the default temporary directory, as iolab writes no database under /dev).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import re
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from iolab.fio import parse_output
from iolab.fio.num2str import num2str
from iolab.model import FioReport, to_json_text
from iolab.store import codecs as store_codecs
from iolab.store.database import Store
from iolab.workflows import importer
from ratios import Ratio, add_json_option, emit

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
            read = clone["read"]
            read["total_ios"] += i + k  # distinct numbers, as in real runs, and the IOPS fio prints for them
            read["iops"] = 1000 * read["total_ios"] / read["runtime"]
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
        # distinct I/O counts, within the rounding of the IOPS the block prints (71.3k: ± 100 IOPS in 3 s)
        blocks = "".join(re.sub(r"total=(\d+)", lambda m, k=k: f"total={int(m[1]) + (i + k) % 250}",
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
            total, runtime = 85751 * s + i, s * 1000 - 104  # the snapshot's read total, grown, and its runtime
            parts.append(snapshot.replace("total=85751,", f"total={total},")
                         .replace("IOPS=95.7k", f"IOPS={num2str(1000 * total // runtime, 4)}")
                         .replace("(335MiB/896msec)", f"(335MiB/{runtime}msec)"))
        return "".join(parts)

    return write_set(directory, megabytes, ".stream.txt", text_for)


def megabytes(paths: Sequence[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / 1e6


def warm(paths: Sequence[Path]) -> None:
    """Read the files so that they are in the page cache (other jobs on the machine may drop it)."""
    for path in paths:
        path.read_bytes()


def timed(fn: Callable[[], object], repeat: int = 1, paths: Sequence[Path] = ()) -> float:
    """Wall seconds of ``fn()``, the best of ``repeat`` calls, each after reading ``paths`` untimed."""
    best = float("inf")
    for _ in range(repeat):
        warm(paths)
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def import_all(paths: Sequence[Path], db: Path) -> float:
    """Seconds to import ``paths`` into a fresh database ``db``, as the CLI does."""
    store = Store(f"sqlite:///{db}")
    try:
        outcomes: list[importer.Outcome] = []
        sources = importer.discover(paths)
        seconds = timed(lambda: outcomes.extend(importer.import_sources(store, sources)), paths=paths)
        failed = [n for o in outcomes for n in o.notes]
        assert not failed, failed[0]
        return seconds
    finally:
        store.close()




def constructions(obj: Any, out: list[tuple[type, dict[str, Any]]]) -> list[tuple[type, dict[str, Any]]]:
    """Every dataclass object in ``obj`` as ``(class, fields)``, to time constructing them alone."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        out.append((type(obj), fields))
        for value in fields.values():
            constructions(value, out)
    elif isinstance(obj, tuple | list):
        for item in obj:
            constructions(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            constructions(item, out)
    return out


def stages(paths: Sequence[Path], root: Path, name: str, repeat: int) -> dict[str, float]:
    """Seconds of each import stage alone over ``paths`` (see the module docstring)."""
    datas = [p.read_bytes() for p in paths]
    texts = [d.decode() for d in datas]
    reports: list[FioReport] = [parse_output(t, str(p)) for t, p in zip(texts, paths, strict=True)]
    runs = [importer._run(source, [importer._parse(p, False)], None, {})[0]  # type: ignore[list-item]
            for source, p in zip(importer.discover(paths), paths, strict=True)]  # what import_sources stores
    out = {
        "read": timed(lambda: [p.read_bytes().decode() for p in paths], repeat, paths),
        "sha256": timed(lambda: [hashlib.sha256(d).hexdigest() for d in datas], repeat),
        "compress": timed(lambda: [store_codecs.compress_raw(d) for d in datas], repeat),
        "parse": timed(lambda: [parse_output(t, str(p)) for t, p in zip(texts, paths, strict=True)], repeat),
        "plan": timed(lambda: [importer.plan_results(r, p.name) for r, p in zip(reports, paths, strict=True)],
                      repeat),
        "serialise": timed(lambda: [to_json_text(r) for r in reports], repeat),
    }
    store = Store(f"sqlite:///{root / name}-stages.db")
    try:
        batches = [runs[i:i + importer.BATCH_FILES] for i in range(0, len(runs), importer.BATCH_FILES)]
        out["SQL"] = timed(lambda: [store.add_finished_runs(b) for b in batches]) - out["serialise"]  # once:
        # the runs are stored now, a second time would be refused as duplicates
    finally:
        store.close()
    made = [c for r in reports for c in constructions(r, [])]
    out["model objects"] = timed(lambda: [cls(**fields) for cls, fields in made], repeat)
    return out


_JOB_LINE = re.compile(r"\n(?=\S[^\n]*: \(groupid=)|\nRun status group")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_ANY_LINE = re.compile(r"(\w+) \((\w+)\): min=\s*([^,]+), max=\s*([^,]+)")


def parse_floor(paths: Sequence[Path], repeat: int) -> str:
    """The least work an exact parser of normal final reports does in CPython, per job block: convert
    every number the block prints, match each of its lines once against one regular expression, and
    build the block's model objects (as parsed). Said as µs per block and the MB/s it allows."""
    texts = [p.read_text() for p in paths]
    blocks = [b for t in texts for b in _JOB_LINE.split(t)[1:-1]]
    numbers = [_NUMBER.findall(b) for b in blocks]
    lines = [[line.strip() for line in b.split("\n") if line.strip()] for b in blocks]
    made = [c for t, p in zip(texts, paths, strict=True) for c in constructions(parse_output(t, str(p)).jobs, [])]
    per_block = 1e6 / len(blocks)
    convert = timed(lambda: [[float(x) for x in n] for n in numbers], repeat) * per_block
    match = timed(lambda: [[_ANY_LINE.match(line) for line in b] for b in lines], repeat) * per_block
    build = timed(lambda: [cls(**fields) for cls, fields in made], repeat) * per_block
    chars = sum(map(len, blocks)) / len(blocks)
    return (f"{chars:.0f} chars, {sum(map(len, numbers)) / len(blocks):.0f} numbers, "
            f"{sum(map(len, lines)) / len(blocks):.0f} lines: converting the numbers {convert:.0f} us + one match "
            f"per line {match:.0f} us + {len(made) / len(blocks):.0f} model objects {build:.0f} us = "
            f"{convert + match + build:.0f} us, at most {chars / (convert + match + build):.1f} MB/s before storing")


def rate(mb: float, seconds: float) -> str:
    return f"{mb / seconds:7.1f} MB/s ({seconds:5.2f} s)"


def print_stages(found: dict[str, float], decode_s: float | None = None) -> None:
    parts = [f"{key} {seconds:.2f}" for key, seconds in found.items() if key != "model objects"]
    if decode_s is not None:
        parts[3] += f" (decoding with orjson {decode_s:.2f})"
    total = sum(v for k, v in found.items() if k != "model objects")
    print(f"    stages alone, s: {' | '.join(parts)} | sum {total:.2f}")
    if decode_s is None:
        print(f"    of parse: constructing the model's frozen dataclasses alone {found['model objects']:.2f} s")


def compare_codecs(paths: Sequence[Path]) -> None:
    """Speed and stored size of the stored text's codecs: the one in use, and zlib levels 1 and 6."""
    datas = [p.read_bytes() for p in paths]
    mb = sum(map(len, datas)) / 1e6
    in_use = f"{store_codecs.raw_codec.__name__} level {store_codecs.RAW_ZLIB_LEVEL} (in use)"
    codecs = {in_use: store_codecs.compress_raw,
              "zlib level 1": lambda d: zlib.compress(d, 1), "zlib level 6": lambda d: zlib.compress(d, 6)}
    for label, fn in codecs.items():
        seconds = timed(lambda fn=fn: [fn(d) for d in datas], repeat=3)
        stored = sum(len(fn(d)) for d in datas) / 1e6
        print(f"    {label:32s} {rate(mb, seconds)}, stored text {stored:.1f} MB")


def measure(sets: dict[str, list[Path]], root: Path, rounds: int) -> tuple[float, dict[str, float]]:
    """Seconds of json.load of the json+ set and of importing each set: alternating rounds, the best of each."""
    js = sets["json+ reports"]
    bare, imported = float("inf"), dict.fromkeys(sets, float("inf"))
    for attempt in range(rounds):
        bare = min(bare, timed(lambda: [json.loads(p.read_text()) for p in js], paths=js))
        for name, paths in sets.items():
            imported[name] = min(imported[name], import_all(paths, root / f"{name.replace(' ', '-')}{attempt}.db"))
    return bare, imported


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100,
                        help="size of the generated set (json+ 60 %%, normal reports 20 %%, streams 20 %%)")
    parser.add_argument("--rounds", type=int, default=3, help="baseline/import rounds, the best counts")
    parser.add_argument("--dir", default=None, help="where the files go (default: a temp dir)")
    add_json_option(parser)
    args = parser.parse_args()
    with (contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout),
          tempfile.TemporaryDirectory(dir=args.dir, prefix="iolab-bench-import-") as tmp,
          tempfile.TemporaryDirectory(prefix="iolab-bench-import-db-") as db_tmp):
        root, dbs = Path(tmp), Path(db_tmp)
        for sub in ("json", "normal", "streams"):
            (root / sub).mkdir()
        sets = {"json+ reports": make_jsonplus(root / "json", args.mb * 0.6),
                "normal reports": make_normal(root / "normal", args.mb * 0.2),
                "normal streams": make_streams(root / "streams", args.mb * 0.2)}
        size = {name: megabytes(paths) for name, paths in sets.items()}
        print("generated " + ", ".join(f"{len(p)} {name} ({size[name]:.1f} MB)" for name, p in sets.items()))
        bare, imported = measure(sets, dbs, args.rounds)
        print(f"json.load (baseline)        {rate(size['json+ reports'], bare)}")
        js_texts = [p.read_text() for p in sets["json+ reports"]]
        for name, paths in sets.items():
            print(f"{name + ' import':27s} {rate(size[name], imported[name])}")
            found = stages(paths, dbs, name.replace(" ", "-"), args.rounds)
            json_only = name == "json+ reports"
            print_stages(found, timed(lambda: [orjson.loads(t) for t in js_texts], args.rounds) if json_only else None)
            if name == "normal reports":
                print(f"    floor of an exact parser in CPython, per job block of {parse_floor(paths, args.rounds)}")
        print("stored text codecs (json+ set):")
        compare_codecs(sets["json+ reports"])
        text_mb = size["normal reports"] + size["normal streams"]
        text_rate = text_mb / (imported["normal reports"] + imported["normal streams"])
        print(f"normal final reports alone {size['normal reports'] / imported['normal reports']:.1f} MB/s")
    emit("import", [Ratio("JSON import / json.load throughput", bare / imported["json+ reports"], 0.5, "higher"),
                    Ratio("normal text import, MB/s", text_rate, 20, "higher")], args.json)


if __name__ == "__main__":
    main()
