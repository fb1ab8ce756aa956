"""What PostgreSQL accepts of the stored report model reads back equal (the property SQLite's run in
``tests/unit/store/test_store_read.py`` holds with more examples; strategies in ``reportstrategies``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from iolab.store.database import Store
from reportstrategies import near_real, reports, store_and_read

pytestmark = pytest.mark.postgres


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Store]:
    store = Store(postgres_url)
    yield store
    store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(reports | near_real())
def test_what_postgresql_accepts_reads_back_equal(postgres_store, report):
    read_back = store_and_read(postgres_store, report)
    assert read_back is None or read_back == report
