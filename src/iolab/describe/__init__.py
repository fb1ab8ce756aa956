"""What to run: suites (targets × workloads × repeats, validated once at the boundary), the fio job
text each job renders to and its canonical key, and the settings features add to a suite
(``method``, ``tune``, ``observe``, ``tiers``). Imports ground, ``fio/``, ``facts/`` and host
specs (``remote.hosts``).
"""
