"""fio's ``--status-interval`` reports read as a stream (``runner.status``): real fio output, chunked."""

import pytest

from iolab.runner.status import StatusStream
from paths import FIO as DATA


def test_status_stream_rates_from_real_interval_output():
    text = (DATA / "fio-3.33_status-interval-1s_stream.json").read_text()
    stream = StatusStream()
    statuses = []
    for i in range(0, len(text), 777):  # arbitrary chunking, as a file tail would deliver it
        statuses += stream.feed(text[i:i + 777])
    assert len(statuses) == 5
    # FIO_NOTES §3.1: 175012-80000 ios over 1896-896 ms -> 95012 IOPS in the second interval
    assert statuses[1].iops == pytest.approx(95012.0)
    assert statuses[0].eta_s is None and statuses[2].eta_s == 1
