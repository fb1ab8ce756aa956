"""The results database: SQLAlchemy Core over SQLite or PostgreSQL (``database``), the faults it
waits out (``faults``) and its Alembic migrations. Imports ground, ``fio/`` and ``facts/``.
"""
