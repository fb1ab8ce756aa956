"""ssh hosts for the system tests of ``ssh://`` targets: network namespaces (``netns.lab``) with sshd in each,
whose sessions have a temporary directory of the lab's own.

The namespaces share this machine's file system, so the directory iolab's agent makes on each host
(``tempfile.mkdtemp(prefix="iolab-ssh-")``, ``remote.sshagent``) would land in this machine's /tmp,
beside those of every other test running at the same time (``pytest -n``). Here sshd sets ``TMPDIR``
for its sessions (``SetEnv``, sshd_config(5)) to ``SshLab.tmpdir``, so ``SshLab.remote_dirs`` are this
lab's alone. Everything else is as ``netns.start_sshds``: port 2222 on each host's address, one host key
each, one client key for all, ``IOLAB_SSH`` an ``ssh -F CONFIG`` naming every host by address.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from netns import SSHD, Host, lab, wait_listening


@dataclass(frozen=True)
class SshLab:
    """Hosts with sshd; ``env`` for iolab's ssh; ``directory`` holds the keys and configs (``h<i>/``
    per host: host key, sshd_config, ``sshd.pid``, ``sshd.log``); ``tmpdir`` is the hosts' ``TMPDIR``."""

    hosts: list[Host]
    env: dict[str, str]
    directory: Path
    tmpdir: Path

    def remote_dirs(self) -> set[str]:
        """The directories iolab's agent made on these hosts (and has not removed)."""
        return {p.name for p in self.tmpdir.glob("iolab-ssh-*")}


def start_sshds(hosts: list[Host], directory: Path, tmpdir: Path, *, strict: bool = False,
                hide: dict[int, str] | None = None) -> dict[str, str]:
    """sshd (port 2222) in each host's namespace, its sessions' ``TMPDIR`` set to ``tmpdir``; returns
    the env for iolab's ssh. ``strict`` and ``hide`` as ``netns.start_sshds``: the client refuses
    unknown host keys (an empty known_hosts); host index -> a program path that is an empty,
    non-executable file in that host's own mount namespace (not installed there)."""
    key = directory / "client_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (directory / "authorized_keys").write_text((directory / "client_key.pub").read_text())
    (directory / "known_hosts").write_text("")
    (directory / "absent").write_text("")
    tmpdir.mkdir(mode=0o700, exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    config = []
    for host in hosts:
        d = directory / f"h{host.index}"
        d.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
        (d / "sshd_config").write_text(
            f"ListenAddress {host.address}:2222\nHostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPidFile {d / 'sshd.pid'}\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"UsePAM no\nStrictModes no\nSetEnv TMPDIR={tmpdir}\n")
        argv = [SSHD, "-D", "-e", "-f", str(d / "sshd_config")]
        hidden = (hide or {}).get(host.index)
        if hidden:
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    f'mount --bind {directory / "absent"} {hidden} && exec "$@"', "sh", *argv]
        wait_listening(host.address, 2222, host.popen(*argv, log=d / "sshd.log"))
        config.append(f"Host {host.address}\n  Port 2222\n  User root\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {directory / 'known_hosts'}\n"
                      f"  StrictHostKeyChecking {'yes' if strict else 'accept-new'}\n  LogLevel ERROR\n")
    (directory / "ssh_config").write_text("".join(config))
    return {"IOLAB_SSH": f"ssh -F {directory / 'ssh_config'}"}


@contextlib.contextmanager
def ssh_lab(count: int, directory: Path, *, strict: bool = False,
            hide: dict[int, str] | None = None) -> Iterator[SshLab]:
    """``count`` namespace hosts with sshd (``start_sshds``; keys and configs in ``directory``, the
    hosts' ``TMPDIR`` is ``directory/t``), all removed on exit (``netns.lab``)."""
    with lab(count) as hosts:
        tmpdir = directory / "t"  # short: the agent's sockets live beneath it (107 bytes at most)
        env = start_sshds(hosts, directory, tmpdir, strict=strict, hide=hide)
        yield SshLab(hosts, env, directory, tmpdir)
