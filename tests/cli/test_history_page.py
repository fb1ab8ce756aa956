"""The history page (``iolab report --history``) carries every series as data, the hostile tag escaped
(drawn in real browsers: tests/system/test_history_browser.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import historypage
from historypage import EVIL
from inprocess import iolab


@pytest.fixture
def page_path(tmp_path) -> Path:
    """The history page of 30 imported runs (``historypage``)."""
    return historypage.make(tmp_path, iolab)


def test_the_page_carries_the_series_as_data(page_path):
    text = page_path.read_text()
    blocks = re.findall(r'<script type="application/json" class="vega-spec">(.*?)</script>', text, re.S)
    specs = [json.loads(block) for block in blocks]
    assert len(specs) == 4
    kinds = [sorted({row["kind"] for row in spec["data"]["values"]}) for spec in specs]
    assert kinds.count(["change", "point", "segment"]) == 2 and kinds.count(["point", "segment"]) == 2
    assert EVIL not in text  # escaped wherever it appears
