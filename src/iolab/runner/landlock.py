"""Landlock inside the fence: fio may write only the paths given, even devices it can open.

bubblewrap's read-only mounts do not stop writes to device nodes (the kernel checks read-only mounts for
files, directories and links only), so a device a job only reads, bound into the fence so fio can open
it, would still be writable. Landlock (Linux 5.13+, ``landlock(7)``) restricts by access right instead:
this helper runs inside the fence, restricts itself so that writing, truncating, creating and removing
are allowed only beneath the paths given, and execs the command (fio), which inherits the restriction
and passes it to anything it starts. Reading and executing are not restricted.

Without the network (``--no-network``), TCP bind and connect are refused too (ABI 4), and connecting
to abstract Unix sockets outside (ABI 6): fio's own network namespace (``--unshare-net``) already
leaves it only loopback.

Run as ``python -I -S landlock.py [--no-network] PATH... -- COMMAND...``: standard library only, so it starts fast
without ``site``. When the kernel has no Landlock the command runs without it (``fence.status`` says
whether it is used). Source: ``linux/landlock.h``; landlock(7).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # x86-64 and aarch64 share these numbers
_VERSION = 1 << 0  # LANDLOCK_CREATE_RULESET_VERSION
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
#: LANDLOCK_ACCESS_FS_*: WRITE_FILE, REMOVE_DIR, REMOVE_FILE, MAKE_CHAR ... MAKE_SYM.
_WRITE_FILE = 1 << 1
_DIR_ONLY = (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
#: LANDLOCK_ACCESS_NET_BIND_TCP | CONNECT_TCP (ABI 4); LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (ABI 6).
_NET_TCP, _SCOPE_ABSTRACT_UNIX = (1 << 0) | (1 << 1), 1 << 0
#: Harmless nodes every program may write (shell redirections, fio's own use).
_ALWAYS = ("/dev/null", "/dev/zero", "/dev/full")


def abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or it is disabled)."""
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(0, int(version))


def restrict(writable: list[str], network: bool = True) -> bool:
    """Restrict this process: writes only beneath ``writable`` (and ``_ALWAYS``); without ``network``,
    no TCP bind or connect (ABI 4) and no abstract Unix socket outside (ABI 6). False when the kernel
    has no Landlock; raises ``OSError`` when a rule cannot be added."""
    version = abi()
    if version < 1:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    file_rights = _WRITE_FILE | (_TRUNCATE if version >= 3 else 0)
    handled = file_rights | _DIR_ONLY | (_REFER if version >= 2 else 0)
    net = _NET_TCP if not network and version >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX if not network and version >= 6 else 0
    attr = ctypes.create_string_buffer(struct.pack("<QQQ", handled, net, scoped))
    size = 24 if scoped else 16 if net else 8
    ruleset = libc.syscall(_CREATE_RULESET, attr, ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path in [*writable, *_ALWAYS]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that is not there yet cannot be written beneath either
            try:
                rights = handled if os.path.isdir(path) else file_rights
                rule = ctypes.create_string_buffer(struct.pack("<Qi", rights, fd))
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(_RESTRICT_SELF, ruleset,
                                                                             ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return True


def main(argv: list[str]) -> None:
    """``[--no-network] PATH... -- COMMAND...``: restrict, then exec the command."""
    split = argv.index("--")
    writable, command = argv[:split], argv[split + 1:]
    network = "--no-network" not in writable[:1]
    restrict(writable[0 if network else 1:], network)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
