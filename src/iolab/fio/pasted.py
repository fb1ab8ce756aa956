"""A text holding several fio outputs, as people paste them into wikis, blogs and tickets: one
report per output, never the jobs of several runs read as one; and for a text holding none, why.

>>> pasted = parse_outputs(open("field-report.txt").read(), "field-report.txt")  # doctest: +SKIP
>>> [(o.first_line, o.report.disk_util[-1].name) for o in pasted.outputs]        # doctest: +SKIP
[(56, 'nvme0n1'), (111, 'sdb')]

A field report pastes the outputs of several fio runs one after another, with prose, shell prompts,
a job file and a recap of figures between them, often with line numbers glued to the lines of each
code block (``clean_pasted`` removes them block by block). ``split`` cuts the cleaned text into
parts, one per fio run, by what fio prints once per run and what it prints per report
(``__show_run_stats()`` and ``show_thread_status_normal()`` in stat.c, fio 2.x to 3.42):

* **A run starts** with lines fio prints before any report: a job's header line (``name: (g=0):
  rw=…``), the version line (``fio-3.7``), ``Starting 4 threads``, ``name: Laying out IO file``, or
  a JSON document with ``"fio version"`` (fio prints a report's JSON before its normal text, so
  JSON after a job report is another run, unless it follows that report's tail directly: the next
  snapshot of ``--output-format=json,normal --status-interval``). Such a line after a job report
  starts the next part.
* **A report** is the job blocks (``name: (groupid=0, jobs=4): err= 0: pid=9048: <local time>``),
  then a ``Run status group`` section per group, then ``Disk stats``. A job line after a ``Run
  status`` section continues the part only as the next ``--status-interval`` snapshot: it names a
  job of the part (name, group, pid) and nothing but fio's report tail (group and disk lines), ETA
  lines and that snapshot's JSON document stand between them. Otherwise it starts the next part (a
  run pasted without its start lines).

Each part is then read as one output, with the line numbers of the whole text (``fio.parse_cleaned``).
What is not an output is passed over with a note (``Outputs.notes``), never read as figures:

* a part whose job lines all repeat, character for character, job lines of an earlier part: fio
  prints the time to the second in each, so it is that output pasted again;
* a job line quoted in prose without the lines fio prints under it (``normal.NoReportLines``) in a
  part with neither start lines nor a ``Run status`` section;
* a run's start lines without a report (a run cut off, or a command's echo).

Lines quoting fio's figures in prose (a recap: ``read: IOPS=26.0k, BW=102MiB/s …``) belong to no
job block, so no parser reads them. A part that is an output but cannot be read raises
``ParseError`` naming the line: a result is exact or not stored. JSON documents of one part are
read as before (``--status-interval`` documents: the last one is the result), and terse lines are
not split (a terse line names no run).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..errors import ParseError
from ..model import FioReport
from . import clean_pasted, format_of, parse_cleaned
from .normal import NoReportLines
from .normalscan import JOB_LINE, positions, unprefixed

__all__ = ["Output", "Outputs", "Part", "not_output", "parse_outputs", "split"]

_VERSION = re.compile(r"fio-\d[\w.\-]*")
_STARTING = re.compile(r"Starting \d+ (?:process|processes|thread|threads)\b")
_HEADER = re.compile(r".*?: \(g=\d+\): rw=")
_LAYOUT = re.compile(r".*?: Laying out IO file")
#: What fio prints between two ``--status-interval`` snapshots: the previous one's group and disk
#: sections, and ETA lines (on a terminal); with ``--output-format=json,normal`` also the next
#: snapshot's JSON document (``_JSON_DOCUMENT``), which fio prints before its normal report.
_TAIL = re.compile(r"Run status group \d+|(?:READ|WRITE|TRIM|MIXED)\s*:|Disk stats \(read/write\):|\S+: ios=\d|"
                   r"Jobs: \d")
#: A JSON document as fio prints it: ``{`` and ``}`` alone on their lines, everything inside indented
#: (``json_print_object()`` in json.c).
_JSON_DOCUMENT = re.compile(r"^\{\n.*?^\}$", re.MULTILINE | re.DOTALL)
#: A line that is neither blank nor ``_TAIL``.
_NOT_TAIL = re.compile(r"^[ \t]*(?![ \t]|$|" + _TAIL.pattern + r")", re.MULTILINE)
#: Needles of the lines ``split`` looks at, found with ``str.split`` (C speed) rather than line by line.
_NEEDLES = (": (groupid=", "Run status group", "fio-", "Starting ", ": (g=", ": Laying out IO file")
_JOB, _STATUS, _START = range(3)


@dataclass
class Part:
    """A stretch of a text holding at most one fio run's output: offsets ``[start, end)``, the
    number of its first line (1-based), its job lines (stripped), whether it holds lines fio
    prints at a run's start (``started``) or a ``Run status`` section (``closed``), and where the
    first of fio's lines and the last ``Run status`` line are (offsets, -1 when none)."""

    start: int
    end: int
    line: int = 1
    job_lines: list[str] = field(default_factory=list)
    started: bool = False
    closed: bool = False
    first_fio: int = -1  # offset of its first start or job line
    last_status: int = -1  # offset of its last "Run status" line


def split(text: str) -> list[Part]:
    """The parts of a cleaned ``text``, one per fio run (see the module docstring), in order and
    covering the whole text; one part when the text holds no normal job report (JSON, terse, prose).
    """
    parts = [Part(0, len(text))]
    if ": (groupid=" not in text:
        return parts
    keys: set[tuple[str, str, str]] = set()
    status = -1  # the first "Run status" line after the part's last job line
    for start, kind, line in _events(text):
        part = parts[-1]
        if kind == _STATUS:
            part.closed, part.last_status = True, start
            status = start if status < 0 and part.job_lines else status
            continue
        if kind == _START:
            if part.job_lines and not (line.startswith("{") and status >= 0 and _adjacent(text, status, start)):
                part, keys, status = _cut(parts, text, start), set(), -1
            part.started = True
        else:
            match = JOB_LINE.match(line)
            assert match is not None
            key = (match["name"].strip(), match["g"], match["pid"])
            if status >= 0 and not (key in keys and _adjacent(text, status, start)):
                part, keys = _cut(parts, text, start), set()
            keys.add(key)
            part.job_lines.append(line)
            status = -1
        part.first_fio = start if part.first_fio < 0 else part.first_fio
    return parts


def _events(text: str) -> Iterator[tuple[int, int, str]]:
    """``(line start, kind, stripped line)`` for each job line, ``Run status`` line and line fio
    prints at a run's start, in order."""
    starts = {text.rfind("\n", 0, pos) + 1 for needle in _NEEDLES for pos in positions(text, needle)}
    starts.update(pos + 1 for pos in positions(text, "\n{"))
    if text.startswith("{"):
        starts.add(0)
    for start in sorted(starts):
        end = text.find("\n", start)
        line = unprefixed(text[start:len(text) if end < 0 else end])
        if JOB_LINE.match(line):
            yield start, _JOB, line
        elif line.startswith("Run status group"):
            yield start, _STATUS, line
        elif _VERSION.fullmatch(line) or _STARTING.match(line) or _HEADER.match(line) or _LAYOUT.match(line) or (
                line.startswith("{") and '"fio version"' in text[start:start + 2000]):
            yield start, _START, line


def _cut(parts: list[Part], text: str, offset: int) -> Part:
    """End the last part at ``offset`` and start the next one there."""
    last = parts[-1]
    last.end = offset
    part = Part(offset, len(text), last.line + text.count("\n", last.start, offset))
    parts.append(part)
    return part


def _adjacent(text: str, status: int, job: int) -> bool:
    """Whether only fio's report tail and ETA lines stand between a ``Run status`` line and a job line
    (one regex search over them: a long ``--status-interval`` stream asks this for every snapshot)."""
    gap = text[status:job]
    if "\n{" in gap:
        gap = _JSON_DOCUMENT.sub("", gap)
    if "<" not in gap:
        return _NOT_TAIL.search(gap) is None
    return all(not line or _TAIL.match(line) for line in map(unprefixed, gap.split("\n")))  # client mode


@dataclass(frozen=True)
class Output:
    """One fio output of a text: its report and the lines it spans (1-based, inclusive): from its
    first line fio prints (start or job line) to the end of its last report's group and disk lines."""

    report: FioReport
    first_line: int
    last_line: int


@dataclass(frozen=True)
class Outputs:
    """The outputs of a text, in order, and a note for each part of it passed over as no output."""

    outputs: tuple[Output, ...]
    notes: tuple[str, ...] = ()


def parse_outputs(text: str, name: str = "<input>") -> Outputs:
    """Every fio output in ``text`` (see the module docstring), each read as ``fio.parse_output``
    reads a file.

    ``name`` labels the text in error messages, whose line numbers are the whole text's. Raises
    ``ParseError`` when an output cannot be read, and when the text holds no output, saying what it
    holds instead (``not_output``): a job line without its report, fio commands, a job file, figures
    quoted from an output.
    """
    cleaned = clean_pasted(text)
    parts = split(cleaned)
    if len(parts) == 1:
        return Outputs((Output(parse_cleaned(cleaned, name), *_span(cleaned, parts[0])),))
    outputs: list[Output] = []
    notes: list[str] = []
    seen: dict[str, tuple[int, int]] = {}
    for part in parts:
        span = _span(cleaned, part)
        report = _read(cleaned, part, span, name, seen, notes)
        if report is not None:
            outputs.append(Output(report, *span))
        for line in part.job_lines:
            seen.setdefault(line, span)
    if not outputs:
        raise ParseError(f"{name}: not a fio output: {'; '.join(notes)}",
                         hint="import what fio printed: its normal output pasted whole, or the file "
                              "fio --output-format=json --output=FILE writes")
    return Outputs(tuple(outputs), tuple(notes))


def _read(cleaned: str, part: Part, span: tuple[int, int], name: str, seen: dict[str, tuple[int, int]],
          notes: list[str]) -> FioReport | None:
    """The report of one part, or None (and a note saying why) when it is no output."""
    where = f"lines {span[0]}–{span[1]}"
    earlier = [seen[line] for line in part.job_lines if line in seen]
    if part.job_lines and len(earlier) == len(part.job_lines):
        notes.append(f"{where} repeat the output at lines {earlier[0][0]}–{earlier[0][1]} (the same job "
                     f"line{'s' if len(earlier) > 1 else ''}, with fio's time to the second): read once")
        return None
    padded = "\n" * (part.line - 1) + cleaned[part.start:part.end]  # line numbers stay the whole text's
    if format_of(padded) is None:
        notes.append(f"{where} start a fio run but hold no report of it: not an output")
        return None
    try:
        return parse_cleaned(padded, name)
    except NoReportLines:
        if part.started or part.closed:
            raise
        shown = part.job_lines[0] if len(part.job_lines[0]) <= 72 else part.job_lines[0][:71] + "…"
        notes.append(f"line {span[0]} quotes a fio job line without the lines fio prints under it ({shown!r}): "
                     f"not an output")
        return None


def _span(text: str, part: Part) -> tuple[int, int]:
    """The first and last line (1-based) of the output in ``part``: from its first line fio prints
    to the last of the group and disk lines after its last ``Run status`` line (without one, to its
    last line that is not blank)."""
    first = part.line + text.count("\n", part.start, part.first_fio) if part.first_fio >= 0 else part.line
    if part.last_status < 0:
        end = part.start + len(text[part.start:part.end].rstrip())
    else:
        end = _tail_end(text, part.last_status, part.end)
    return first, part.line + text.count("\n", part.start, end)


def _tail_end(text: str, status: int, limit: int) -> int:
    """The offset where the group and disk lines that follow a ``Run status`` line (at ``status``)
    end, at most ``limit``: blank lines among them are theirs, any other line ends them."""
    end = pos = status + len(text[status:limit].split("\n", 1)[0])
    for line in text[end + 1:limit].split("\n"):
        stripped = unprefixed(line)
        if stripped and not _TAIL.match(stripped):
            break
        pos += 1 + len(line)
        end = pos if stripped else end
    return end


# ---------------------------------------------------------------------------------------------
# Why a text holds no fio output

#: ``fio`` run with job options (``-rw=randread``, ``--bs=4k``) or a job file (``job.fio``).
_COMMAND = re.compile(r"(?<![\w./-])fio(?![\w.-])(?=[^\n]*?(?:\s--?[a-z][a-z_]*=|\s\S+\.fio\b))")
#: A direction line as fio prints it, quoted in prose (fio 3.x ``read: IOPS=``, 2.x ``read : io=``).
_FIGURES = re.compile(r"(?<![\w-])(?:read|write|trim|mixed)\s*: (?:IOPS=\S|io=\d)")
_SECTION = re.compile(r"^[ \t]*\[[^\]\n]+\][ \t]*\n(?:[ \t]*(?:[;#][^\n]*)?\n)*[ \t]*"
                      r"(?:rw|readwrite|ioengine|bs|blocksize|filename|directory|iodepth|numjobs|size)[ \t]*=",
                      re.MULTILINE)
#: A line giving an IOPS figure in other words than fio's (a recap, a table typed by hand).
_OWN_FIGURES = re.compile(r"^(?![ \t]*Jobs: \d)[^\n]*?(?:\d[^\n]*?\biops\b|\biops\b[^\n]*?\d)",
                          re.MULTILINE | re.IGNORECASE)
_ETA = re.compile(r"^[ \t]*Jobs: \d+ \(f=\d+\)", re.MULTILINE)
_MESSAGE = re.compile(r"^[ \t]*fio: \S", re.MULTILINE)
_RUN_START = re.compile(r"^[ \t]*(?:fio-\d[\w.\-]*|Starting \d+ (?:process|thread)e?s?)[ \t]*$", re.MULTILINE)


def not_output(text: str, name: str) -> ParseError:
    """The error for a text in none of fio's output formats, saying what of fio it holds instead.

    What is looked for (the first of each is quoted with its line): fio commands with job options
    or a job file, figures quoted in fio's own words without the job report they come from, a job
    file section, fio's ETA lines, fio's messages (``fio: …``), a run's start lines. None of them
    is a result: commands and job files say what was run, not what it did, and quoted figures are
    fio's rounded display without the totals that make them exact (FIO_NOTES §2.3).
    """
    found = _findings(text)
    said = "; ".join(found) if found else "no line of it is in one of fio's output formats"
    return ParseError(
        f"{name}: not a fio output: {said}. fio's output is JSON with \"fio version\", job reports "
        f"('job: (groupid=0, jobs=1): err= 0: …' and the lines fio prints under it), or terse lines "
        f"'3;fio-3.33;job;0;0;…'",
        hint="import what fio printed: its normal output pasted whole (from the 'fio-3.x' line to 'Disk stats'), "
             "or the file fio --output-format=json --output=FILE writes")


def _findings(text: str) -> list[str]:
    """What of fio ``text`` holds, one phrase each (see ``not_output``)."""
    found = []
    commands = list(_COMMAND.finditer(text))
    if commands:
        count = len({text.count("\n", 0, m.start()) for m in commands})
        found.append(f"it holds {count} fio command{'s' if count > 1 else ''} ({_quote(text, commands[0].start())}) "
                     f"but nothing fio printed for {'them' if count > 1 else 'it'}")
    if match := _FIGURES.search(text):
        found.append(f"it quotes fio's figures ({_quote(text, match.start())}) without the job report they come from")
    elif match := _OWN_FIGURES.search(text):
        iops = match.start() + match[0].lower().index("iops")
        found.append(f"it gives IOPS figures in its own words ({_quote(text, iops, lead=40)}), which are no fio output")
    for pattern, phrase in (
        (_SECTION, "it holds a fio job file ({}), which says what to run, not what it did"),
        (_ETA, "it holds fio's progress lines ({}) but no report"),
        (_MESSAGE, "it holds fio's messages ({})"),
        (_RUN_START, "a fio run starts ({}) but no report of it follows"),
    ):
        if match := pattern.search(text):
            found.append(phrase.format(_quote(text, match.start() + len(match[0]) - len(match[0].lstrip()))))
    return found


def _quote(text: str, pos: int, width: int = 72, lead: int = 0) -> str:
    """``line N: '…'``: the line holding ``pos``, from ``pos`` on (from ``lead`` characters before it,
    ``…`` marking a cut), cut to ``width`` characters."""
    start = text.rfind("\n", 0, pos) + 1
    begin = max(start, pos - lead)
    end = text.find("\n", pos)
    shown = text[begin:len(text) if end < 0 else end].strip()
    if len(shown) > width:
        shown = shown[:width - 1].rstrip() + "…"
    if lead and begin > start:
        shown = "…" + shown
    return f"line {text.count(chr(10), 0, pos) + 1}: {shown!r}"
