"""The workload identity `iolab import` derives from each format of fio output (``importer.plan_results``):
the options each format says, the ones it cannot say (unknown, never fio's default), the job text."""

from __future__ import annotations

from iolab.fio import parse_output
from iolab.workflows.importer import ALL_UNKNOWN, BARE_FLAGS, plan_results
from paths import FIO as DATA


def test_workload_identity_from_json_normal_and_terse():
    def plan(name):
        (planned,) = plan_results(parse_output((DATA / name).read_text(), name), name)
        return planned

    js = plan("fio-3.33_randrw_libaio.json")
    assert js.params == {"bs": "4k", "direct": "1", "iodepth": "16", "ioengine": "libaio", "runtime": "3",
                         "rw": "randrw", "rwmixread": "70", "size": "64m", "time_based": "1"}
    assert js.target == "local" and js.target_path == "/data/fio/testfile" and js.workload == "randrw"
    # fio's JSON drops options given without a value: their absence is unknown, not fio's default
    assert set(js.unknown_options) == set(BARE_FLAGS) - {"time_based"}
    assert js.job_text.startswith("; iolab import of fio-3.33_randrw_libaio.json (json output of fio 3.33)")
    normal = plan("fio-3.33_randrw_libaio.normal.txt")
    assert normal.params == {"bs": "4k", "iodepth": "16", "ioengine": "libaio", "numjobs": "1", "rw": "randrw"}
    assert normal.unknown_options == (ALL_UNKNOWN,)
    seed = plan("seed001_ceph_rbd_fio316.txt")  # no header line; jobs=4 is numjobs
    assert seed.params == {"iodepth": "32", "numjobs": "4", "size": "2048m"}
    terse = plan("fio-2.2.8_randrw_posixaio.terse-v3.txt")
    assert terse.params == {} and terse.unknown_options == (ALL_UNKNOWN,) and terse.job_text.endswith("[randrw]\n")
    old_json = plan("fio-2.2.8_randrw_posixaio.json")  # fio 2.2.8 JSON has no option lists
    assert old_json.params == {} and old_json.unknown_options == (ALL_UNKNOWN,)
    clones = plan("fio-3.33_numjobs2_no_group_reporting.json")  # two clones, one section
    assert clones.job_text.count("[gr]") == 1 and clones.params["numjobs"] == "2"
