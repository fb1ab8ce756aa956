"""fio's own formats, read as fio reads them: job files (``jobfile``), and its output in every format
and version (one entry point, ``parse_output``), its logs (``logs``) and verify states (``verify``).

>>> report = parse_output(open("result.txt").read(), name="result.txt")   # doctest: +SKIP

``parse_output`` first normalises text pasted from web pages (``clean_pasted``), then detects
the format and dispatches:

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
    from .terse import parse_terse

__all__ = ["clean_pasted", "detect_format", "parse_json", "parse_normal", "parse_output", "parse_terse"]

#: The parsers, imported when first used: reading stored runs (``fio.validate``) needs none of them.
_LAZY = {"parse_json": ".json", "parse_normal": ".normal", "parse_terse": ".terse"}


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
    blocks glue to each line (``" 1fio-3.16"``, ``"10    clat percentiles"``) are removed only
    when every line, up to trailing blank ones, starts with its own number 1, 2, … N (N >= 2),
    so a real fio line that starts with a digit (terse ``3;…``) is never touched.
    Clean text comes back unchanged.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.isascii() or "\t" in text or "\v" in text or "\f" in text:
        text = text.translate(_TABLE)
    return _strip_line_numbers(text)


def _strip_line_numbers(text: str) -> str:
    first = text.split("\n", 1)[0].lstrip(" ")
    if not first.startswith("1") or "\n" not in text:
        return text  # the common case, decided without splitting the whole text
    lines = text.split("\n")
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    if end < 2:
        return text
    stripped = []
    for number, line in enumerate(lines[:end], 1):
        body = line.lstrip(" ")
        label = str(number)
        if not body.startswith(label):
            return text
        stripped.append(body[len(label):])
    return "\n".join(stripped + lines[end:])


def detect_format(text: str, name: str = "<input>") -> str:
    """``"json"``, ``"normal"`` or ``"terse"``: which parser reads ``text`` (after cleaning).

    Raises ``ParseError`` when the text looks like none of fio's outputs.
    """
    from .json import looks_like_json
    if looks_like_json(text):
        return "json"
    if _NORMAL_JOB.search(text):
        return "normal"
    if _TERSE_LINE.search(text):
        return "terse"
    raise ParseError(
        f"{name}: not a fio output: expected JSON with \"fio version\", a normal report line "
        f"'job: (groupid=0, jobs=1): err= 0: …', or terse lines '3;fio-3.33;job;0;0;…'",
        hint="pass fio's own output file (--output-format=json is the most exact)",
    )


_PARSERS = {"json": "parse_json", "normal": "parse_normal", "terse": "parse_terse"}


def parse_output(text: str, name: str = "<input>") -> FioReport:
    """Read any fio output (JSON, json+, client JSON, normal, terse v2-v5) into a FioReport.

    ``name`` (a file name, usually) labels the input in error messages. The text is cleaned with
    ``clean_pasted`` first. If the JSON part of a mixed output is broken, the normal or terse part
    is read instead. Raises ``ParseError`` and nothing else: a bug that would raise another
    exception on strange input is reported as a ``ParseError`` naming the exception.
    """
    try:
        cleaned = clean_pasted(text)
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
