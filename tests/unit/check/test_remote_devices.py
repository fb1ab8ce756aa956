"""A device on a fio server host, named in any spelling, is compared as resolved (issue 19): without
ssh it cannot be checked, so it is refused, and --destroy in another spelling names the same path."""

from __future__ import annotations

import pytest

from iolab.check import remote as remote_checks
from iolab.describe.spec import Target
from iolab.errors import SafetyError
from iolab.remote import hosts as remote_hosts


@pytest.mark.parametrize("spelling", ["//dev/loop0", "/proc/self/root/dev/loop0", "/dev/../dev/loop0",
                                      "/proc/1/root/dev/loop0"])
def test_a_remote_device_is_compared_as_resolved_not_as_text(spelling: str) -> None:
    """Without ssh a remote device cannot be checked: every spelling of /dev/... is refused, and
    --destroy in another spelling names the same path."""
    target = Target("t", spelling, hosts=(remote_hosts.parse("10.0.0.1"),))
    with pytest.raises(SafetyError, match="refusing to write to /dev/loop0 on the hosts of target t: iolab cannot "
                                          "check a remote device for data without ssh, and it is not named"):
        remote_checks.check_safety(target, {target.hosts[0]: None}, True, (), 0)
    with pytest.raises(SafetyError, match=r"without ssh$"):
        remote_checks.check_safety(target, {target.hosts[0]: None}, True, ("/dev/loop0",), 0)
