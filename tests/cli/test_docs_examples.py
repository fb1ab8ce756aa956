"""The manual's examples that cannot drift: every block of ``iolab …`` commands in docs/ marked
``<!-- example: NAME -->`` runs here, in order, in a fresh directory with a fresh database (or a copy of a
committed database of real runs, ``DATABASES``) and the recorded fio outputs it names (tests/data/fio,
tests/data/field-reports), and what it prints must show what the page
shows. The other blocks are marked ``<!-- illustrative -->`` (they need a device, a host or a long run;
``tests/unit/project/test_docs.py`` checks that every block is one or the other).

How a page's block is read: a line ``$ iolab ARGS`` (``\\`` continues it) is a command, the lines after it
until the next ``$`` are what it printed. Each printed line must appear in the command's stdout or stderr,
in order within its stream, with runs of whitespace compared as one (tables are drawn to the terminal's
width, long lines wrapped) and ``…`` standing for any text (the page abridges, or the part varies: paths, times).
Lines the page leaves out may be there."""

from __future__ import annotations

import lzma
import re
import shlex
import shutil

import pytest

from inprocess import iolab
from paths import DATA, FIELD, FIELD_REPORTS, FIO, ROOT

DOCS = ROOT / "docs"
#: What an example's directory holds before its first command, beyond the recorded outputs its commands name
#: (copied from tests/data/fio and tests/data/field-reports by name): its path -> the recorded file.
ESXI = {"reports/directpath-fio37.txt": FIELD / "directpath-fio37.txt",
        "reports/virtual-fio37.txt": FIELD / "virtual-fio37.txt"}
LAYOUT = {"esxi-report": ESXI, "esxi-per-file": ESXI}
#: An example that starts from a committed database (xz) of real runs: its name -> the database.
LOOP_RUNS = DATA / "history" / "throttled-loop-runs.db.xz"
DATABASES = {"history-loop": LOOP_RUNS, "history-loop-gate": LOOP_RUNS}
MARKED = re.compile(r"^<!-- example: ([\w-]+) -->\n```[^\n]*\n(.*?)^```", re.M | re.S)


def examples() -> list[tuple[str, str, str]]:
    """(page, example name, block text) of every tested example in docs/."""
    return [(p.relative_to(DOCS).as_posix(), m.group(1), m.group(2)) for p in sorted(DOCS.rglob("*.md"))
            for m in MARKED.finditer(p.read_text())]


def steps(block: str) -> list[tuple[list[str], list[str]]]:
    """The block's commands (argv without ``iolab``) each with the lines the page shows it printed."""
    out: list[tuple[list[str], list[str]]] = []
    lines = iter(block.splitlines())
    for line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + next(lines).strip()
            argv = shlex.split(command, comments=True)
            assert argv[0] == "iolab", f"an example runs iolab only: {command}"
            out.append((argv[1:], []))
        else:
            assert out, f"output before any command: {line!r}"
            out[-1][1].append(line)
    return out


def _pattern(line: str) -> re.Pattern[str]:
    words = " ".join(line.split())
    return re.compile(".*?".join(re.escape(part) for part in words.split("…")))


def shows(printed: list[str], stdout: str, stderr: str) -> str | None:
    """None when every printed line appears in order in stdout or stderr, else the first that does not.
    Whitespace is compared as one space, line ends included: a line the terminal wrapped (piped output
    is 160 columns) is the page's one line."""
    streams = [" ".join(stream.split()) for stream in (stdout, stderr)]
    at = [0, 0]
    for line in printed:
        if not line.strip():
            continue
        pattern = _pattern(line)
        for i, stream in enumerate(streams):
            found = pattern.search(stream, at[i])
            if found is not None:
                at[i] = found.end()
                break
        else:
            return line
    return None


@pytest.mark.parametrize(("page", "name", "block"), examples(), ids=[f"{p}:{n}" for p, n, _ in examples()])
def test_the_example_prints_what_the_page_shows(tmp_path, page, name, block):
    for path, source in LAYOUT.get(name, {}).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, tmp_path / path)
    if name in DATABASES:
        (tmp_path / "docs.db").write_bytes(lzma.decompress(DATABASES[name].read_bytes()))
    for argv, printed in steps(block):
        for arg in argv:
            for source in (FIO / arg, FIELD_REPORTS / arg):
                if source.is_file() and not (tmp_path / arg).exists():
                    shutil.copy(source, tmp_path / arg)
        proc = iolab(*argv, db=tmp_path / "docs.db", cwd=tmp_path, env={"COLUMNS": "400"})  # a page is not wrapped
        if not any(line.startswith("Error:") for line in printed):  # the page shows no error: there is none
            assert proc.returncode == 0, (page, name, argv, proc.stderr)
        missing = shows(printed, proc.stdout, proc.stderr)
        assert missing is None, (f"{page} ({name}): `iolab {shlex.join(argv)}` did not print\n{missing}\n"
                                 f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}")


def test_there_are_examples_and_the_matching_is_strict():
    assert len(examples()) >= 2
    assert shows(["a … c", "d"], "x\na b c\nd\n", "") is None
    assert shows(["d", "a b c"], "a b c\nd\n", "") == "a b c"  # in order
    assert shows(["a  b"], "a\n b", "") is None and shows(["a c"], "a bc", "") == "a c"
