"""Plan → jobs → store: a plan prepared, stored and run job by job with every result saved as it
ends (``execute``), the spool that keeps finished results until the database has them, scratch
files, host tuning, the method around a job (preconditioning, drop_caches), crash-test phases and
remote targets' jobs. Imports every package above ground except ``workflows/``, ``report/``, ``cli/``.
"""
