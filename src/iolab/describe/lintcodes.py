"""The codes of the lint catalogue's warnings, as a suite (``lint: {ignore: [...]}``) and the command line
(``--ignore-lint``) name them; the rules themselves are ``check.lint``'s, acknowledging ``check.acknowledge``'s."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: The catalogue's warnings (``check.lint``: P1–P15; P10 is retired, P16 is the safety guard's error).
WARNINGS = tuple(f"P{n}" for n in range(1, 16) if n != 10)


def check_codes(codes: Iterable[str]) -> tuple[str, ...]:
    """``codes`` as given (``p3`` read as ``P3``), each once. Raises ``ValueError`` naming a code that is
    no warning of the catalogue, and the codes that are."""
    out: list[str] = []
    for code in codes:
        upper = code.strip().upper()
        if upper in ("P16", "FIO"):
            raise ValueError(f"{upper} is a refusal (a destructive write, a job fio rejects), not a warning: it "
                             "cannot be acknowledged")
        if upper not in WARNINGS:
            close = difflib.get_close_matches(upper, WARNINGS, n=1)
            guess = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"{code!r} is not a lint warning{guess}; the warnings are {', '.join(WARNINGS)} "
                             "(iolab lint --list)")
        if upper not in out:
            out.append(upper)
    return tuple(out)
