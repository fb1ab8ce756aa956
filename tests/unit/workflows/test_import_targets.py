"""How an import names its results' targets (``workflows.importer.plan``): after the devices fio's disk statistics
name, and, for the outputs of one pasted text, never as repetitions of each other."""

from __future__ import annotations

from iolab.fio import parse_output, parse_outputs
from iolab.model import DiskUtil
from iolab.workflows.importer.plan import LOCAL, assemble, device_of, plan_results
from paths import FIELD, FIELD_REPORTS
from paths import FIO as DATA

ESXI = next(FIELD_REPORTS.glob("000_*.txt"))
KVM = next(FIELD_REPORTS.glob("001_*.txt"))


def planned_from(path):
    """The planned results of a text, as the import plans them (one ``plan_results`` per output)."""
    outputs = parse_outputs(path.read_text(), path.name).outputs
    return [p for k, o in enumerate(outputs, 1)
            for p in plan_results(o.report, path.name, k if len(outputs) > 1 else 0, str(path))]


def test_the_device_is_the_slave_under_a_device_mapper_disk():
    dm = DiskUtil(name="dm-2", aggregate={"aggr_read_ios": 7804560.0})
    assert device_of([dm, DiskUtil(name="nvme0n1")]) == "nvme0n1"
    assert device_of([DiskUtil(name="sdb"), DiskUtil(name="sdc")]) == "sdb+sdc"
    assert device_of([dm]) == "dm-2"  # no slave listed: the disk stands for itself
    assert device_of([]) is None


def test_a_single_output_is_named_after_its_disk_statistics_in_every_format():
    for name in ("fio-3.33_randrw_libaio.json", "fio-3.33_randrw_libaio.normal.txt",
                 "fio-3.33_randrw_libaio.terse-v3.txt", "seed001_local_ssd_fio316.txt"):
        (planned,) = plan_results(parse_output((DATA / name).read_text()), name)
        placed, notes = assemble([planned])
        assert (planned.target, planned.device, placed[0].target, notes) == (LOCAL, "vda", "vda", []), name
    (direct,) = plan_results(parse_output((FIELD / "directpath-fio37.txt").read_text()), "directpath-fio37.txt")
    assert assemble([direct])[0][0].target == "nvme0n1"  # dm-2 over nvme0n1


def test_the_esxi_reports_outputs_are_two_targets_named_after_their_devices():
    placed, notes = assemble(planned_from(ESXI))
    assert [(p.target, p.workload, p.repeat) for p in placed] == [("nvme0n1", "randwrite", 0), ("sdb", "randwrite", 0)]
    assert notes == ["the same job ran on different devices (nvme0n1; sdb in fio's disk statistics): stored as one "
                     "target each, not as repetitions of one"]


def test_outputs_of_one_text_on_devices_of_one_name_are_not_repetitions():
    """The KVM report's local SSD and Ceph RBD outputs both ran on a VM's vda: two machines, two targets."""
    planned = planned_from(KVM)
    assert [(p.device, p.output) for p in planned] == [("vda", 1), ("vda", 2), ("nvme0n1", 3)]
    placed, notes = assemble(planned)
    assert [(p.target, p.workload, p.repeat) for p in placed] == [("vda#1", "test", 0), ("vda#2", "test", 0),
                                                                 ("nvme0n1", "test", 0)]
    assert notes[1] == (f"outputs 1 and 2 of {KVM.name} ran the same job (test) on targets named 'vda' (a pasted "
                        "text's outputs are separate runs, and two machines' disks can share a name): stored as "
                        "vda#1, vda#2, not as repetitions of one")


def test_files_of_one_workload_on_one_device_stay_repetitions():
    """Separate files (a sweep's run-1, run-2 …) of one job on one device are repetitions, as before."""
    text = (DATA / "fio-3.33_randrw_libaio.json").read_text()
    planned = [p for name in ("run-1/out.json", "run-2/out.json") for p in plan_results(parse_output(text), name)]
    placed, notes = assemble(planned)
    assert [(p.target, p.repeat) for p in placed] == [("vda", 0), ("vda", 1)] and notes == []
