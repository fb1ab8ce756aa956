"""iolab: a storage benchmark lab built on fio.

One package per layer of the data flow, each importing only those below it (docs/design.md has
the tree): ground (``errors``, ``units``, ``model``, ``stats``, ``interrupts``) · ``fio/`` ·
``facts/``, ``runner/`` · ``remote/``, ``store/`` · ``describe/`` · ``check/``, ``observe/`` ·
``analyze/`` · ``run/`` · ``workflows/`` · ``report/`` · ``cli/``.
"""

__version__ = "0.1.0"
