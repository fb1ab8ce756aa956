"""A suite's host tuning settings (``tune:``, ``--tune KEY=VALUE``): which keys there are, their
values normalised, and how a tuning axis names a workload. ``run.tuning`` applies them (its
module docstring has the table of keys, files and values) and always undoes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SuiteError

#: Queue attributes iolab tunes, in the order they are applied: those that reset others first.
QUEUE_KEYS = ("scheduler", "write_cache", "rq_affinity", "nomerges", "nr_requests", "read_ahead_kb")
#: Settings of this machine's CPUs: the cpufreq governor (sysfs), the CPU latency limit (a held request).
CPU_KEYS = ("governor", "cpu_dma_latency")
KEYS = (*QUEUE_KEYS, *CPU_KEYS)
#: The largest ``cpu_dma_latency`` (µs) a request can hold: a signed 32-bit value (``facts.idle``).
MAX_DMA_LATENCY_US = 2**31 - 1

#: How a tuning axis shows in a workload name: ``randread-4k-qd32-sched_none``.
LABELS = {"scheduler": "sched_", "rq_affinity": "rqa", "nomerges": "nomerges", "nr_requests": "nr",
          "read_ahead_kb": "ra", "write_cache": "wc_", "governor": "gov_", "cpu_dma_latency": "dmalat"}

_WRITE_CACHE = {"write back": "write back", "write-back": "write back", "wb": "write back",
                "write through": "write through", "write-through": "write through", "wt": "write through"}


def check_value(key: str, value: Any) -> str:
    """Normalise one setting's value for ``key`` (suite or command line); raises ``ValueError``."""
    text = str(value).strip() if not isinstance(value, bool) else ""
    if key not in KEYS:
        raise ValueError(f"{key!r} is not a tunable setting (choose from {', '.join(KEYS)})")
    if key in ("rq_affinity", "nomerges"):
        if text not in ("0", "1", "2"):
            raise ValueError(f"{key}: expected 0, 1 or 2, got {value!r}")
    elif key in ("nr_requests", "read_ahead_kb"):
        if not text.isdigit() or (key == "nr_requests" and int(text) < 1):
            raise ValueError(f"{key}: expected a whole number{' >= 1' if key == 'nr_requests' else ''}, got {value!r}")
        text = str(int(text))
    elif key == "cpu_dma_latency":
        if not text.isdigit() or int(text) > MAX_DMA_LATENCY_US:
            raise ValueError(f"cpu_dma_latency: expected a whole number of microseconds from 0 to {MAX_DMA_LATENCY_US} "
                             f"(0 keeps idle CPUs in states without exit latency), got {value!r}")
        text = str(int(text))
    elif key == "write_cache":
        if text.lower() not in _WRITE_CACHE:
            raise ValueError(f"write_cache: expected 'write back' or 'write through', got {value!r}")
        text = _WRITE_CACHE[text.lower()]
    elif not re.fullmatch(r"[A-Za-z0-9_.-]+", text):
        raise ValueError(f"{key}: expected a {key} name such as {'none' if key == 'scheduler' else 'performance'}, "
                         f"got {value!r}")
    return text


def check_tune(raw: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """A suite's ``tune:`` mapping, each value a tuple (a list is a matrix axis).

    Raises ``ValueError`` (``scheduler: ...``) for an unknown key, a bad value or an empty list.
    """
    out: dict[str, tuple[str, ...]] = {}
    for key, value in raw.items():
        values = value if isinstance(value, list) else [value]
        if not values:
            raise ValueError(f"{key}: an empty list gives no setting")
        out[str(key)] = tuple(dict.fromkeys(check_value(str(key), v) for v in values))
    return out


def parse_tune_args(args: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``["scheduler=none", "scheduler=mq-deadline", "rq_affinity=2"]`` from ``--tune``; a key
    given twice is an axis. Raises ``SuiteError`` naming the argument."""
    out: dict[str, list[str]] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            raise SuiteError(f"--tune {arg!r}: expected KEY=VALUE", hint=f"keys: {', '.join(KEYS)}")
        try:
            normal = check_value(key.strip(), value)
        except ValueError as exc:
            raise SuiteError(f"--tune {arg!r}: {exc}", hint=f"keys: {', '.join(KEYS)}") from None
        out.setdefault(key.strip(), [])
        if normal not in out[key.strip()]:
            out[key.strip()].append(normal)
    return {k: tuple(v) for k, v in out.items()}


def label(key: str, value: str) -> str:
    """A tuning value as a workload-name part: ``("scheduler", "none")`` -> ``sched_none``."""
    if key == "write_cache":
        value = "wb" if value == "write back" else "wt"
    return f"{LABELS[key]}{value}"
