"""Host specs: fio's forms (``ip:``, ``ip6:``, ``sock:``, ``host:port``), ``ssh://`` hosts, hosts files, and
what a bad spec is told."""

from __future__ import annotations

import re

import pytest

from iolab.remote import hosts


@pytest.mark.parametrize(("text", "kind", "host", "port", "label", "fio_arg"), [
    ("10.0.0.11", "ip", "10.0.0.11", 8765, "10.0.0.11:8765", "ip:10.0.0.11,8765"),
    ("10.0.0.12:8766", "ip", "10.0.0.12", 8766, "10.0.0.12:8766", "ip:10.0.0.12,8766"),
    ("ip:10.0.0.12,8766", "ip", "10.0.0.12", 8766, "10.0.0.12:8766", "ip:10.0.0.12,8766"),
    ("ip4:node-1.lab", "ip", "node-1.lab", 8765, "node-1.lab:8765", "ip:node-1.lab,8765"),
    ("node-1,9000", "ip", "node-1", 9000, "node-1:9000", "ip:node-1,9000"),
    ("ip6:fd00::13,8765", "ip6", "fd00::13", 8765, "[fd00::13]:8765", "ip6:fd00::13,8765"),
    ("fd00::13", "ip6", "fd00::13", 8765, "[fd00::13]:8765", "ip6:fd00::13,8765"),
    ("[fd00::13]:9000", "ip6", "fd00::13", 9000, "[fd00::13]:9000", "ip6:fd00::13,9000"),
    ("sock:/run/fio.sock", "sock", "/run/fio.sock", None, "sock:/run/fio.sock", "sock:/run/fio.sock"),
])
def test_host_specs(text, kind, host, port, label, fio_arg):
    spec = hosts.parse(text)
    assert (spec.kind, spec.host, spec.port, spec.label, spec.fio_arg) == (kind, host, port, label, fio_arg)
    assert hosts.parse(spec.fio_arg) == spec and hosts.parse(spec.label) == spec
    assert hosts.label_of(spec.host, spec.port) == label


@pytest.mark.parametrize(("text", "message"), [
    ("", "expected a host"), ("10.0.0.1:0", "port must be a number 1..65535"), ("h:99999", "1..65535"),
    ("ip:fd00::1,8765", "needs ip6:"), ("sock:relative", "absolute path"), ("bad_name!", "not an IPv4 address"),
    ("ip6:not an address", "expected a host"), ("a b", "expected a host"),
])
def test_bad_host_specs_say_why(text, message):
    with pytest.raises(ValueError, match=message):
        hosts.parse(text)


def test_ssh_host_specs_parse_and_name_the_problem():
    h = hosts.parse("ssh://lab@10.0.0.11:2222")
    assert (h.kind, h.user, h.host, h.port, h.label) == ("ssh", "lab", "10.0.0.11", 2222, "ssh://lab@10.0.0.11:2222")
    assert h.ssh_destination == ["-p", "2222", "lab@10.0.0.11"]
    assert hosts.parse(h.fio_arg) == h
    v6 = hosts.parse("ssh://[fd00::13]")
    assert (v6.host, v6.port, v6.label, v6.ssh_destination) == ("fd00::13", None, "ssh://[fd00::13]", ["fd00::13"])
    for bad, said in [("ssh://", "no host"), ("ssh://x:99999", "1..65535"), ("ssh://a b@x", "expected a host"),
                      ("ssh://we;ird@x", "not a user name"), ("ssh://bad_host!", "not an IPv4 address or host name")]:
        with pytest.raises(ValueError, match=re.escape(said)):
            hosts.parse(bad)


def test_hosts_file(tmp_path):
    path = tmp_path / "hosts.list"
    path.write_text("ip:127.0.0.1,8765\n# comment\n10.0.0.2:8766   fd00::3  # trailing\n")
    assert [h.label for h in hosts.read_file(path)] == ["127.0.0.1:8765", "10.0.0.2:8766", "[fd00::3]:8765"]
    path.write_text("10.0.0.1\n10.0.0.2:x\n")
    with pytest.raises(ValueError, match=r"hosts.list:2: .*port"):
        hosts.read_file(path)
    path.write_text("# nobody\n")
    with pytest.raises(ValueError, match="no hosts"):
        hosts.read_file(path)
    with pytest.raises(ValueError, match="listed twice"):
        hosts.check_unique([hosts.parse("10.0.0.1"), hosts.parse("ip:10.0.0.1,8765")])
