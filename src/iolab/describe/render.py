"""The job text fio runs for a ``JobSpec`` on a target of a given kind: the target's location
(``filename=`` or ``directory=``), its size, and run-time options, around the workload's sections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..fio import jobfile
from ..fio.jobfile import Option, Section
from .spec import JobSpec


def location_options(kind: str, path: str) -> tuple[Option, ...]:
    """Where fio puts its I/O for a target of ``kind`` (``facts.targets.inspect``): a directory gets
    ``directory=``, anything else ``filename=``. fio treats ``:`` in a file name as a list
    separator, so it is escaped (HOWTO ``filename``)."""
    escaped = path.replace(":", "\\:")
    return (("directory", escaped),) if kind == "directory" else (("filename", escaped),)


def job_sections(spec: JobSpec, kind: str | None, extra: Sequence[Option] = ()) -> tuple[Section, ...]:
    """The sections fio runs for ``spec`` on a target of ``kind``.

    A suite workload gets the location first, then the target's size unless the workload sets
    one, then ``extra`` (run-time options such as logs). A job file gets a leading ``[global]``
    with the location, and its own global ``filename``/``directory`` are dropped so the target
    applies; job sections that name their own files keep them. On a directory target a
    ``filename`` stays, as a name in that directory (fio puts ``directory`` in front of it; an
    absolute name keeps its last part): the job's clones share that file, as the job says.
    """
    target = spec.target
    location = location_options(kind or "file", target.path) if target.path else ()

    def located(key: str, value: str | None, global_: bool) -> tuple[Option, ...]:
        """An option of the job as it stands on the target: its own location dropped (a global one)
        or made a name in the target directory."""
        if key not in ("filename", "directory") or not location:
            return ((key, value),)
        if key == "filename" and kind == "directory" and value and not global_:
            return (("filename", ":".join(_name_in_directory(p) for p in re.split(r"(?<!\\):", value) if p)),)
        return () if global_ or len(sections) == 1 else ((key, value),)

    sections = spec.sections
    if len(sections) == 1 and not sections[0].is_global:
        (section,) = sections
        own = dict(section.options)
        size: tuple[Option, ...] = ()
        if target.size and "size" not in own:
            size = (("size", target.size),)
        kept = tuple(o for k, v in section.options for o in located(k, v, False))
        return (Section(section.name, (*location, *kept, *size, *extra)),)
    cleaned = tuple(Section(s.name, tuple(o for k, v in s.options for o in located(k, v, s.is_global)))
                    for s in sections)
    head = Section("global", (*location, *extra)) if location or extra else None
    return ((head,) if head else ()) + cleaned


def _name_in_directory(name: str) -> str:
    """A ``filename`` entry as a name in a directory target: its last part when absolute."""
    return name.rstrip("/").rsplit("/", 1)[-1] if name.startswith("/") else name


def render_job(spec: JobSpec, kind: str | None, extra: Sequence[Option] = ()) -> str:
    """The complete job file iolab hands to fio for ``spec`` (deterministic)."""
    header = [f"iolab: workload {spec.workload.name} on target {spec.target.name}"]
    if spec.target.path:
        header.append(f"target path: {spec.target.path} ({kind})")
    return jobfile.render(job_sections(spec, kind, extra), header)
