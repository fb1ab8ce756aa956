"""``python -m iolab`` is the ``iolab`` command."""

from .cli import main

main()
