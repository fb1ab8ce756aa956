import pytest

from iolab import units


@pytest.mark.parametrize(("text", "expected"), [
    ("4k", 4096), ("4K", 4096), ("4kb", 4096), ("1m", 1048576), ("2g", 2 * 1024**3), ("512", 512),
    ("1.5g", int(1.5 * 1024**3)), (4096, 4096), ("4b", 4), ("1t", 1024**4),
    # fio's default kb_base=1024 inverts the IEC spellings (parse.c __get_mult_bytes, HOWTO "Parameter types")
    ("4kib", 4000), ("1MiB", 1000**2),
])
def test_parse_size_like_fio(text, expected):
    assert units.parse_size(text) == expected


def test_parse_size_kb_base_1000_swaps_the_meaning():
    assert units.parse_size("4k", kb_base=1000) == 4000
    assert units.parse_size("4kib", kb_base=1000) == 4096


@pytest.mark.parametrize("text", ["4x", "", "k", "50%", "-1", "4 kk", True])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        units.parse_size(text)


@pytest.mark.parametrize(("text", "us"), [
    ("10", 10_000_000), (10, 10_000_000), ("10s", 10_000_000), ("500ms", 500_000), ("2m", 120_000_000),
    ("1h", 3_600_000_000), ("250us", 250),
])
def test_parse_duration(text, us):
    assert units.parse_duration_us(text) == us


def test_formatting():
    assert units.format_iops(71314.6) == "71314.6" and units.format_iops(2994) == "2994.0"
    assert units.format_iops(None) == "–"
    assert units.format_ns(145160) == "145.2 us"
    assert units.format_ns(900) == "900 ns"
    assert units.format_rate(1048576 * 2.5) == "2.50"
    assert units.format_size_fio(1048576) == "1m"
    assert units.format_size_fio(1000) == "1000"
    assert units.format_duration(75) == "1m15s"


@pytest.mark.parametrize("text", ["9" * 400, "9" * 400 + "k", "1" + "0" * 320 + "p"])
def test_a_size_beyond_floats_is_a_value_error(text):
    with pytest.raises(ValueError, match="larger than any size"):
        units.parse_size(text)


@pytest.mark.parametrize("value", ["9" * 400 + "s", float("inf"), float("nan")])
def test_a_duration_beyond_floats_is_a_value_error(value):
    with pytest.raises(ValueError, match="expected a duration"):
        units.parse_duration_us(value)
