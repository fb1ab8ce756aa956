"""Seeded fuzzing of suites: damaged suites through suite loading (a SuiteError naming the file and
place, never another exception); absurd suites name the place. ``IOLAB_FUZZ_SEED`` changes the seed."""

from __future__ import annotations

import os
import random
import re

import pytest
import yaml

from iolab.describe import matrix, suite
from iolab.describe.render import render_job
from iolab.errors import SuiteError

SEED = int(os.environ.get("IOLAB_FUZZ_SEED", "15"))

# --- suites ---------------------------------------------------------------------------------------------------

SUITES = {
    **{f"builtin-{name}.yaml": text for name, text in suite.builtin_suites().items()},
    "readme.yaml": """name: nvme-vs-ceph
targets:
  nvme: /dev/nvme1n1
  rbd: {path: /dev/rbd0, size: 64g}
defaults:
  ioengine: libaio
  direct: 1
  time_based: 1
  ramp_time: 10s
  runtime: 60s
repeat: 3
workloads:
  - {rw: randread, bs: 4k, iodepth: [1, 8, 32, 128]}
  - {rw: randrw, rwmixread: 70, bs: 4k, iodepth: 32, numjobs: 4, group_reporting: null}
  - {name: seqwrite, rw: write, bs: 1m, iodepth: 8}
tune: {scheduler: [mq-deadline, none], rq_affinity: 2}
precondition: {fill: 2x, bs: 128k, rounds: 5, round_time: 30s, track: iops}
""",
}
#: Values that are wrong for the key they replace, or absurd for it.
BAD_VALUES = ["-5", "0", "-1s", "1e400", ".inf", ".nan", "[]", "{}", "[1, [2]]", "{a: 1}", "''", "null", "true",
              "99999999999999999999999999999p", "4x", "-", "1 2", "'\x00'", "[" * 300 + "]" * 300, "*alias"]
#: Where each known place is written in YAML (``key: value`` inside braces or on its own line).
_SCALAR = re.compile(r"(?P<key>[A-Za-z_]+): (?P<value>[^,{}\[\]\n]+|\[[^\]\n]*\])")


def mutate_suite(rng: random.Random, text: str) -> tuple[str, str]:
    """One damaged suite: (what was done, the text)."""
    kind = rng.choice(["value", "value", "value", "unknown key", "duplicate key", "lines", "truncate", "chars",
                       "nesting", "binary", "anchors"])
    lines = text.split("\n")
    if kind == "value":
        matches = list(_SCALAR.finditer(text))
        m = rng.choice(matches)
        return f"value of {m['key']}", text[:m.start("value")] + rng.choice(BAD_VALUES) + text[m.end("value"):]
    if kind == "unknown key":
        m = rng.choice(list(_SCALAR.finditer(text)))
        return kind, text[:m.start("key")] + m["key"] + "x" + text[m.end("key"):]
    if kind == "duplicate key":
        m = rng.choice(list(_SCALAR.finditer(text)))
        return kind, text[:m.end()] + (", " if text[m.end():m.end() + 1] in ",}" else "\n") + m.group() + text[m.end():]
    if kind == "lines":
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines.insert(i, lines[j]) if rng.random() < 0.5 else lines.pop(i)
        return kind, "\n".join(lines)
    if kind == "truncate":
        return kind, text[:rng.randrange(len(text) + 1)]
    if kind == "chars":
        i = rng.randrange(len(text) + 1)
        char = rng.choice(["\t", ":", "-", "[", "{", "'", '"', "&", "*", "!", "%", "\x00", "#"])
        return kind, text[:i] + char + text[i:]
    if kind == "nesting":
        depth = rng.choice([50, 500, 5000])
        return kind, text + f"\nextra: {'[' * depth}{']' * depth}\n"
    if kind == "binary":
        return kind, rng.randbytes(rng.randint(0, 300)).decode("latin-1")
    return kind, "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" + text


def test_fuzzed_suites_load_or_fail_naming_file_and_place():
    rng = random.Random(SEED)
    outcomes = {"loaded": 0, "refused": 0}
    for i in range(1500):
        name, original = rng.choice(sorted(SUITES.items()))
        kind, text = mutate_suite(rng, original)
        try:
            loaded = suite.load_yaml(text, source=name)
        except SuiteError as exc:
            outcomes["refused"] += 1
            assert exc.message.startswith(name), (kind, text, exc.message)
            if kind.startswith("value of") and not exc.message.startswith(f"{name}: not valid YAML"):
                assert re.match(rf"{re.escape(name)}:\d+: ", exc.message), (i, kind, exc.message)
            continue
        outcomes["loaded"] += 1
        for job in matrix.plan(loaded)[:50]:  # what loads, plans and renders
            render_job(job.spec, "file")
    assert outcomes["loaded"] > 100 and outcomes["refused"] > 500, outcomes


@pytest.mark.parametrize(("text", "message"), [
    ("workloads: [{rw: read, runtime: -5s}]", "s.yaml:1: workloads[0].runtime: expected a duration"),
    ("workloads: [{rw: read, iodepth: 0}]", "s.yaml:1: workloads[0].iodepth: expected a whole number >= 1, got '0'"),
    ("workloads:\n  - {rw: read, bs: 4k, bs: 8k}", "s.yaml:2: workloads[0].bs: given twice (lines 2 and 2)"),
    ("repeat: 1\nworkloads: [{rw: read}]\nrepeat: 2", "s.yaml:3: repeat: given twice (lines 1 and 3)"),
    ("workloads: [{rw: read, bs: " + "[" * 3000 + "]" * 3000 + "}]", "s.yaml:1: nested too deeply"),
    ("workloads: [{rw: read, iodepth: [" + ", ".join(map(str, range(1, 200))) + "], bs: ["
     + ", ".join(f"{n}k" for n in range(1, 200)) + "]}]",
     "s.yaml:1: workloads[0]: expands to 39601 workloads (iodepth × bs: 199 × 199); at most 10000"),
    ("workloads: [{true: 1}]", "s.yaml:1: workloads[0]: key True: expected text (a name; quote it)"),
    ("targets: {5: /tmp}\nworkloads: [{rw: read}]", "s.yaml:1: targets: key 5: expected text (a name; quote it)"),
    ("workloads: [{rw: read, size: 1e400}]", "s.yaml:1: workloads[0].size: expected a size like 4k or 1m, got '1e400'"),
])
def test_absurd_suites_name_the_place(text, message):
    with pytest.raises(SuiteError) as caught:
        suite.load_yaml(text, source="s.yaml")
    assert caught.value.message.startswith(message), caught.value.message


def test_suites_used_by_the_fuzzer_are_valid():
    for name, text in SUITES.items():
        suite.load_yaml(text, source=name)
        assert yaml.safe_load(text)
