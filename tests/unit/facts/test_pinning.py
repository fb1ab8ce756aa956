"""CPU pinning from blk-mq queues and NUMA nodes: fixture sysfs trees and this machine's sysfs."""

from __future__ import annotations

import os

import pytest

from iolab.errors import SuiteError
from iolab.facts.pinning import cpus, fio_options, numa_nodes
from iolab.facts.sysfs import parse_cpu_list
from iolab.facts.targets import block_device_facts


def test_mq_is_the_union_of_hardware_queue_cpus(fake_sysfs) -> None:
    fake_sysfs.disk("nvme0n1", devnum="259:0", queues=["0, 1", "2, 3", "4", "5"], numa_node=0)
    fake_sysfs.cpus("0-7", nodes={0: "0-3", 1: "4-7"})
    dev = block_device_facts("nvme0n1", sysfs=str(fake_sysfs.root))
    assert cpus("mq", dev, sysfs=str(fake_sysfs.root)) == (0, 1, 2, 3, 4, 5)
    assert fio_options((0, 1, 2, 3, 4, 5)) == (("cpus_allowed", "0-5"), ("cpus_allowed_policy", "split"))


def test_mq_narrowed_to_online_and_allowed_cpus(fake_sysfs) -> None:
    fake_sysfs.disk("nvme0n1", devnum="259:0", queues=["0-3", "4-7"])
    fake_sysfs.cpus("0-5")  # 6 and 7 offline
    dev = block_device_facts("nvme0n1", sysfs=str(fake_sysfs.root))
    assert cpus("mq", dev, sysfs=str(fake_sysfs.root)) == tuple(range(6))
    assert cpus("mq", dev, sysfs=str(fake_sysfs.root), allowed={1, 5, 7}) == (1, 5)
    with pytest.raises(SuiteError, match="none of nvme0n1's CPUs is online and usable"):
        cpus("mq", dev, sysfs=str(fake_sysfs.root), allowed={7})


def test_numa_uses_the_devices_node(fake_sysfs) -> None:
    fake_sysfs.disk("nvme1n1", devnum="259:1", numa_node=1, queues=["0-7"])
    fake_sysfs.cpus("0-7", nodes={0: "0-3", 1: "4-7"})
    root = str(fake_sysfs.root)
    assert numa_nodes(root) == {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
    assert cpus("numa", block_device_facts("nvme1n1", sysfs=root), sysfs=root) == (4, 5, 6, 7)


def test_numa_without_affinity(fake_sysfs) -> None:
    fake_sysfs.disk("vda", devnum="252:0", numa_node=-1)
    fake_sysfs.cpus("0-7", nodes={0: "0-3", 1: "4-7"})
    root = str(fake_sysfs.root)
    with pytest.raises(SuiteError, match="no NUMA affinity") as exc:
        cpus("numa", block_device_facts("vda", sysfs=root), sysfs=root)
    assert exc.value.hint == "use pin: mq"


def test_numa_without_affinity_on_a_single_node_machine(fake_sysfs) -> None:
    fake_sysfs.disk("vda", devnum="252:0", numa_node=-1)
    fake_sysfs.cpus("0-3", nodes={0: "0-3"})
    root = str(fake_sysfs.root)
    assert cpus("numa", block_device_facts("vda", sysfs=root), sysfs=root) == (0, 1, 2, 3)


def test_no_queues(fake_sysfs) -> None:
    fake_sysfs.disk("sda", devnum="8:0", queues=())
    root = str(fake_sysfs.root)
    with pytest.raises(SuiteError, match="no blk-mq hardware queues"):
        cpus("mq", block_device_facts("sda", sysfs=root), sysfs=root)


def test_this_machines_sysfs() -> None:
    names = [n for n in sorted(os.listdir("/sys/block")) if os.path.isdir(f"/sys/block/{n}/mq")]
    if not names:
        pytest.skip("no blk-mq block device on this machine")
    dev = block_device_facts(names[0])
    expected: set[int] = set()
    for hctx in os.listdir(f"/sys/block/{names[0]}/mq"):
        with open(f"/sys/block/{names[0]}/mq/{hctx}/cpu_list") as f:
            expected |= set(parse_cpu_list(f.read()))
    assert set(cpus("mq", dev)) == expected & os.sched_getaffinity(0)
    single = len(numa_nodes()) == 1
    if dev.numa_node is not None or single:
        assert set(cpus("numa", dev)) <= os.sched_getaffinity(0)
