"""Where two sides of a comparison ran, and the facts that differ between them (``compare``'s
environment table). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..facts import idle
from ..model import ResultRecord, Run


@dataclass(frozen=True)
class EnvDifference:
    """One fact about where the runs ran that differs between the sides (None = unknown)."""

    item: str
    a: str | None
    b: str | None


_HOST_FACTS = (("host", "hostname"), ("kernel", "kernel"), ("distribution", "distribution"), ("CPU", "cpu_model"),
               ("CPUs", "cpu_count"), ("memory bytes", "memory_bytes"), ("virtualization", "virtualization"),
               ("CPU governor", "cpu_governor"), ("cpuidle driver", "cpuidle_driver"),
               ("cpuidle governor", "cpuidle_governor"), ("CPU idle states", "idle_states"))
#: The CPU latency limit a result ran under: the value in force during its job, else its host's.
LATENCY_LIMIT = "CPU latency limit (cpu_dma_latency)"


def _host_fact(host: Any, attr: str) -> Any:
    return idle.describe_states(host.idle_states) if attr == "idle_states" else getattr(host, attr)


def _latency_limit(result: ResultRecord, host: Any) -> str | None:
    in_force = ((result.extra or {}).get("tuning") or {}).get("in_force") or {}
    value = in_force.get("cpu_dma_latency", host.cpu_dma_latency_us if host is not None else None)
    return idle.describe_limit(int(value)) if value is not None else None


def _facts(runs: Sequence[Run]) -> dict[str, set[str]]:
    """Facts about where a side's runs ran, each as the set of values seen."""
    facts: dict[str, set[str]] = {}

    def add(item: str, value: Any) -> None:
        facts.setdefault(item, set())
        if value is not None and value != "":
            facts[item].add(str(value))

    for run in runs:
        info, host = run.info, run.info.host
        add("fio version", info.fio_version)
        add("source", f"imported {info.source.get('format')} output" if info.source else "iolab run")
        for item, attr in _HOST_FACTS:
            add(item, _host_fact(host, attr) if host else None)
        for result in run.results:
            add(LATENCY_LIMIT, _latency_limit(result, host) if not (result.extra or {}).get("hosts") else None)
            for label, other in _other_hosts_facts(result).items():  # fio servers, watched hosts
                for item, attr in _HOST_FACTS:
                    add(f"{item} ({label})", _host_fact(other, attr))
                add(f"{LATENCY_LIMIT} ({label})", idle.describe_limit(other.cpu_dma_latency_us))
            t = result.target_facts
            d = t.device if t else None
            add("target kind", t.kind if t else None)
            add("filesystem", t.fs_type if t else None)
            add("mount options", t.mount_options if t else None)
            for item, attr in (("device", "name"), ("device model", "model"), ("scheduler", "scheduler"),
                               ("rotational", "rotational"), ("write cache", "write_cache"),
                               ("nr_requests", "nr_requests"), ("read_ahead_kb", "read_ahead_kb")):
                add(item, getattr(d, attr) if d else None)
            if result.report is not None:
                for disk in result.report.disk_util:
                    add("disks (fio disk stats)", disk.name)
    return facts


def environment(a_runs: Sequence[Run], b_runs: Sequence[Run]) -> tuple[EnvDifference, ...]:
    """The facts that differ between two sides; a fact neither side knows is left out."""
    fa, fb = _facts(a_runs), _facts(b_runs)
    out = []
    for item in dict.fromkeys([*fa, *fb]):
        va, vb = fa.get(item, set()), fb.get(item, set())
        if va != vb:
            out.append(EnvDifference(item, " | ".join(sorted(va)) or None, " | ".join(sorted(vb)) or None))
    return tuple(out)


def imported(runs: Sequence[Run]) -> bool:
    return any(r.info.origin == "imported" for r in runs)


def _other_hosts_facts(result: ResultRecord) -> dict[str, Any]:
    """``observe.usage.other_hosts_facts``, imported only for a result that has other hosts or was
    observed (the observers' modules bring ssh and the fence: 0.2 s of a report's start-up)."""
    if not {"hosts", "observed"} & set(result.extra or {}):
        return {}
    from ..observe import usage
    return usage.other_hosts_facts(result)
