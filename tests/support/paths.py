"""Where the tests' files are, wherever a test file sits in the tiers' folders."""

from pathlib import Path

#: The ``tests/`` folder.
TESTS = Path(__file__).resolve().parents[1]
#: The repository's root.
ROOT = TESTS.parent
#: Recorded real fio outputs and field-report pastes (``tests/data``: its READMEs say how each was made).
DATA = TESTS / "data"
#: The lab's shared samples (``../shared/samples`` beside the repository), where the machine has them: tests
#: take them as extra inputs, never as the only ones (a clean checkout has only tests/data).
SHARED_SAMPLES = ROOT.parent / "shared" / "samples"
#: Real fio outputs of several versions (``tests/data/fio/README.md``).
FIO = DATA / "fio"
#: Field reports as people pasted them (``tests/data/field``).
FIELD = DATA / "field"
#: The five field reports iolab was started from, as their authors published them (copied from the lab's
#: ``field-reports``: ``tests/data/field-reports/README.md`` says what each holds).
FIELD_REPORTS = DATA / "field-reports"
