from pathlib import Path

import pytest

from iolab.describe import matrix, suite
from iolab.describe.render import render_job
from iolab.describe.spec import JobSpec, Target
from iolab.errors import SuiteError
from iolab.fio import jobfile

SUITE = """\
name: demo
targets:
  ssd: /mnt/ssd
  hdd: {path: /dev/sdz, size: 8g}
defaults: {ioengine: libaio, direct: 1, runtime: 5s, time_based: 1}
repeat: 2
workloads:
  - {rw: randread, bs: 4k, iodepth: [1, 32]}
  - {name: mixed, rw: randrw, rwmixread: [50, 70], bs: [4k, 64k]}
  - {rw: write, bs: 1m, iodepth: 8, numjobs: 4, group_reporting: null}
"""


def test_matrix_expansion_and_names():
    s = suite.load_yaml(SUITE, "demo.yaml")
    names = [w.name for w in s.workloads]
    assert names == [
        "randread-4k-qd1", "randread-4k-qd32",
        "mixed-r50-4k", "mixed-r50-64k", "mixed-r70-4k", "mixed-r70-64k",
        "write-1m-qd8-j4",
    ]
    (section,) = s.workloads[3].sections
    opts = dict(section.options)
    assert opts["rwmixread"] == "50" and opts["bs"] == "64k" and opts["direct"] == "1"
    assert opts["runtime"] == "5s"
    assert dict(s.workloads[-1].sections[0].options)["group_reporting"] is None  # a flag without value
    assert [t.name for t in s.targets] == ["ssd", "hdd"]
    assert s.targets[1].size == "8g"


def test_plan_interleaves_repeats():
    s = suite.load_yaml(SUITE, "demo.yaml")
    jobs = matrix.plan(s)
    assert len(jobs) == 2 * 2 * 7
    first_round = jobs[: 2 * 7]
    assert {j.repeat for j in first_round} == {0}
    assert [j.seq for j in jobs] == list(range(len(jobs)))


@pytest.mark.parametrize(("text", "where"), [
    ("workloads:\n  - {rw: randread, bs: 4k}\n  - {rw: read, bs: 4x}\n", "s.yaml:3: workloads[1].bs: expected a size"),
    ("workloads:\n  - {rw: randreed}\n", "s.yaml:2: workloads[0].rw: expected one of"),
    ("defaults:\n  iodepth: 0\nworkloads:\n  - {rw: read}\n", "s.yaml:2: defaults.iodepth: expected a whole number"),
    ("targets: [a]\nworkloads:\n  - {rw: read}\n", "s.yaml:1: targets:"),
    ("workloads: []\n", "s.yaml:1: workloads: List should have at least 1 item"),
    ("workload:\n  - {rw: read}\n", "s.yaml:1: workload: unknown key; did you mean `workloads`? (a suite has: name,"),
    ("target: {a: /x}\nworkloads:\n  - {rw: read}\n", "s.yaml:1: target: unknown key; did you mean `targets`?"),
    ("targets: {a: {paht: /x}}\nworkloads:\n  - {rw: read}\n",
     "s.yaml:1: targets.a.paht: unknown key; did you mean `path`? (a target has: path, size, hosts, hosts_file, ssh)"),
    ("workloads:\n  - {rw: read, bs: [4k, {x: 1}]}\n", "workloads[0].bs: expected a fio value"),
    ("workloads: [\n", "s.yaml:2: not valid YAML"),
    ("- 1\n", "expected a mapping"),
])
def test_errors_name_the_place(text, where):
    with pytest.raises(SuiteError) as info:
        suite.load_yaml(text, "s.yaml")
    assert where in str(info.value)


def test_a_suite_acknowledges_lint_warnings():
    loaded = suite.load_yaml("lint: {ignore: [P3, p4, P3]}\nworkloads:\n  - {rw: read}\n", "s.yaml")
    assert loaded.lint_ignore == ("P3", "P4")
    with pytest.raises(SuiteError, match=r"s\.yaml:1: lint\.ignore: P16 is a refusal"):
        suite.load_yaml("lint: {ignore: [P16]}\nworkloads:\n  - {rw: read}\n", "s.yaml")
    with pytest.raises(SuiteError, match="unknown key; did you mean `ignore`"):
        suite.load_yaml("lint: {ignroe: [P3]}\nworkloads:\n  - {rw: read}\n", "s.yaml")


def test_set_overrides_the_suites_option_in_every_job():
    loaded = suite.load_yaml("defaults: {runtime: 60s, size: 1g}\nworkloads:\n  - {rw: read}\n  - {rw: write, "
                             "size: 2g}\n", "s.yaml")
    changed = suite.with_sets(loaded, {"size": "64m", "time_based": None})
    for w in changed.workloads:
        options = [o for s in w.sections if not s.is_global for o in s.options]
        assert ("size", "64m") in options and ("time_based", None) in options
        assert not any(k == "size" and v != "64m" for k, v in options)
    assert changed.overrides == {"size": "64m", "time_based": None}
    assert suite.with_sets(loaded, {}) is loaded
    with pytest.raises(SuiteError, match="where fio does I/O is the target's"):
        suite.with_sets(loaded, {"directory": "/"})


def test_builtin_suites():
    quick = suite.load("quick")
    assert [w.name for w in quick.workloads] == ["randread-4k-qd32", "randwrite-4k-qd32", "read-1m-qd8", "write-1m-qd8"]
    for w in quick.workloads:
        opts = dict(w.sections[0].options)
        assert opts["ramp_time"] and opts["direct"] == "1"
    cdm = suite.load("cdm")
    assert len(cdm.workloads) == 8
    assert {dict(w.sections[0].options)["iodepth"] for w in cdm.workloads} == {"1", "8", "32"}


def test_unknown_suite_lists_builtins():
    with pytest.raises(SuiteError) as info:
        suite.load("no-such-suite")
    assert "quick" in (info.value.hint or "")


def test_target_overrides_replace_targets_and_keep_settings():
    s = suite.load_yaml(SUITE, "demo.yaml")
    s2 = suite.with_targets(s, suite.parse_target_args(["hdd=/dev/loop9", "/tmp/x"]))
    assert [(t.name, t.path, t.size) for t in s2.targets] == [("hdd", "/dev/loop9", "8g"), ("x", "/tmp/x", None)]
    with pytest.raises(SuiteError):
        suite.parse_target_args(["a=/x", "a=/y"])
    with pytest.raises(SuiteError):
        suite.parse_target_args(["=/x"])


def test_render_is_deterministic_and_places_the_target():
    s = suite.load_yaml(SUITE, "demo.yaml")
    spec = JobSpec(s.targets[1], s.workloads[0])
    text = render_job(spec, "block")
    assert text == render_job(spec, "block")
    sections = jobfile.parse(text)
    (name, opts), = jobfile.effective_jobs(sections)
    assert name == "randread-4k-qd1"
    assert opts["filename"] == "/dev/sdz" and opts["size"] == "8g"
    dir_text = render_job(JobSpec(Target("d", "/mnt/a:b"), s.workloads[0]), "directory")
    assert "directory=/mnt/a\\:b" in dir_text


def test_jobfile_suite_with_target(tmp_path: Path):
    path = tmp_path / "t.fio"
    path.write_text("[global]\nioengine=libaio\nfilename=/old\ntime_based\n\n[randwrite]\nrw=randwrite\n"
                    "[other]\nfilename=/own\nrw=read\n")
    s = suite.with_targets(suite.load(str(path)), {"data": "/data"})
    assert s.is_jobfile and s.workloads[0].name == "t"
    text = render_job(JobSpec(s.targets[0], s.workloads[0]), "directory")
    jobs = dict(jobfile.effective_jobs(jobfile.parse(text)))
    assert jobs["randwrite"]["directory"] == "/data" and "filename" not in jobs["randwrite"]
    assert jobs["other"]["filename"] == "own"  # a job's own file, as a name in the target directory (/data/own)
    assert jobs["randwrite"]["time_based"] is None


@pytest.mark.parametrize(("target", "where"), [
    ('hosts: ["10.0.0.1",\n      "10.0.0.2:99999"]\n    path: /dev/rbd0', "s.yaml:4: targets.t.hosts[1]: '10.0.0.2:9"),
    ("hosts: []\n    path: /x", "s.yaml:3: targets.t.hosts: an empty list names no host"),
    ('hosts: ["a", "a:8765"]\n    path: /x', "s.yaml:3: targets.t.hosts: a:8765 is listed twice"),
    ('hosts: ["10.0.0.1"]', "s.yaml:2: targets.t: a target with hosts needs path"),
    ('hosts: ["10.0.0.1"]\n    path: relative/x', "s.yaml:2: targets.t: a target with hosts needs path"),
    ("path: /x\n    ssh: true", "s.yaml:2: targets.t: ssh: true needs hosts"),
    ('hosts: ["10.0.0.1"]\n    hosts_file: h.list\n    path: /x', "targets.t: give hosts or hosts_file, not both"),
    ("hosts_file: missing.list\n    path: /x", "s.yaml:3: targets.t.hosts_file: cannot read"),
])
def test_remote_target_errors_name_the_place(tmp_path, target, where):
    (tmp_path / "s.yaml").write_text(f"targets:\n  t:\n    {target}\nworkloads:\n  - {{rw: read}}\n")
    with pytest.raises(SuiteError) as info:
        suite.load(str(tmp_path / "s.yaml"))
    assert where in str(info.value).replace(str(tmp_path) + "/", "")


def test_remote_target_with_hosts_file(tmp_path):
    (tmp_path / "hosts.list").write_text("10.0.0.1\nip6:fd00::2,8766  # second\nsock:/run/fio.sock\n")
    (tmp_path / "s.yaml").write_text("targets:\n  rbd: {hosts_file: hosts.list, path: /dev/rbd0, ssh: true}\n"
                                     "  local: /tmp/x\nworkloads:\n  - {rw: read}\n")
    rbd, local = suite.load(str(tmp_path / "s.yaml")).targets
    assert [h.label for h in rbd.hosts] == ["10.0.0.1:8765", "[fd00::2]:8766", "sock:/run/fio.sock"]
    assert rbd.path == "/dev/rbd0" and rbd.ssh and not local.hosts
    (tmp_path / "hosts.list").write_text("10.0.0.1\n10.0.0.1,8765\n")
    with pytest.raises(SuiteError, match=r"s.yaml:2: targets.rbd.hosts_file: 10.0.0.1:8765 is listed twice"):
        suite.load(str(tmp_path / "s.yaml"))


def test_a_workloads_filename_on_a_directory_target_is_a_file_in_it():
    """A suite's `filename:` on a directory target had been dropped (each numjobs clone then laid out a
    file of its own): it names the file in the directory, shared by the clones, as the workload says."""
    s = suite.load_yaml("targets: {d: /data}\nworkloads:\n  - {rw: randread, filename: f.bin, numjobs: 4, "
                        "size: 128m}\n  - {rw: read, filename: /elsewhere/g.bin}\n", "s.yaml")
    texts = [render_job(JobSpec(s.targets[0], w), "directory") for w in s.workloads]
    (first,), (second,) = (list(jobfile.effective_jobs(jobfile.parse(t))) for t in texts)
    assert first[1]["directory"] == "/data" and first[1]["filename"] == "f.bin"
    assert second[1]["filename"] == "g.bin"
