"""Everything refused or warned before fio starts: the static guard over job files read as fio
reads them (``guard``, ``fiopaths``), the destructive-write rules (``safety``), the methodology
lint, a plan's checks (``plan_checks``) and remote hosts' preflight (``remote``). Imports
``describe/`` and what lies below it.
"""
