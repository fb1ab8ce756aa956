"""fio job files: read existing ones, render iolab's own, and the comparability hash.

A job file is a list of sections (``[global]`` or a job name), each an ordered list of options;
an option without ``=value`` (``time_based``, ``group_reporting``) has the value ``None``.
Source of the syntax: fio HOWTO.rst "Job file format". A ``[global]`` section applies to the
jobs that follow it; it may appear several times.

Rendering is pure and deterministic: the same spec gives the same bytes, so the text stored
with a result is exactly what fio ran and can be diffed between runs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import SuiteError

Option = tuple[str, str | None]

#: Options that say where the data lives or how fio reports, not which I/O it does. They are
#: left out of ``params`` and of the hash, so the same workload on two targets compares.
NOT_WORKLOAD = frozenset({
    "name", "description", "filename", "directory", "filename_format", "unique_filename",
    "write_bw_log", "write_iops_log", "write_lat_log", "write_hist_log", "log_avg_msec",
    "log_hist_msec", "log_hist_coarseness", "log_max_value", "log_offset", "per_job_logs",
    "log_unix_epoch", "log_alternate_epoch", "log_compression", "log_store_compressed",
    "group_reporting", "stats", "percentile_list", "clat_percentiles", "lat_percentiles",
    "slat_percentiles", "significant_figures", "unified_rw_reporting", "bwavgtime", "iopsavgtime",
    "cpus_allowed", "cpus_allowed_policy", "cpumask", "numa_cpu_nodes",
    "replay_redirect",  # where a replay's I/O goes: a location, like filename (capture.plan)
})

_SECTION_RE = re.compile(r"^\[([^\]]+)\]\s*$")


@dataclass(frozen=True)
class Section:
    """One ``[name]`` section of a job file with its options in file order."""

    name: str
    options: tuple[Option, ...]

    @property
    def is_global(self) -> bool:
        """fio treats every section whose name starts with ``global`` as global (``init.c``
        ``parse_jobs_ini``: ``!strncmp(name, "global", 6)``)."""
        return self.name.startswith("global")


def parse(text: str, source: str = "<job file>", base_dir: Path | None = None) -> tuple[Section, ...]:
    """Read fio job-file text into sections.

    ``include FILE`` lines are expanded (relative to ``base_dir``), as fio does. Raises
    ``SuiteError`` naming ``source`` and the line for an option outside any section, an
    unterminated section header, a missing include, or a file without any job section.
    """
    sections = _read(text, source, base_dir)
    if not any(not s.is_global for s in sections):
        raise SuiteError(f"{source}: no job section (only [global] or nothing)")
    return tuple(sections)


def _read(text: str, source: str, base_dir: Path | None) -> list[Section]:
    sections: list[Section] = []
    name: str | None = None
    options: list[Option] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        # fio cuts every line at its first ';' or '#' (strip_blank_end() in parse.c), so
        # "runtime=60s # comment" is runtime=60s and no value can contain either character.
        line = re.split(r"[;#]", raw, maxsplit=1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            # fio includes on any line that starts with "include", skipping the one character
            # after it (init.c parse_jobs_ini: ``p + strlen("include") + 1``): include=x.fio too.
            included = Path(line[len("include") + 1:].strip())
            if not included.is_absolute() and base_dir is not None:
                included = base_dir / included
            try:
                sub = _read(included.read_text(), str(included), included.parent)
            except OSError as exc:
                raise SuiteError(f"{source}:{lineno}: cannot include {included}: {exc.strerror}") from exc
            if name is not None:
                sections.append(Section(name, tuple(options)))
                name, options = None, []
            sections.extend(sub)
            continue
        match = _SECTION_RE.match(line)
        if match:
            if name is not None:
                sections.append(Section(name, tuple(options)))
            name, options = match.group(1).strip(), []
            continue
        if line.startswith("["):
            raise SuiteError(f"{source}:{lineno}: malformed section header {line!r}")
        if name is None:
            raise SuiteError(f"{source}:{lineno}: option {line!r} before any [section]")
        key, sep, value = line.partition("=")
        options.append((key.strip(), value.strip() if sep else None))
    if name is not None:
        sections.append(Section(name, tuple(options)))
    return sections


def effective_jobs(sections: Iterable[Section]) -> list[tuple[str, dict[str, str | None]]]:
    """Each job section's options with the preceding ``[global]`` sections applied.

    Returns ``[(job name, {option: value})]`` in file order; later settings win, as in fio.
    """
    defaults: dict[str, str | None] = {}
    jobs = []
    for section in sections:
        if section.is_global:
            defaults.update(section.options)
        else:
            jobs.append((section.name, {**defaults, **dict(section.options)}))
    return jobs


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_text(text: str, where: str) -> None:
    """Refuse control characters (a newline, a carriage return, NUL ...) in a piece of a job
    file: one would end the line and start another, injecting options (``description=x`` +
    newline + ``filename=/dev/sda``). Raises ``SuiteError`` naming ``where``."""
    found = _CONTROL.search(text)
    if found:
        raise SuiteError(f"{where}: {text!r} holds a control character ({found.group()!r}), which would start "
                         "another line of the fio job file", hint="remove the newline or control character")


def render(sections: Iterable[Section], header: Iterable[str] = ()) -> str:
    """Job-file text for ``sections``; ``header`` lines become leading ``;`` comments.

    Raises ``SuiteError`` for a control character anywhere (``check_text``), a section name
    with ``]``, or an option named ``include...`` (fio would read the line as an include)."""
    lines = []
    for h in header:
        check_text(h, "job file header")
        lines.append(f"; {h}")
    for section in sections:
        check_text(section.name, "section name")
        if "]" in section.name or "[" in section.name:
            raise SuiteError(f"section name {section.name!r} holds a bracket")
        if lines:
            lines.append("")
        lines.append(f"[{section.name}]")
        for key, value in section.options:
            check_text(key, f"[{section.name}] option name")
            if value is not None:
                check_text(value, f"[{section.name}] {key}")
            if key.strip().startswith("include") or key.strip().startswith("["):
                raise SuiteError(f"[{section.name}] {key}: fio would read this line as an include or a section")
            lines.append(key if value is None else f"{key}={value}")
    return "\n".join(lines) + "\n"


def workload_params(sections: Iterable[Section]) -> dict[str, str]:
    """The options that define the I/O pattern, for comparing and hashing.

    One job section gives ``{option: value}``; several give ``{"job.option": value}``. Options
    in ``NOT_WORKLOAD`` are left out; a flag without value is ``"1"`` (``time_based`` equals
    ``time_based=1`` to fio).
    """
    jobs = effective_jobs(sections)
    params: dict[str, str] = {}
    for name, options in jobs:
        for key, value in options.items():
            if key in NOT_WORKLOAD:
                continue
            params[key if len(jobs) == 1 else f"{name}.{key}"] = "1" if value is None else value
    return dict(sorted(params.items()))


def params_hash(params: Mapping[str, str]) -> str:
    """A short, stable digest of ``params``: equal digests mean the same workload."""
    canonical = json.dumps(dict(sorted(params.items())), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
