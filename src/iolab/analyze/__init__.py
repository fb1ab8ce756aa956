"""Analysis over stored results: comparisons with verdicts (``compare``), sweeps, the saturation
search's rules, warm-up curves, cache tiers' accounting, and a workload's history across runs
(``history``: series, ``changepoints``, what ``changes`` between runs, the CI ``gate``). Imports
``describe/``, ``observe/``, ``store/`` (the records ``Store.history`` reads), ``fio/`` and ground;
never runs fio.
"""
