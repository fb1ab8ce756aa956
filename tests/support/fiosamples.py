"""The real fio outputs in tests/data/fio (tests/data/fio/README.md says how each was made), as the
import tests take them: every output file, and the files that are not fio output."""

from __future__ import annotations

from paths import FIO

#: Files that look like fio output and are not (each import must refuse them).
NOT_OUTPUT = FIO / "not-output"
#: Every fio output sample (JSON, normal, terse), sorted; not the num2str tables.
OUTPUTS = sorted(p for p in FIO.glob("*") if p.is_file() and p.suffix in (".json", ".txt")
                 and p.name != "README.md" and not p.name.startswith("num2str"))
