"""What changed between two stored results of one workload: the facts iolab recorded with each. Pure.

``facts`` gathers, for one result, what a change point is usually explained by: the host (kernel,
distribution, CPU, memory, virtualization, CPU governor, cpuidle driver, governor and idle states, the
CPU latency limit the job ran under), fio's version, the device (name, model,
firmware, rotational) and its queue settings as the job ran with them (``extra["tuning"]["in_force"]``,
else the target's facts from before the run), tuning asked for, CPUs pinned, the file system and its
mount options, where the result came from (``run``, ``imported``, ``capture``), the run's tags
(``tag KEY``: what a team records by hand, such as a firmware update iolab cannot see) and iolab's
suite text. ``between`` lists those that differ, plus the job options that differ without making the
results incomparable (``canonical.SOFT``: ``runtime`` …). A fact unknown on a side (an imported
output records no host) is not a change: the origin, which differs then, says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..describe import canonical
from ..facts import idle
from ..model import RunInfo
from ..store.history import HistoryResult

#: Host facts by ``model.HostFacts`` field.
HOST_FACTS = (("kernel", "kernel"), ("distribution", "distribution"), ("CPU", "cpu_model"), ("CPUs", "cpu_count"),
              ("memory bytes", "memory_bytes"), ("virtualization", "virtualization"),
              ("cpuidle driver", "cpuidle_driver"), ("cpuidle governor", "cpuidle_governor"))
#: Queue settings as ``tuning.snapshot`` names them, and as tables show them.
QUEUE = (("scheduler", "scheduler"), ("write_cache", "write cache"), ("nr_requests", "nr_requests"),
         ("read_ahead_kb", "read_ahead_kb"), ("rq_affinity", "rq_affinity"), ("nomerges", "nomerges"))
SUITE = "suite text"
#: Facts whose absence on one side means "not set", not "unknown" (and every ``tag KEY``).
ABSENT_IS_VALUE = ("tuning", "pinned CPUs")
NOT_SET = "(not set)"


@dataclass(frozen=True)
class Change:
    """One fact that differs: its name and each side's value (text)."""

    what: str
    before: str | None
    after: str | None


def facts(run: RunInfo, result: HistoryResult, fio_version: str | None = None) -> dict[str, str | None]:
    """The facts of one result (see the module docstring), by name; None where unknown; ``fio_version``
    the one its report gives, for a run that recorded none. The suite text is whole (``between``
    shows the first line that differs)."""
    out: dict[str, str | None] = {"origin": run.origin, "fio version": run.fio_version or fio_version}
    host = run.host
    for name, attr in HOST_FACTS:
        out[name] = _text(getattr(host, attr) if host is not None else None)
    target = result.target_facts
    device = target.device if target is not None else None
    if target is not None:
        out.update({"target path": target.path, "target kind": target.kind, "filesystem": target.fs_type,
                    "mount options": target.mount_options})
    if device is not None:
        model = " ".join(v.strip() for v in (device.vendor, device.model) if v and v.strip())
        out.update({"device": device.name, "device model": model or None, "firmware": device.firmware,
                    "rotational": _text(device.rotational)})
    extra = result.extra or {}
    tuning = extra.get("tuning") or {}
    in_force: Mapping[str, Any] = tuning.get("in_force") or {}
    for key, name in QUEUE:
        out[name] = _text(in_force.get(key, getattr(device, key, None) if device is not None else None))
    out["CPU governor"] = _text(in_force.get("governor", host.cpu_governor if host is not None else None))
    out["CPU idle states"] = idle.describe_states(host.idle_states) if host is not None else None
    limit = in_force.get("cpu_dma_latency", host.cpu_dma_latency_us if host is not None else None)
    out["CPU latency limit"] = idle.describe_limit(int(limit)) if limit is not None else None
    requested = tuning.get("requested") or {}
    out["tuning"] = ", ".join(f"{k}={v}" for k, v in sorted(requested.items())) or None
    pin = extra.get("pin") or {}
    out["pinned CPUs"] = _text(pin.get("cpus"))
    out.update({f"tag {k}": v for k, v in run.tags.items() if k != "host"})
    out[SUITE] = run.suite_text or None
    return out


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def between(before: Mapping[str, str | None], after: Mapping[str, str | None],
            options_before: canonical.Options | None = None,
            options_after: canonical.Options | None = None) -> tuple[Change, ...]:
    """The facts that differ between ``before`` and ``after`` (``facts``), then the soft job options
    that differ (``job option runtime``), in that order."""
    found = []
    for name in dict.fromkeys([*before, *after]):
        a, b = before.get(name), after.get(name)
        if name in ABSENT_IS_VALUE or name.startswith("tag "):
            a, b = a or NOT_SET, b or NOT_SET
        if a == b or a is None or b is None:
            continue
        if name == SUITE:
            a, b = first_difference(a, b)
        found.append(Change(name, a, b))
    if options_before is not None and options_after is not None:
        diffs, _ = canonical.differences(options_before, options_after)
        found += [Change(f"job option {d.option}", d.a, d.b) for d in diffs if d.effect == "soft"]
    return tuple(found)


def first_difference(a: str, b: str, width: int = 60) -> tuple[str, str]:
    """The first line at which two texts differ, from each (``(end)`` past the last line), cut to
    ``width`` characters."""
    lines_a, lines_b = a.splitlines(), b.splitlines()
    for i in range(max(len(lines_a), len(lines_b))):
        la = lines_a[i].strip() if i < len(lines_a) else "(end)"
        lb = lines_b[i].strip() if i < len(lines_b) else "(end)"
        if la != lb:
            return _cut(la, width), _cut(lb, width)
    return "(same lines)", "(same lines, other whitespace)"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def describe(found: tuple[Change, ...], limit: int = 4) -> str:
    """The changes in one line, ``kernel 6.1.0-1 → 6.1.0-2; scheduler none → mq-deadline``, at most
    ``limit`` of them and a count of the rest; ``–`` when none is known."""
    if not found:
        return "–"
    parts = [f"{c.what} {c.before} → {c.after}" for c in found[:limit]]
    if len(found) > limit:
        parts.append(f"{len(found) - limit} more")
    return "; ".join(parts)
