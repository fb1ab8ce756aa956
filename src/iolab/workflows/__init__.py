"""What decides what to run next, or brings results in: the prober every search runs its probes
through (``prober``), auto-tuning, crash tests, capture and replay, importing fio output. A
workflow never starts fio itself: it hands plans to ``run``. Imports ``run/`` and below.
"""
