"""The store on PostgreSQL (the run's server, a database per test): the contract SQLite meets too
(``storecontract``; SQLite's run is ``tests/unit/store``), and an older schema upgraded when opened."""

from __future__ import annotations

import pytest

from storecontract import StoreContract, UpgradeContract

pytestmark = pytest.mark.postgres


class TestPostgreSQL(StoreContract):
    @pytest.fixture
    def url(self, postgres_url: str) -> str:
        return postgres_url


class TestPostgreSQLUpgrade(UpgradeContract):
    @pytest.fixture
    def url(self, postgres_url: str) -> str:
        return postgres_url
