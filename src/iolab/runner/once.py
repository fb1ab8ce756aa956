"""Facts a process learns once, by starting a program: fio's version, whether bubblewrap can fence.

``functools.cache`` runs a function again for every thread that asks before the first call has
returned; a run asks some of these facts from two threads at once (the plan, and fio's checks it
starts early), and each answer starts programs (``fio --version``; bubblewrap three times). ``once``
makes the later callers wait for the first one's answer. An exception is not kept: the next call
tries again.
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the standard library only, and Python 3.9: ssh hosts' agent imports this (remote.sshagent)
    from collections.abc import Callable, Hashable
    from typing import ParamSpec, TypeVar

    P = ParamSpec("P")
    R = TypeVar("R")


def once(function: Callable[P, R]) -> Callable[P, R]:
    """``function`` computed once per distinct arguments (all hashable; defaults count as given, so
    ``status()`` and ``status("bwrap")`` are one), even when several threads call it at the same
    time; ``.cache_clear()`` forgets every answer."""
    signature = inspect.signature(function)
    answers: dict[Hashable, Any] = {}
    locks: dict[Hashable, threading.Lock] = {}
    guard = threading.Lock()

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        key = tuple(bound.arguments.items())
        if key in answers:
            return answers[key]  # type: ignore[no-any-return]
        with guard:
            lock = locks.setdefault(key, threading.Lock())
        with lock:
            if key not in answers:
                answers[key] = function(*args, **kwargs)
            return answers[key]  # type: ignore[no-any-return]

    def cache_clear() -> None:
        with guard:
            answers.clear()

    wrapper.cache_clear = cache_clear  # type: ignore[attr-defined]
    return wrapper
