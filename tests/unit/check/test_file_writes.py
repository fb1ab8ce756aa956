"""Which existing regular files fio may write (``check.safety.check_file_write``): a file with data that iolab
did not lay out, however small, only when it is named with --destroy."""

from __future__ import annotations

import pytest

from iolab.check.safety import check_file_write
from iolab.errors import SafetyError
from iolab.runner.fence import DESTROY


@pytest.mark.parametrize("data", [b"listen 8080\n", b"x" * 4096, b"\0" * 4097])
def test_a_file_with_any_data_is_written_only_when_named(tmp_path, data):
    """A configuration file of a few bytes is as much somebody's data as a disk image."""
    victim = tmp_path / "app.conf"
    victim.write_bytes(data)
    with pytest.raises(SafetyError) as refused:
        check_file_write(str(victim), destroy=[])
    assert f"refusing to write to {victim}: it is an existing file with " in refused.value.message
    assert "iolab did not lay out, and it is not named with --destroy" in refused.value.message
    assert check_file_write(str(victim), destroy=[str(victim)]) == DESTROY
    assert check_file_write(str(victim), destroy=[str(tmp_path)]) == DESTROY  # its directory named
