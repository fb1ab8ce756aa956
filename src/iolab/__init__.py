"""iolab: a storage benchmark lab built on fio."""

__version__ = "0.1.0"
