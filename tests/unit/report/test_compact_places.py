"""Places a finding applies to, compacted for one line (``report.table.compact_places``)."""

import pytest


@pytest.mark.parametrize(("where", "shown"), [
    (["a on d"], "a on d"), (["a on d", "b on d", "c on e"], "a on d, b on d, c on e"),
    (["a on d", "b on d", "c on d", "x on e"], "3 workloads on d (a, …, c); x on e"),
    (["a on d", "b on d", "x on e", "y on e"], "2 workloads on d (a, b); 2 workloads on e (x, y)")])
def test_compact_places(where, shown):
    from iolab.report.table import compact_places
    assert compact_places(where) == shown
