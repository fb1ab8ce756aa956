"""A seeded fuzzer of fio outputs, run through iolab's real import path into a real store.

Inputs are real fio outputs (tests/data/fio, the lab's shared samples, fio's json+ reports recorded
for the fast tier's fake fio in tests/data/fio-runs, or outputs fio writes now) with 1-3 mutations
stacked: truncation, byte flips, lines deleted, duplicated or swapped, binary data, empty files,
400-digit numbers, NaN/infinity, negated numbers, a digit changed, a number scaled, wrong JSON types,
duplicate JSON keys, deep nesting, odd characters (NUL, surrogate escapes, non-breaking spaces, CR),
two outputs of different versions concatenated or spliced, and huge files. ``run`` imports each
input on its own (``importer.import_files``), then reads every stored run back, renders it as
``iolab show`` does and checks it for impossible values with rules of its own (not
``fio.validate``'s). Used by tests/unit/workflows/test_fuzz_import.py (CI) and scripts/fuzz-import
(long).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import lzma
import math
import random
import re
import subprocess
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from iolab.errors import IolabError
from iolab.model import FioReport, Run
from iolab.report import results as results_report
from iolab.runner.local import OUTPUT_NAME
from iolab.store.database import Store
from iolab.store.records import UnreadableRun
from iolab.workflows import importer
from paths import DATA as TEST_DATA
from paths import FIO as DATA
from paths import SHARED_SAMPLES

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_JSON_VALUE = re.compile(r'("[^"\n]+"\s*:\s*)(-?\d+(?:\.\d+)?|"[^"\n]*")')


def seeds(extra: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """Real fio outputs by name: tests/data/fio, the shared samples (if present), ``extra``; each
    content once."""
    found: dict[str, bytes] = {}
    not_output = {p.name for p in (DATA / "not-output").iterdir()}
    for folder in (DATA, SHARED_SAMPLES / "fio", SHARED_SAMPLES):
        for path in sorted(folder.glob("*")) if folder.is_dir() else ():
            if path.is_file() and path.suffix in (".json", ".txt") and path.name not in not_output \
                    and not path.name.startswith("num2str"):
                found.setdefault(path.name, path.read_bytes())
    for name, text in (extra or {}).items():
        found[name] = text.encode()
    unique: dict[bytes, str] = {}
    for name, data in found.items():
        unique.setdefault(data, name)
    return {name: data for data, name in unique.items()}


def recorded_outputs(book: str) -> dict[str, str]:
    """fio's final json+ report of every job in a book of the fake fio's recordings
    (``tests/data/fio-runs/<book>.jsonl.xz``, tests/support/fakefio.py: real fio 3.33, with
    ``--status-interval`` reports before the last), by a name of its own: real fio output to fuzz
    beside the samples without running fio."""
    out = {}
    for line in lzma.decompress((TEST_DATA / "fio-runs" / f"{book}.jsonl.xz").read_bytes()).decode().splitlines():
        entry = json.loads(line)
        if entry["kind"] == "run":
            output = entry["workdir"][OUTPUT_NAME]
            out[f"recorded-{entry['key']}.jsonplus.json"] = output[output.rfind("\n{\n") + 1:]
    return dict(sorted(out.items()))


def fio_outputs(workdir: Path, fio: str = "fio") -> dict[str, str]:
    """Outputs fio writes here and now, to fuzz beside the samples: json+ of two clones, normal,
    terse v5 (a 4 MiB file, 300 ms each). Raises ``OSError``/``CalledProcessError`` without fio."""
    out = {}
    for name, extra in (("gen.jsonplus.json", ["--output-format=json+", "--numjobs=2"]),
                        ("gen.normal.txt", ["--output-format=normal", "--rw=randread"]),
                        ("gen.terse-v5.txt", ["--output-format=terse", "--terse-version=5"])):
        subprocess.run([fio, "--name=gen", f"--filename={workdir / 'data'}", "--size=4m", "--bs=4k", "--rw=randrw",
                        "--ioengine=psync", "--runtime=300ms", "--time_based", f"--output={workdir / name}", *extra],
                       check=True, capture_output=True, timeout=60)
        out[name] = (workdir / name).read_text()
    (workdir / "data").unlink()
    return out


# -- mutations: text -> text (bytes for the binary ones) --------------------------------------------------------


def _lines(rng: random.Random, text: str, op: str) -> str:
    lines = text.split("\n")
    for _ in range(rng.randint(1, 3)):
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
    return "\n".join(lines)


def _number(rng: random.Random, text: str, replace: Callable[[str], str]) -> str:
    matches = list(_NUMBER.finditer(text))
    if not matches:
        return text
    m = rng.choice(matches)
    return text[:m.start()] + replace(m.group()) + text[m.end():]


def _json_value(rng: random.Random, text: str, replace: Callable[[str, str], str]) -> str:
    """``"key" : value`` with its value replaced (``replace(key_part, value)`` gives the new text)."""
    matches = list(_JSON_VALUE.finditer(text))
    if not matches:
        return _number(rng, text, lambda v: f'"{v}"')
    m = rng.choice(matches)
    return text[:m.start()] + replace(m.group(1), m.group(2)) + text[m.end():]


def _digit(rng: random.Random, value: str) -> str:
    digits = [i for i, c in enumerate(value) if c.isdigit()]
    i = rng.choice(digits)
    return value[:i] + rng.choice("0123456789") + value[i + 1:]


def _wrong_type(rng: random.Random) -> str:
    return rng.choice(['"text"', '"12"', "[1, 2]", '{"a": 1}', "true", "null", '""', "[]", "{}", '"-5"'])


def _deep(rng: random.Random) -> str:
    depth = rng.choice([10, 100, 300, 1000, 5000])
    return rng.choice(["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth])


def _odd_characters(rng: random.Random, text: str) -> str:
    chars = ["\x00", "\\u0000", "\\ud800", "\\udfff", "\u00a0", "\u200b", "\r", "\ufeff", "é", "\x7f", "\\", '"',
             "\t", "\u2028", "\\uZZZZ"]
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(chars) + text[i:]
    return text


def mutate(rng: random.Random, name: str, data: bytes, others: list[bytes]) -> tuple[str, bytes]:
    """One mutation of ``data`` (the output called ``name``): its label and the new bytes."""
    text = data.decode("utf-8", "surrogateescape")
    kind = rng.choices(list(_WEIGHTS), weights=list(_WEIGHTS.values()))[0]
    if kind == "truncate":
        return kind, data[:rng.randrange(len(data) + 1)]
    if kind == "flip":
        raw = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if raw:
                raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
        return kind, bytes(raw)
    if kind == "binary":
        junk = rng.randbytes(rng.randint(1, 4096))
        at = rng.randrange(len(data) + 1)
        return kind, junk if rng.random() < 0.5 else data[:at] + junk + data[at:]
    if kind == "empty":
        return kind, rng.choice([b"", b"\n", b"   \n\n", b"{}", b"[]", b"null", b'{"fio version": "fio-3.33"}'])
    if kind == "mixed versions":
        other = rng.choice(others).decode("utf-8", "surrogateescape")
        cut_a, cut_b = rng.randrange(len(text) + 1), rng.randrange(len(other) + 1)
        joined = rng.choice([text + "\n" + other, other + text, text[:cut_a] + other[cut_b:]])
        return kind, joined.encode("utf-8", "surrogateescape")
    if kind == "huge":
        copies = rng.randint(20, 400) if len(data) < 40_000 else rng.randint(5, 60)
        body = rng.choice([text * copies, text + ("x" * 200 + "\n") * (copies * 100), text.replace("\n", "\n" * 40)])
        return kind, body.encode("utf-8", "surrogateescape")
    changed = _TEXT_MUTATIONS[kind](rng, text)
    return kind, changed.encode("utf-8", "surrogateescape")


_TEXT_MUTATIONS: dict[str, Callable[[random.Random, str], str]] = {
    "delete lines": lambda rng, t: _lines(rng, t, "delete"),
    "duplicate lines": lambda rng, t: _lines(rng, t, "duplicate"),
    "swap lines": lambda rng, t: _lines(rng, t, "swap"),
    "400 digits": lambda rng, t: _number(rng, t, lambda v: rng.choice(["9" * 400, "9" * 400 + ".5", "1e400",
                                                                        "-" + "9" * 400])),
    "NaN/inf": lambda rng, t: _number(rng, t, lambda v: rng.choice(["NaN", "Infinity", "-Infinity", "nan", "inf",
                                                                      "-nan", "1e999", "-0"])),
    "negated": lambda rng, t: _number(rng, t, lambda v: v[1:] if v.startswith("-") else "-" + v),
    "digit": lambda rng, t: _number(rng, t, lambda v: _digit(rng, v)),
    "scaled": lambda rng, t: _number(rng, t, lambda v: v + rng.choice(["000", "0", ".5"])),
    "wrong type": lambda rng, t: _json_value(rng, t, lambda key, v: key + _wrong_type(rng)),
    "duplicate key": lambda rng, t: _json_value(rng, t, lambda key, v: f"{key}{v}, {key}" + rng.choice(
        ["-1", "9" * 30, "NaN", _wrong_type(rng), v])),
    "deep nesting": lambda rng, t: _json_value(rng, t, lambda key, v: key + _deep(rng)),
    "odd characters": _odd_characters,
}
_WEIGHTS = {"truncate": 8, "flip": 10, "binary": 3, "empty": 1, "mixed versions": 4, "huge": 0.3,
            "delete lines": 6, "duplicate lines": 6, "swap lines": 4, "400 digits": 6, "NaN/inf": 6, "negated": 10,
            "digit": 8, "scaled": 5, "wrong type": 8, "duplicate key": 5, "deep nesting": 3, "odd characters": 5}


def inputs(count: int, seed: int, sources: Mapping[str, bytes]) -> Any:
    """``count`` mutated inputs, the same for the same ``seed``: (index, seed name, mutations, bytes)."""
    rng = random.Random(seed)
    names = sorted(sources)
    others = [sources[n] for n in names]
    for index in range(count):
        name = rng.choice(names)
        data, kinds = sources[name], []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            kind, data = mutate(rng, name, data, others)
            kinds.append(kind)
        yield index, name, kinds, data


# -- impossible values, by rules of this module's own ----------------------------------------------------------


def impossible(report: FioReport) -> list[str]:
    """What in ``report`` no fio run can produce: a number that is not finite, or negative (except an
    errno and the steadystate slope), IOPS or bandwidth without a runtime or not matching the totals,
    percentiles that decrease."""
    problems: list[str] = []

    def walk(value: Any, where: str) -> None:
        if dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                if f.name not in ("error", "steadystate"):
                    walk(getattr(value, f.name), f"{where}.{f.name}")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, int) and key < 0:
                    problems.append(f"{where}: negative key {key}")
                walk(item, f"{where}[{key!r}]")
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, int | float) and not isinstance(value, bool) and \
                (not math.isfinite(value) or value < 0):
            problems.append(f"{where} = {value!r}")

    walk(report, "report")
    for job in report.jobs:
        for d in job.directions.values():
            at = f"{job.name!r} {d.direction}"
            if (d.iops is not None or d.bw_bytes_s is not None) and not d.runtime_ms:
                problems.append(f"{at}: a rate without a runtime ({d.runtime_ms})")
            if d.iops is not None and d.total_ios is not None and d.runtime_ms and \
                    not math.isclose(d.iops, 1000 * d.total_ios / d.runtime_ms, rel_tol=1e-9):
                problems.append(f"{at}: iops {d.iops} is not 1000 × {d.total_ios} / {d.runtime_ms}")
            for lat in (d.slat, d.clat, d.lat):
                values = [v for _, v in sorted((float(k), v) for k, v in (lat.percentiles_ns if lat else {}).items())]
                if values != sorted(values):
                    problems.append(f"{at}: percentiles decrease: {values}")
    return problems


# -- the run -------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What a fuzz run found. ``tracebacks``, ``unreadable`` and ``impossible`` should stay empty."""

    inputs: int = 0
    imported: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # by error, or "skipped" (a duplicate)
    tracebacks: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    impossible: list[str] = field(default_factory=list)
    mutations: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    runs: int = 0

    def summary(self) -> str:
        refused = sum(self.refused.values())
        kinds = ", ".join(f"{k} {n}" for k, n in self.refused.most_common())
        return (f"{self.inputs} inputs in {self.seconds:.1f} s ({self.inputs / max(self.seconds, 1e-9):.0f}/s): "
                f"{self.imported} imported, {refused} refused ({kinds}); {len(self.tracebacks)} tracebacks, "
                f"{len(self.unreadable)} unreadable runs, {len(self.impossible)} impossible values "
                f"(of {self.runs} stored runs read back)")


def run(store: Store, workdir: Path, count: int, seed: int = 15, extra: Mapping[str, str] | None = None,
        progress: Callable[[Tally], None] | None = None) -> Tally:
    """Import ``count`` mutated outputs one by one, then read back, render and check every stored run."""
    tally, start = Tally(), time.monotonic()
    sources = seeds(extra)
    for index, name, kinds, data in inputs(count, seed, sources):
        tally.inputs += 1
        tally.mutations.update(kinds)
        path = workdir / f"{index:06d}-{hashlib.sha1(data).hexdigest()[:8]}{Path(name).suffix}"
        path.write_bytes(data)
        try:
            for outcome in importer.import_sources(store, importer.discover([path])):
                for note in outcome.notes:  # skipped (the same content imported before) or failed
                    tally.refused[type(note.error).__name__ if note.error else note.status] += 1
                tally.imported += outcome.files
        except Exception:
            tally.tracebacks.append(f"import of {name} after {kinds} ({path.name}):\n{traceback.format_exc()}")
            path.rename(path.with_name("failed-" + path.name))
            continue
        path.unlink()
        if progress is not None and index % 1000 == 999:
            tally.seconds = time.monotonic() - start
            progress(tally)
    read_back(store, tally)
    tally.seconds = time.monotonic() - start
    return tally


def read_back(store: Store, tally: Tally) -> None:
    """Every stored run: read (``iolab show``'s path), rendered, and checked for impossible values."""
    for listed in store.list_runs():
        run_id = listed.run_id if isinstance(listed, UnreadableRun) else listed.id
        tally.runs += 1
        try:
            stored: Run = store.get_run(run_id)
            json.dumps(results_report.run_document(stored), default=str)
            results_report.results_table(stored)
        except UnreadableRun as exc:
            tally.unreadable.append(exc.message)
            continue
        except IolabError as exc:
            tally.tracebacks.append(f"run {run_id}: {type(exc).__name__}: {exc.message}")
            continue
        except Exception:
            tally.tracebacks.append(f"reading run {run_id}:\n{traceback.format_exc()}")
            continue
        for result in stored.results:
            if result.report is not None:
                tally.impossible += [f"run {run_id} ({stored.info.suite_name}): {p}" for p in impossible(result.report)]


def edit(text: str, edits: list[tuple[float, int, str]]) -> str:
    """``text`` with each edit ``(where, op, char)`` applied: at ``where`` (0–1 of the length) replace
    (op 0), insert (1) or delete (2) a character."""
    chars = list(text)
    for where, op, char in edits:
        if not chars:
            break
        i = min(int(where * len(chars)), len(chars) - 1)
        if op == 0:
            chars[i] = char
        elif op == 1:
            chars.insert(i, char)
        else:
            del chars[i]
    return "".join(chars)
