"""What a host and a target are: this machine (``host``), a path's kind, file system and device
(``targets``), sysfs reads (``sysfs``), the CPUs a device's queues use (``pinning``), which
process owns a run (``owner``). Imports ground and ``fio/`` only; ``sysfs``, ``host`` and
``targets`` also run on remote hosts (``remote.ssh`` ships them), so they need nothing more.
"""
