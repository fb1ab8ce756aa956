"""Finding fio (``runner.local.find_fio``): a missing fio names the command that installs it."""

import pytest

from iolab.errors import FioNotFound
from iolab.runner import local


def test_fio_missing_names_the_install_command():
    with pytest.raises(FioNotFound) as info:
        local.find_fio("fio-that-does-not-exist")
    assert "apt-get install fio" in info.value.hint
