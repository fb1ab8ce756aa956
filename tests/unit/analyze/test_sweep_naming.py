"""How results name their workloads (``analyze.sweep.naming``): by name, by the options that vary, or both."""

from __future__ import annotations

from iolab.analyze import sweep
from iolab.describe import canonical


def _rows(*workloads: dict[str, str]) -> list[dict[str, str | None]]:
    return sweep.option_table([canonical.Options(w) for w in workloads])


def test_the_pin_mode_is_an_axis_and_names_stay_where_options_agree():
    """An autotune's rows: probes at QD4 x2, one pinned, and the full-length repetitions of the probe's
    configuration (options equal to the probe's): the pin mode is a column, and the names tell the rest."""
    base = {"rw": "randread", "bs": "4k", "numjobs": "2"}
    rows = _rows({**base, "iodepth": "1", "numjobs": "1"}, {**base, "iodepth": "4"}, {**base, "iodepth": "4"},
                 {**base, "iodepth": "4", "pin": "mq"})
    assert [r["pin"] for r in rows] == [None, None, None, "mq"]  # not a fio option: no default to show
    naming = sweep.naming(["qd1-j1", "qd4-j2", "qd4-j2-final", "qd4-j2-pin_mq"], rows)
    assert naming.by_options and {"iodepth", "numjobs", "pin"} <= set(naming.keys) and naming.names


def test_a_plain_sweep_is_named_by_its_options_alone_and_distinct_jobs_by_name():
    sweep_rows = _rows(*({"rw": "randread", "bs": "4k", "iodepth": qd} for qd in ("1", "4", "16")))
    naming = sweep.naming(["a", "b", "c"], sweep_rows)
    assert naming.keys == ("iodepth",) and not naming.names
    assert sweep.naming(["read", "write"], _rows({"rw": "read"}, {"rw": "write"})) == sweep.Naming()
