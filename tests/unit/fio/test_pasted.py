"""A text holding several fio outputs (``fio.parse_outputs``): the field reports as their authors pasted them.

Every expected figure was read from the report's text by hand: IOPS is fio's formula on the ``issued rwts``
totals and the runtime of the direction line (``total * 1000 / runtime``, stat.c), bytes ``total x bs`` where
the job header line gives the block size, latencies in the unit of their own line.
"""

from __future__ import annotations

import pytest

from iolab.errors import ParseError
from iolab.fio import clean_pasted, parse_output, parse_outputs
from iolab.fio.pasted import split
from paths import FIELD_REPORTS
from paths import FIO as DATA

ESXI = next(FIELD_REPORTS.glob("000_*.txt"))  # two fio 3.7 outputs: DirectPath NVMe, then a virtual disk
KVM = next(FIELD_REPORTS.glob("001_*.txt"))  # three fio 3.16 outputs, line numbers glued to each line
US, MS = 1e3, 1e6


def lines(path, first: int, last: int) -> str:
    """Lines ``first``..``last`` (1-based, inclusive) of a file."""
    return "\n".join(path.read_text().split("\n")[first - 1:last]) + "\n"


# --- the ESXi report (000): two outputs, prose, a job file and a recap between them ------------------------


def test_esxi_report_is_two_outputs_with_fios_exact_figures():
    pasted = parse_outputs(ESXI.read_text(), ESXI.name)
    assert [(o.first_line, o.last_line) for o in pasted.outputs] == [(66, 116), (127, 177)]
    assert pasted.notes == ()  # the recap ("read: IOPS=26.0k, BW=102MiB/s …", lines 182-189) is no output
    direct, virtual = (o.report for o in pasted.outputs)
    assert [len(r.jobs) for r in (direct, virtual)] == [1, 1]  # never the two runs' jobs in one report
    assert [d.name for d in direct.disk_util] == ["dm-2", "nvme0n1"] and direct.disk_util[0].aggregate
    assert [d.name for d in virtual.disk_util] == ["dm-2", "sdb"]
    for report in (direct, virtual):
        (job,) = report.jobs
        assert (report.fio_version, job.name, job.members) == ("3.7", "randwrite", 4)
        assert job.shown_options == {"rw": "randrw", "ioengine": "libaio", "iodepth": "1", "bs": "4k",
                                     "size": "32768m"}  # each output's own header and layout lines

    r, w = direct.jobs[0].directions["read"], direct.jobs[0].directions["write"]
    assert (r.total_ios, r.runtime_ms, w.total_ios, w.runtime_ms) == (7804560, 300001, 7797520, 300001)
    assert r.iops == 7804560 * 1000 / 300001 == pytest.approx(26015.113, abs=1e-3)  # printed 26.0k
    assert w.iops == 7797520 * 1000 / 300001 == pytest.approx(25991.647, abs=1e-3)  # printed 25.0k (3.7's num2str)
    assert r.io_bytes == 7804560 * 4096 and r.bw_bytes_s == pytest.approx(7804560 * 4096 * 1000 / 300001)
    assert r.bw_bytes_s / 2**20 == pytest.approx(101.62, abs=0.005)  # printed 102MiB/s
    assert r.clat.mean_ns == pytest.approx(113.61 * US) and r.clat.percentile(99) == 1270 * US
    assert r.clat.percentile(50) == 65 * US and r.clat.percentile(99.99) == 1958 * US
    assert w.clat.mean_ns == pytest.approx(27396.71) and w.clat.percentile(99) == 39168  # clat (nsec)
    assert w.slat.mean_ns == pytest.approx(6.16 * US) and w.lat.mean_ns == pytest.approx(33.62 * US)
    assert any("printed IOPS=25.0k but 7797520 I/Os in 300001 ms" in warning for warning in direct.warnings)

    r, w = virtual.jobs[0].directions["read"], virtual.jobs[0].directions["write"]
    assert (r.total_ios, w.total_ios) == (6121601, 6116013)
    assert r.iops == 6121601 * 1000 / 300001 and w.iops == 6116013 * 1000 / 300001  # printed 20.4k, 20.4k
    assert w.bw_bytes_s / 2**20 == pytest.approx(79.64, abs=0.005)  # printed 79.6MiB/s
    assert r.clat.mean_ns == pytest.approx(134.39 * US) and r.clat.percentile(99) == 1205 * US
    assert w.clat.mean_ns == pytest.approx(44914.21) and w.clat.percentile(99) == 57 * US
    assert virtual.warnings == ()


def test_each_output_of_the_esxi_report_reads_as_the_same_output_cut_into_a_file():
    pasted = parse_outputs(ESXI.read_text(), ESXI.name)
    for output in pasted.outputs:
        alone = parse_output(lines(ESXI, output.first_line, output.last_line))
        assert output.report.jobs == alone.jobs and output.report.disk_util == alone.disk_util


def test_the_old_entry_point_reads_one_output_and_says_so_in_its_docstring():
    """``parse_output`` still reads a text as one output (a file fio wrote): the pasted report's two runs
    become two jobs of one report there, which is why the import reads texts with ``parse_outputs``."""
    assert len(parse_output(ESXI.read_text()).jobs) == 2
    assert "parse_outputs" in parse_output.__doc__


# --- the KVM report (001): three outputs, each code block numbered from 1 -------------------------------


def test_clean_pasted_removes_the_numbers_of_each_code_block():
    cleaned = clean_pasted(KVM.read_text())
    assert cleaned.count("\nfio-3.16\nStarting 4 processes\ntest: Laying out IO file (1 file / 2048MiB)\n") == 3
    assert "\n  write: IOPS=8180, BW=31.0MiB/s (33.5MB/s)(1923MiB/60187msec); 0 zone resets\n" in cleaned
    assert "\n  nvme0n1: ios=3/533038, merge=0/7770," in cleaned  # line 33 of its block
    assert "\n 1      1049kB  500GB  500GB               primary\n" in cleaned  # prose: a table's "1", alone
    assert clean_pasted(cleaned) == cleaned


def test_clean_pasted_leaves_numbers_that_do_not_count_from_one():
    text = "1、软件安装\n\nyum -y install fio\n\n2、挂载数据目录\n 3fio-3.16\n 4Starting 1 process\n"
    assert clean_pasted(text) == text


def test_kvm_report_is_three_outputs_with_fios_exact_figures():
    pasted = parse_outputs(KVM.read_text(), KVM.name)
    assert [(o.first_line, o.last_line) for o in pasted.outputs] == [(34, 63), (67, 97), (134, 166)]
    expected = [  # total, runtime, clat mean, clat p99, disk, fio's printed bandwidth (B/s)
        (71936, 60071, 106.80 * MS, 180 * MS, "vda", 4790 * 1024),
        (288149, 60015, 26.42 * MS, 317 * MS, "vda", 18.8 * 2**20),
        (492339, 60187, 15375574.09, 308282 * US, "nvme0n1", 33.5e6),
    ]
    for output, (total, runtime, mean, p99, disk, bw) in zip(pasted.outputs, expected, strict=True):
        report = output.report
        (job,) = report.jobs
        w = job.directions["write"]
        assert (report.fio_version, job.name, job.members, list(job.directions)) == ("3.16", "test", 4, ["write"])
        assert (w.total_ios, w.runtime_ms) == (total, runtime) and w.iops == total * 1000 / runtime
        assert w.clat.mean_ns == pytest.approx(mean) and w.clat.percentile(99) == p99
        assert [d.name for d in report.disk_util] == [disk]
        assert w.bw_bytes_s is None and w.bw_bytes_s_shown == pytest.approx(bw)  # no header line: no block size
        assert job.shown_options == {"iodepth": "32", "size": "2048m"}
    assert [round(o.report.jobs[0].directions["write"].iops, 2) for o in pasted.outputs] == [1197.52, 4801.28, 8180.16]


# --- what is not an output ------------------------------------------------------------------------------


def test_recap_lines_alone_are_refused_naming_them():
    recap = lines(ESXI, 180, 190)  # "4、结果" … "read: IOPS=26.0k, BW=102MiB/s (107MB/s)(29.8GiB/300001msec)"
    with pytest.raises(ParseError) as info:
        parse_outputs(recap, "recap.txt")
    assert info.value.message.startswith(
        "recap.txt: not a fio output: it quotes fio's figures (line 3: 'read: IOPS=26.0k, BW=102MiB/s (107MB/s)"
        "(29.8GiB/300001msec)') without the job report they come from")


def test_a_job_line_quoted_in_prose_is_no_output():
    first = lines(ESXI, 66, 116)
    quote = "\nAs fio says in 'randwrite: (groupid=0, jobs=4): err= 0: pid=9048', the disk was busy.\n"
    pasted = parse_outputs(first + quote, "quoted.txt")
    assert len(pasted.outputs) == 1 and pasted.outputs[0].report.jobs[0].directions["read"].total_ios == 7804560
    assert pasted.notes == ("line 53 quotes a fio job line without the lines fio prints under it (\"As fio says in "
                            "'randwrite: (groupid=0, jobs=4): err= 0: pid=9048', the …\"): not an output",)
    with pytest.raises(ParseError, match=r"^alone\.txt, line 2: the job line .* is followed by none of the lines"):
        parse_outputs(quote, "alone.txt")


def test_an_output_whose_lines_carry_a_prefix_is_refused_not_read_as_an_empty_result():
    quoted = "".join(f"> {line}\n" for line in lines(ESXI, 66, 116).splitlines())
    with pytest.raises(ParseError) as info:
        parse_outputs(quoted, "quoted.md")
    assert info.value.message.startswith("quoted.md, line 10: the job line '> randwrite: (groupid=0, jobs=4)")
    assert "carry a prefix fio does not print" in info.value.message


def test_the_same_output_pasted_twice_is_read_once():
    first = lines(ESXI, 66, 116)
    pasted = parse_outputs(first + "\nAgain, for the record:\n\n" + first, "twice.txt")
    assert [(o.first_line, o.last_line) for o in pasted.outputs] == [(1, 51)]
    assert pasted.notes == ("lines 55–105 repeat the output at lines 1–51 (the same job line, with fio's time to "
                            "the second): read once",)


def test_outputs_pasted_without_their_start_lines_are_still_two():
    direct, virtual = lines(ESXI, 75, 116), lines(ESXI, 135, 177)  # from the job line to the disk lines
    pasted = parse_outputs(direct + "\n虚拟化Virtualization\n\n" + virtual, "cut.txt")
    assert [o.report.disk_util[-1].name for o in pasted.outputs] == ["nvme0n1", "sdb"]
    assert [o.report.jobs[0].directions["read"].total_ios for o in pasted.outputs] == [7804560, 6121601]


def test_status_interval_snapshots_and_json_beside_normal_stay_one_output():
    for name in ("fio-3.33_status-interval-1s_normal.txt", "fio-3.33_steadystate_json_plus_normal.txt",
                 "fio-3.33_randrw_libaio.normal.txt", "fio-3.33_client_two_hosts.json"):
        text = (DATA / name).read_text()
        (output,) = parse_outputs(text, name).outputs
        assert output.report == parse_output(text, name)
    assert len(split(clean_pasted((DATA / "fio-3.33_status-interval-1s_normal.txt").read_text()))) == 1


def test_json_and_normal_snapshots_of_one_run_stay_one_output_and_another_runs_json_does_not():
    """``--output-format=json,normal --status-interval``: each snapshot prints its JSON document, then its
    normal report; JSON after a report's tail with prose between is another run's output."""
    text = (DATA / "fio-3.33_steadystate_json_plus_normal.txt").read_text()
    head, snapshot = text.split("Starting 1 process\n")
    later = snapshot.replace("15:48:28", "15:48:29")
    (output,) = parse_outputs(head + "Starting 1 process\n" + snapshot + later, "stream.txt").outputs
    assert output.report.source_format == "json"  # JSON wins, as for one snapshot
    normal = lines(ESXI, 66, 116)
    pasted = parse_outputs(normal + "\nAnd with --output-format=json:\n\n" + snapshot.split("\n\nss:")[0], "two.txt")
    assert [o.report.source_format for o in pasted.outputs] == ["normal", "json"]
    assert [o.report.disk_util[-1].name for o in pasted.outputs] == ["nvme0n1", "vda"]


# --- texts that hold no output: the reason names what they hold ---------------------------------------------


@pytest.mark.parametrize(("number", "reason"), [
    ("002", "not a fio output: it holds 2 fio commands (line 196: 'fio --rw=randread --bs=8k --numjobs=4 "
            "--iodepth=128 --runtime=60 --ioen…') but nothing fio printed for them. "),
    ("003", "not a fio output: it holds 2 fio commands (line 22: 'fio --ioengine=libaio --runtime=30s "
            "--numjobs=${numjobs} --iodepth=${io…') but nothing fio printed for them; it gives IOPS figures in "
            "its own words (line 4: '…文提供了如何配置合適的條件壓測 ESSD 云盤性能的示例,并測試出 100 萬 IOPS。'), "
            "which are no fio output. "),
    ("004", "not a fio output: it holds 4 fio commands (line 225: 'fio -readonly -name=rr -rw=randread -bs=4k "
            "-runtime=300 -iodepth=1 -fil…') but nothing fio printed for them; it gives IOPS figures in its own "
            "words (line 232: 'Тип диска FIO depth 1 (iops) FIO depth 24 (iops)'), which are no fio output. "),
])
def test_field_reports_without_output_are_refused_saying_what_they_hold(number, reason):
    path = next(FIELD_REPORTS.glob(f"{number}_*.txt"))
    with pytest.raises(ParseError) as info:
        parse_outputs(path.read_text(), path.name)
    assert info.value.message.startswith(f"{path.name}: {reason}")
    assert info.value.exit_code == 1 and "--output-format=json" in info.value.hint


def test_a_job_file_and_progress_lines_are_named_as_such():
    with pytest.raises(ParseError, match=r"it holds a fio job file \(line 1: '\[global\]'\), which says what to run"):
        parse_outputs((DATA / "not-output" / "basic.fio").read_text(), "basic.fio")
    with pytest.raises(ParseError, match=r"it holds fio's progress lines \(line 1: 'Jobs: 1 \(f=1\)'\) but no report"):
        parse_outputs((DATA / "not-output" / "fio-3.33_eta-always_eta-newline_stdout.txt").read_text(), "eta.txt")
