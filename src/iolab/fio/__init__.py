"""fio's own formats, read as fio reads them: job files (``jobfile``), and its output in every format
and version (``parse_output``; ``parse_outputs`` for a text holding several), its logs (``logs``) and
verify states (``verify``).

>>> report = parse_output(open("result.txt").read(), name="result.txt")   # doctest: +SKIP
>>> pasted = parse_outputs(open("field-report.txt").read(), "field-report.txt")  # doctest: +SKIP

``parse_output`` reads one output (a file fio wrote); ``parse_outputs`` reads a text that may hold
several, pasted one after another with prose between them, as one report per output
(``fio.pasted``). ``parse_output`` first normalises text pasted from web pages (``clean_pasted``),
then detects the format and dispatches:

* ``json`` — any line-leading JSON object carrying ``"fio version"``: json, json+, client/server
  JSON, text before the JSON, concatenated ``--status-interval`` documents (``json.parse_json``);
* ``normal`` — a job line ``name: (groupid=0, jobs=1): err= 0: …`` (``normal.parse_normal``);
* ``terse`` — lines ``2;…`` to ``5;…`` (``--minimal``, terse v2-v5; ``terse.parse_terse``).

When an output holds several formats (``--output-format=json,normal``), JSON wins (it alone has
exact bytes), then normal (exact I/O counts), then terse. Every error is an ``iolab.errors.
ParseError`` whose message names ``name`` and, where it can, the line or JSON key. Every report
passes ``validate.check`` (each parser applies it): no impossible number leaves this package.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import ParseError
from ..model import FioReport
from . import validate

if TYPE_CHECKING:
    from .json import parse_json
    from .normal import parse_normal
    from .pasted import parse_outputs
    from .terse import parse_terse

__all__ = ["clean_pasted", "detect_format", "format_of", "parse_cleaned", "parse_json", "parse_normal", "parse_output",
           "parse_outputs", "parse_terse"]

#: The parsers, imported when first used: reading stored runs (``fio.validate``) needs none of them.
_LAZY = {"parse_json": ".json", "parse_normal": ".normal", "parse_terse": ".terse", "parse_outputs": ".pasted"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Unicode space separators (category Zs) that web pages put in code blocks, and the
#: invisible characters (zero-width spaces and joiners, word joiner, BOM, soft hyphen).
_SPACES = "\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
_INVISIBLE = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"
_TABLE = {
    **{ord(c): " " for c in _SPACES + "\t\v\f"},
    **{ord(c): None for c in _INVISIBLE},
    **{ord(c): "\n" for c in "\u2028\u2029\x85"},
}
_NORMAL_JOB = re.compile(r": \(groupid=\d+, jobs=\d+\): err=")
_TERSE_LINE = re.compile(r"^[ \t]*[2-5];[^\n;]*;", re.MULTILINE)


def clean_pasted(text: str) -> str:
    """Undo what web pages and editors do to fio output pasted from them.

    CRLF and lone CR (fio's ETA lines end in ``\\r``) become ``\\n``; non-breaking and other
    Unicode spaces, tabs, vertical tabs and form feeds become spaces; zero-width characters and
    soft hyphens are removed; Unicode line separators become ``\\n``. Line numbers that code
    blocks glue to each line (``" 1fio-3.16"``, ``"10    clat percentiles"``) are removed from
    every run of consecutive lines that start with 1, 2, … N (N >= 2), one run per code block: a
    web page pasting several outputs numbers each block from 1, with prose between them. A line
    that starts with a digit out of such a count (terse ``3;…``, prose ``1、安装``) is never
    touched. Clean text comes back unchanged.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.isascii() or "\t" in text or "\v" in text or "\f" in text:
        text = text.translate(_TABLE)
    return _strip_line_numbers(text)


#: A line that starts (after spaces) with 1, followed by one that starts with 2: where a numbered
#: code block may begin. It starts with a literal newline, which the regex engine scans for at C
#: speed (``^`` in MULTILINE mode is tried at every character: 10x slower on a long status stream).
_NUMBERED_START = re.compile(r"\n *1[^\n]*\n *2")


def _strip_line_numbers(text: str) -> str:
    """``text`` without the numbers glued to the lines of its numbered code blocks (see
    ``clean_pasted``): each run of lines counting 1, 2, … N (N >= 2) loses its numbers."""
    if _NUMBERED_START.search("\n" + text[:4096]) is None and _NUMBERED_START.search(text) is None:
        return text  # the common case, decided without splitting the text
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        run = _numbered_run(lines, i)
        if len(run) >= 2:
            out += run
            i += len(run)
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


def _numbered_run(lines: list[str], start: int) -> list[str]:
    """The bodies of the lines from ``start`` on that carry the numbers 1, 2, 3 … (empty when
    ``lines[start]`` does not start with 1)."""
    bodies = []
    for number, line in enumerate(lines[start:], 1):
        body = line.lstrip(" ")
        label = str(number)
        if not body.startswith(label):
            break
        bodies.append(body[len(label):])
    return bodies


def format_of(text: str) -> str | None:
    """``"json"``, ``"normal"`` or ``"terse"``: which parser reads ``text`` (after cleaning), or None
    when it looks like none of fio's outputs."""
    from .json import looks_like_json
    if looks_like_json(text):
        return "json"
    if _NORMAL_JOB.search(text):
        return "normal"
    if _TERSE_LINE.search(text):
        return "terse"
    return None


def detect_format(text: str, name: str = "<input>") -> str:
    """``"json"``, ``"normal"`` or ``"terse"``: which parser reads ``text`` (after cleaning).

    Raises ``ParseError`` when the text looks like none of fio's outputs, saying what it holds
    instead (fio commands, a job file, figures quoted from an output: ``pasted.not_output``).
    """
    fmt = format_of(text)
    if fmt is None:
        from .pasted import not_output
        raise not_output(text, name)
    return fmt


_PARSERS = {"json": "parse_json", "normal": "parse_normal", "terse": "parse_terse"}


def parse_output(text: str, name: str = "<input>") -> FioReport:
    """Read any fio output (JSON, json+, client JSON, normal, terse v2-v5) into a FioReport.

    ``name`` (a file name, usually) labels the input in error messages. The text is cleaned with
    ``clean_pasted`` first. If the JSON part of a mixed output is broken, the normal or terse part
    is read instead. Raises ``ParseError`` and nothing else: a bug that would raise another
    exception on strange input is reported as a ``ParseError`` naming the exception.

    The text is taken to be *one* output (a file fio wrote): the job reports of several runs pasted
    one after another would be read as the jobs of one run. ``parse_outputs`` reads such a text.
    """
    return parse_cleaned(clean_pasted(text), name)


def parse_cleaned(cleaned: str, name: str = "<input>") -> FioReport:
    """``parse_output`` of a text ``clean_pasted`` has cleaned already."""
    try:
        fmt = detect_format(cleaned, name)
        try:
            return __getattr__(_PARSERS[fmt])(cleaned, name)  # type: ignore[no-any-return]
        except ParseError as exc:
            if fmt != "json" or not (_NORMAL_JOB.search(cleaned) or _TERSE_LINE.search(cleaned)):
                raise
            fallback = "normal" if _NORMAL_JOB.search(cleaned) else "terse"
            report = __getattr__(_PARSERS[fallback])(cleaned, name)
            why = exc.message.removeprefix(f"{name}: ").removeprefix(f"{name}, ")
            return validate.check(replace(report, warnings=(
                f"the JSON part is not used ({why}); the {fallback} part is read", *report.warnings)), name)
    except ParseError:
        raise
    except (ValueError, ArithmeticError, LookupError, TypeError, AttributeError, RecursionError) as exc:
        raise ParseError(f"{name}: cannot read this fio output ({type(exc).__name__}: {exc})") from exc
