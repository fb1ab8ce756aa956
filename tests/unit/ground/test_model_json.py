"""A fio report's stored JSON text (``model.to_json_text``, orjson) for every real fio output sample."""

from __future__ import annotations

import json

import pytest

from fiosamples import OUTPUTS
from iolab.fio import parse_output
from iolab.model import FioReport, from_jsonable, to_json_text, to_jsonable


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: p.name)
def test_stored_report_text_is_pydantics_json_and_reads_back(path):
    """``to_json_text`` (orjson) writes what pydantic's ``to_jsonable`` gives, and reads back unchanged."""
    report = parse_output(path.read_text(errors="replace"), path.name)
    text = to_json_text(report)
    assert json.loads(text) == to_jsonable(report)
    assert from_jsonable(FioReport, json.loads(text)) == report
