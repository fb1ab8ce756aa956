"""Analysis over stored results: comparisons with verdicts (``compare``), sweeps, the saturation
search's rules, warm-up curves, cache tiers' accounting. Imports ``describe/``, ``observe/``,
``fio/`` and ground; never runs fio.
"""
