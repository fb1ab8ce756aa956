"""Host and device facts side by side, one column per run (host) or per subject (target), with
the rows whose values differ marked ``≠`` and styled ``diff``: a comparison is only as good as
the sameness of everything but the thing compared (SNIA PTS, "record test conditions")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..facts import idle
from ..model import HostFacts, Run, TargetFacts
from ..observe.usage import other_hosts_facts
from ..units import format_bytes
from .chartdata import run_name, subjects
from .table import Cell, Column, Table

Getter = Callable[[Any], Any]


def _text(value: Any) -> str:
    if value is None or value == "" or value == ():
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, tuple | list):
        return ", ".join(str(v) for v in value)
    return str(value)


HOST_ROWS: tuple[tuple[str, Getter], ...] = (
    ("host name", lambda h: h.hostname), ("kernel", lambda h: h.kernel), ("distribution", lambda h: h.distribution),
    ("CPU", lambda h: h.cpu_model), ("CPUs", lambda h: h.cpu_count),
    ("memory", lambda h: format_bytes(h.memory_bytes) if h.memory_bytes else None),
    ("virtualisation", lambda h: h.virtualization), ("CPU governor", lambda h: h.cpu_governor),
    ("cpuidle driver / governor", lambda h: " / ".join(v or "–" for v in (h.cpuidle_driver, h.cpuidle_governor))
     if h.cpuidle_driver or h.cpuidle_governor else None),
    ("CPU idle states", lambda h: idle.describe_states(h.idle_states)),
    ("CPU latency limit", lambda h: idle.describe_limit(h.cpu_dma_latency_us)),
    ("fio", lambda h: h.fio_version),
)

TARGET_ROWS: tuple[tuple[str, Getter], ...] = (
    ("path", lambda t: t.path), ("kind", lambda t: "new file (created for the run)" if t.kind == "missing" else t.kind),
    ("size", lambda t: format_bytes(t.size_bytes) if t.size_bytes else None), ("filesystem", lambda t: t.fs_type),
    ("mount point", lambda t: t.mount_point), ("mount options", lambda t: t.mount_options),
    ("device", lambda t: t.device.path if t.device else None),
    ("model", lambda t: t.device.model if t.device else None),
    ("rotational", lambda t: t.device.rotational if t.device else None),
    ("scheduler", lambda t: t.device.scheduler if t.device else None),
    ("nr_requests", lambda t: t.device.nr_requests if t.device else None),
    ("read_ahead_kb", lambda t: t.device.read_ahead_kb if t.device else None),
    ("write cache", lambda t: t.device.write_cache if t.device else None),
    ("logical / physical block", lambda t: f"{t.device.logical_block_bytes} / {t.device.physical_block_bytes}"
     if t.device and t.device.logical_block_bytes else None),
    ("hardware queues", lambda t: len(t.device.queues) if t.device and t.device.queues else None),
    ("NUMA node", lambda t: t.device.numa_node if t.device else None),
)


def side_by_side(title: str, names: Sequence[str], objects: Sequence[Any],
                 rows: Sequence[tuple[str, Getter]]) -> Table:
    """A facts table: one column per object (None = unknown), rows where all are unknown
    dropped, differing rows marked when there are two or more columns."""
    columns = (Column("differs", ""), Column("fact", "fact"), *(Column(f"c{i}", n) for i, n in enumerate(names)))
    out = []
    for label, get in rows:
        values = [_text(get(o)) if o is not None else "–" for o in objects]
        if all(v == "–" for v in values):
            continue
        differs = len(objects) > 1 and len(set(values)) > 1
        style = "diff" if differs else None
        out.append((Cell("≠" if differs else "", style=style), Cell(label, style=style),
                    *(Cell(v, style=style) for v in values)))
    return Table(title=title, columns=columns, rows=tuple(out))


def host_table(runs: Sequence[Run]) -> Table:
    """The hosts the runs came from, plus each run's suite, status and tags."""
    hosts = [r.info.host or HostFacts() for r in runs]
    extra: tuple[tuple[str, Getter], ...] = (
        ("suite", lambda r: r.info.suite_name), ("status", lambda r: r.info.status),
        ("tags", lambda r: " ".join(f"{k}={v}" for k, v in r.info.tags.items()) or None),
    )
    names = [run_name(r, runs) for r in runs]
    table = side_by_side("Hosts", names, hosts, HOST_ROWS)
    runs_part = side_by_side("", names, list(runs), extra)
    return Table(title="Host and run", columns=table.columns, rows=table.rows + runs_part.rows)


def target_table(runs: Sequence[Run]) -> Table:
    """Each subject's target as inspected when its first job started."""
    subj = subjects(runs)
    facts: dict[tuple[int, str], TargetFacts | None] = dict.fromkeys(subj.names)
    for run in runs:
        for result in run.results:
            if facts.get((run.info.id, result.target)) is None and result.target_facts is not None:
                facts[(run.info.id, result.target)] = result.target_facts
    return side_by_side("Targets and devices", list(subj.names.values()), list(facts.values()), TARGET_ROWS)


def other_hosts_table(runs: Sequence[Run]) -> Table:
    """The fio servers' and watched hosts' facts (``observe.usage.other_hosts_facts``), one
    column per run and host, as their first job found them."""
    found: dict[tuple[str, str], HostFacts] = {}
    for run in runs:
        for result in run.results:
            for host, f in other_hosts_facts(result).items():
                found.setdefault((run_name(run, runs), host), f)
    names = [host if len(runs) == 1 else f"{name} · {host}" for name, host in found]
    return side_by_side("Fio servers and observed hosts", names, list(found.values()), HOST_ROWS)
