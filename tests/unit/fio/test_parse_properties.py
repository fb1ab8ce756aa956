"""Property tests: damaged fio outputs give a ParseError or a valid FioReport, never another exception.

The inputs are real outputs from tests/data/fio, truncated, shuffled, mutated byte by byte,
mixed with each other, or replaced by garbage. Each parser is also tested on its own, so a bug
cannot hide behind parse_output's last-resort conversion of stray exceptions.
"""

from __future__ import annotations

import math
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzing import edit
from iolab.errors import ParseError
from iolab.fio import clean_pasted, parse_json, parse_normal, parse_output, parse_terse
from iolab.model import FioReport
from paths import FIO as DATA

NORMAL = [(DATA / n).read_text() for n in (
    "fio-3.33_randrw_libaio.normal.txt", "fio-2.2.8_randrw_posixaio.normal.txt",
    "fio-3.16_randrw_posixaio.normal.txt", "fio-3.33_status-interval-1s_normal.txt",
)] + [clean_pasted((DATA / "seed001_ceph_rbd_fio316.txt").read_text())]
TERSE = [(DATA / n).read_text() for n in (
    "fio-3.33_randrw_libaio.terse-v3.txt", "fio-3.33_randrw_libaio.terse-v5.txt",
    "fio-2.2.8_randrw_posixaio.terse-v3.txt",
)]
JSON = [(DATA / n).read_text() for n in (
    "fio-3.33_randrw_libaio.json", "fio-2.2.8_randrw_posixaio.json", "fio-3.33_client_two_hosts.json",
    "fio-3.33_error_json_stdout_with_prefix_line.txt",
)]
ALL = NORMAL + TERSE + JSON
PARSERS = {"normal": (parse_normal, NORMAL), "terse": (parse_terse, TERSE), "json": (parse_json, JSON)}
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ALPHABET = st.sampled_from([*"0123456789;=%[],:.(){}|/-\n\r\t \x00\u00a0\u200bkMGiBxe\"", "nan", "1e999"])


def check(parse, text: str) -> None:
    """The contract: a FioReport whose numbers are sane, or a ParseError; nothing else."""
    try:
        report = parse(text, "prop")
    except ParseError as exc:
        assert str(exc).startswith("prop"), str(exc)
        return
    assert isinstance(report, FioReport) and report.jobs
    for job in report.jobs:
        for d in job.directions.values():
            if d.iops is not None:
                assert math.isfinite(d.iops) and d.iops >= 0
            if d.total_ios is not None and d.runtime_ms and report.source_format != "terse":
                assert d.iops == 1000 * d.total_ios / d.runtime_ms


EDITS = st.lists(st.tuples(st.floats(0, 1), st.integers(0, 2), ALPHABET), min_size=1, max_size=8)


@SETTINGS
@given(st.sampled_from(ALL), st.floats(0, 1))
def test_truncated(text, where):
    check(parse_output, text[: int(where * len(text))])


@SETTINGS
@given(st.sampled_from(ALL), st.randoms(use_true_random=False))
def test_shuffled_lines(text, rnd):
    lines = text.split("\n")
    rnd.shuffle(lines)
    check(parse_output, "\n".join(lines))


@SETTINGS
@given(st.sampled_from(ALL), EDITS)
def test_byte_mutations(text, edits):
    check(parse_output, edit(text, edits))


@SETTINGS
@given(st.sampled_from(ALL), st.sampled_from(ALL), st.floats(0, 1), st.floats(0, 1))
def test_spliced_outputs(a, b, x, y):
    check(parse_output, a[: int(x * len(a))] + b[int(y * len(b)):])


@SETTINGS
@given(st.text(max_size=2000) | st.binary(max_size=2000).map(lambda b: b.decode("latin-1")))
def test_garbage(text):
    check(parse_output, text)


@SETTINGS
@given(st.lists(st.sampled_from([
    "j: (groupid=0, jobs=1): err= 0: pid=1: x", "  read: IOPS=1k, BW=1 (1)(1/0msec)", "  read: IOPS=, BW=",
    "     issued rwts: total=99999999999999999999999,0,0,0", "    clat percentiles (usec):", "     | 1.00th=[",
    "    clat (usec): min=1, max=2, avg=nan, stdev=inf", "Run status group 0 (all jobs):", "Disk stats (read/write):",
    "  vda: ios=1/2, merge=0/0, ticks=0/0, in_queue=0, util=0.00%, aggrios=x", "3;fio-3.33;j;0;0", "{",
    '{"fio version": "fio-3", "jobs": [1]}', "fsync/fdatasync/sync_file_range:", "    sync (usec): min=1k",
    "<h> x: (g=0): rw=read, bs=(R) 1.5KiB-1.5KiB, (W) 1-1, (T) 1-1, ioengine=x", "fio-", ";vda;1;2",
]), max_size=30))
def test_line_soup(lines):
    check(parse_output, "\n".join(lines))


@SETTINGS
@given(st.sampled_from(sorted(PARSERS)), st.data())
def test_each_parser_alone_raises_only_parse_error(kind, data):
    parse, corpus = PARSERS[kind]
    text = data.draw(st.sampled_from(corpus))
    how = data.draw(st.sampled_from(["cut", "mutate", "shuffle"]))
    if how == "cut":
        text = text[: data.draw(st.integers(0, len(text)))]
    elif how == "mutate":
        text = edit(text, data.draw(EDITS))
    else:
        lines = text.split("\n")
        random.Random(data.draw(st.integers())).shuffle(lines)
        text = "\n".join(lines)
    check(parse, text)


# --- clean_pasted ---------------------------------------------------------------------------------------


MULTILINE = [text for text in NORMAL + TERSE if text.strip().count("\n")]  # one line: numbering is ambiguous


@SETTINGS
@given(st.sampled_from(MULTILINE), st.integers(0, 4), st.booleans())
def test_numbered_paste_round_trips(text, pad, crlf):
    lines = text.rstrip("\n").split("\n")
    width = len(str(len(lines))) + pad
    pasted = "\n".join(f"{i:>{width}}{line}" for i, line in enumerate(lines, 1))
    if crlf:
        pasted = pasted.replace("\n", "\r\n")
    assert clean_pasted(pasted) == "\n".join(lines)


@SETTINGS
@given(st.sampled_from(NORMAL), st.lists(st.tuples(st.floats(0, 1), st.sampled_from(["\u200b", "\ufeff", "\u00ad"])),
                                         max_size=10))
def test_invisible_characters_do_not_change_the_report(text, inserts):
    chars = list(text.replace("  ", "\u00a0 ").replace("\n", "\r\n"))
    for where, char in inserts:
        chars.insert(int(where * len(chars)), char)
    assert parse_output("".join(chars)) == parse_output(text)


def test_text_starting_with_digits_is_not_renumbered():
    terse = TERSE[0]
    assert clean_pasted(terse) == terse
    two = "1;a\n2;b\n3;c\n"  # a whole 1..N sequence is numbering, whatever follows the numbers
    assert clean_pasted(two) == ";a\n;b\n;c\n"
    assert clean_pasted("3;a\n3;b\n") == "3;a\n3;b\n"
