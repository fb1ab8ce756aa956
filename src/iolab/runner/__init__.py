"""fio on this machine: one job run in its fence (bubblewrap, Landlock) and its live status stream.
Imports ground and ``fio/`` only.
"""
