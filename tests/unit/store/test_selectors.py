"""Run selectors (``store.selectors``): ids, ranges, lists, labels (also one spelt like a list), tags."""

from __future__ import annotations

import pytest

from iolab.errors import UsageError
from iolab.store.database import Store


@pytest.fixture
def store(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/t.db")
    for i in range(1, 8):
        label = {2: "a,b", 3: "base", 5: "base", 6: "7-9"}.get(i)
        store.create_run(suite_name="s", suite_text="", label=label, tags={"disk": "nvme"} if i > 5 else {},
                         status="complete")
    yield store
    store.close()


@pytest.mark.parametrize(("selector", "ids"), [
    ("4", [4]), ("latest", [7]), ("2-4", [2, 3, 4]), ("5-99", [5, 6, 7]), ("4,1,4", [4, 1]),
    ("base", [3, 5]), ("base,1-2", [3, 5, 1, 2]), ("a,b", [2]), ("7-9", [7]), ("disk=nvme", [6, 7]),
    (" 1, 2", [1, 2]),
])
def test_a_selector_finds_its_runs_in_order(store, selector, ids):
    assert store.resolve(selector) == ids


@pytest.mark.parametrize(("selector", "message"), [
    ("9-12", "no run matches '9-12'"), ("4-2", "run range '4-2' runs backwards"),
    ("1,,2", "has an empty part"), ("1,nope", "no run matches 'nope' (in '1,nope')"), ("nope", "no run matches"),
])
def test_a_selector_that_matches_nothing_is_a_usage_error(store, selector, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        store.resolve(selector)
