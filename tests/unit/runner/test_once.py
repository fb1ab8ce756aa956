"""``once``: a fact asked from several threads at the same time is learnt by one program start."""

import threading

import pytest

from iolab.runner.once import once


def test_threads_asking_at_once_wait_for_the_first_answer():
    calls: list[str] = []
    started = threading.Event()

    @once
    def slow(what: str = "fio") -> str:
        calls.append(what)
        started.set()
        threading.Event().wait(0.2)  # long enough for every other thread to ask meanwhile
        return f"{what}-3.33"

    answers: list[str] = []
    threads = [threading.Thread(target=lambda: answers.append(slow())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["fio"] and answers == ["fio-3.33"] * 8
    assert slow("fio") == slow(what="fio") == "fio-3.33" and calls == ["fio"]  # defaults count as given
    assert slow("other") == "other-3.33" and calls == ["fio", "other"]
    slow.cache_clear()  # type: ignore[attr-defined]
    slow()
    assert calls == ["fio", "other", "fio"]


def test_a_failure_is_not_kept():
    tries: list[int] = []

    @once
    def flaky() -> int:
        tries.append(1)
        if len(tries) == 1:
            raise OSError("fio is being upgraded")
        return len(tries)

    with pytest.raises(OSError):
        flaky()
    assert flaky() == 2 and flaky() == 2 and len(tries) == 2
