from pathlib import Path

import pytest

from iolab.errors import SuiteError
from iolab.fio import jobfile

ISSUE_JOB = """\
[global]
ioengine=libaio
direct=1
thread=1
rw=randrw
bs=4k
numjobs=4
size=256M
runtime=10
time_based
group_reporting

[randwrite]
"""


def test_parse_and_render_roundtrip():
    sections = jobfile.parse(ISSUE_JOB)
    assert [s.name for s in sections] == ["global", "randwrite"]
    assert ("time_based", None) in sections[0].options
    again = jobfile.parse(jobfile.render(sections, ["a header"]))
    assert again == sections


def test_effective_options_apply_globals_in_order():
    text = "[global]\nbs=4k\n[a]\nrw=read\n[global]\nbs=8k\n[b]\nrw=write\nbs=16k\n[c]\n"
    jobs = dict(jobfile.effective_jobs(jobfile.parse(text)))
    assert jobs["a"]["bs"] == "4k" and jobs["b"]["bs"] == "16k" and jobs["c"]["bs"] == "8k"


def test_params_ignore_location_and_reporting():
    a = jobfile.workload_params(jobfile.parse("[j]\nfilename=/dev/a\nrw=read\nwrite_bw_log=x\ntime_based\n"))
    b = jobfile.workload_params(jobfile.parse("[k]\nfilename=/dev/b\nrw=read\ntime_based=1\n"))
    assert a == b == {"rw": "read", "time_based": "1"}
    assert jobfile.params_hash(a) == jobfile.params_hash(b)
    c = jobfile.workload_params(jobfile.parse("[k]\nrw=write\n"))
    assert jobfile.params_hash(c) != jobfile.params_hash(a)


def test_several_sections_are_prefixed():
    params = jobfile.workload_params(jobfile.parse("[global]\nbs=4k\n[a]\nrw=read\n[b]\nrw=write\n"))
    assert params == {"a.bs": "4k", "a.rw": "read", "b.bs": "4k", "b.rw": "write"}


def test_include(tmp_path: Path):
    (tmp_path / "inc.fio").write_text("[global]\nbs=64k\n")
    sections = jobfile.parse("include inc.fio\n[a]\nrw=read\n", "main.fio", tmp_path)
    assert dict(jobfile.effective_jobs(sections))["a"]["bs"] == "64k"


@pytest.mark.parametrize(("text", "message"), [
    ("rw=read\n", "main.fio:1: option 'rw=read' before any [section]"),
    ("[a\nrw=read\n", "main.fio:1: malformed section header"),
    ("[global]\nbs=4k\n", "no job section"),
    ("include missing.fio\n[a]\n", "main.fio:1: cannot include"),
])
def test_errors(text, message, tmp_path: Path):
    with pytest.raises(SuiteError) as info:
        jobfile.parse(text, "main.fio", tmp_path)
    assert message in str(info.value)


def test_every_fio_example_parses():
    examples = sorted(Path("/usr/share/doc/fio/examples").glob("*.fio"))
    if not examples:
        pytest.skip("fio-examples is not installed")
    for path in examples:
        sections = jobfile.parse(path.read_text(), str(path), path.parent)
        assert any(not s.is_global for s in sections), path


def test_comments_end_a_line_as_in_fio():
    # parse.c strip_blank_end(): everything from the first ';' or '#' on a line is a comment.
    text = "[job] ; the job\nruntime=60s # run for a minute\nrw=read;seq\n# whole line\n"
    (section,) = jobfile.parse(text)
    assert section == jobfile.Section("job", (("runtime", "60s"), ("rw", "read")))
