"""Suites: targets × workloads × repeats, validated once at the file boundary.

A suite file (YAML)::

    name: my-suite
    targets:
      ssd: /mnt/ssd                      # a path: file, directory or block device
      hdd: {path: /dev/sdb, size: 8g}
      rbd:                               # remote: runs on all hosts at once (fio --client)
        hosts: ["10.0.0.11", "10.0.0.12:8765", "ip6:fd00::13,8765"]   # or hosts_file: hosts.list
        path: /dev/rbd0                  # on each host
        ssh: true                        # gather host and device facts over ssh
    defaults: {ioengine: libaio, direct: 1, time_based: 1, runtime: 30s, ramp_time: 5s}
    repeat: 3
    workloads:
      - {rw: randread, bs: 4k, iodepth: [1, 32]}    # a list is a matrix axis
      - {name: seqwrite, rw: write, bs: 1m, iodepth: 8}

Workload keys are fio options used verbatim (plus ``name``). A list value is a matrix axis,
expanded as a cartesian product; each expanded workload gets a readable name such as
``randread-4k-qd32``. An existing fio job file is a suite with one workload: its sections,
unchanged.

Host setup and method (``tune``, ``pin``, ``drop_caches``, ``precondition``) are suite keys
too; see ``describe.tune``, ``facts.pinning`` and ``describe.method``; so is ``observe``
(``describe.observe``). A list under ``tune`` is an axis like any other: ``tune: {scheduler:
[mq-deadline, none]}`` runs every workload under both settings.

``passes: N`` runs every workload N times in a row over the same region (a cache's warm-up: see
``analyze.warmup``), and ``tiers:`` names the devices under a cache whose I/Os are counted
(``describe.tiers``).

This module loads suites and job files and applies the command line's changes; the dataclasses are
``describe.spec``'s, the schema ``describe.schema``'s, the expansion ``describe.matrix``'s. Errors name
the file, line and place: ``suite.yaml:12: workloads[2].bs: expected a size like 4k, got '4x'``
(``SuiteError``, exit code 2; ``describe.places``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path

from ..errors import SuiteError
from ..fio import jobfile
from ..remote import hosts as remote_hosts
from .matrix import check_matrix, expand_workloads
from .method import Method
from .observe import Observe
from .places import parse_yaml, place, yaml_lines
from .schema import TargetModel, check_passes, validated
from .spec import JobSpec, Suite, Target, Workload
from .tiers import Tier


def builtin_suites() -> dict[str, str]:
    """Built-in suite name -> YAML text (``quick``, ``cdm``, ...)."""
    folder = resources.files("iolab.describe") / "suites"
    return {p.name.removesuffix(".yaml"): p.read_text() for p in folder.iterdir() if p.name.endswith(".yaml")}


def load(ref: str) -> Suite:
    """Load a suite file, a fio job file (``.fio``/``.job``/``.ini`` or any non-YAML text), or a
    built-in suite by name.

    Raises ``SuiteError`` (file, line, place) for anything malformed or missing.
    """
    path = Path(ref)
    if path.is_file():
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SuiteError(f"{ref}: cannot read: {exc}") from exc
        if path.suffix in (".yaml", ".yml"):
            return load_yaml(text, source=ref, default_name=path.stem)
        return load_jobfile(text, source=ref)
    builtins = builtin_suites()
    if ref in builtins:
        return load_yaml(builtins[ref], source=f"builtin:{ref}", default_name=ref)
    raise SuiteError(
        f"{ref}: no such file or built-in suite",
        hint=f"built-in suites: {', '.join(sorted(builtins))}; or give a .yaml suite or a fio job file",
    )


def load_yaml(text: str, source: str, default_name: str = "suite") -> Suite:
    """Validate suite YAML ``text`` (see module docstring) and expand its matrix."""
    data = parse_yaml(text, source)
    if not isinstance(data, dict):
        raise SuiteError(f"{source}: expected a mapping with 'workloads' (and 'targets', 'defaults', 'repeat')")
    model = validated(data, source, text)
    targets = tuple(
        _target(name, t, source, text) for name, t in model.targets.items()
    )
    check_matrix(model.defaults, model.workloads, source, text)
    workloads = expand_workloads(model.defaults, model.workloads)
    return Suite(
        name=model.name or default_name, source=source, text=text, targets=targets,
        workloads=workloads, repeat=model.repeat, description=model.description, tune=model.tune,
        method=Method(pin=model.pin, drop_caches=model.drop_caches, precondition=model.precondition),
        observe=model.observe if "observe" in data else Observe(), passes=model.passes, tiers=model.tiers or (),
        lint_ignore=tuple(model.lint.ignore) if model.lint else (),
    )


def _target(name: str, model: TargetModel, source: str, text: str) -> Target:
    """A validated target; a ``hosts_file`` is read relative to the suite file's folder."""
    hosts = [remote_hosts.parse(h) for h in model.hosts or ()]
    if model.hosts_file is not None:
        base = Path(source).parent if not source.startswith(("<", "builtin:")) else Path.cwd()
        path = base / Path(model.hosts_file).expanduser()
        line = yaml_lines(text).get(("targets", name, "hosts_file"))
        where = f"{source}:{line}: targets.{name}.hosts_file" if line else f"{source}: targets.{name}.hosts_file"
        try:
            hosts = remote_hosts.read_file(path)
            remote_hosts.check_unique(hosts)
        except OSError as exc:
            raise SuiteError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise SuiteError(f"{where}: {exc}") from None
    size = None if model.size is None else str(model.size)
    return Target(name, model.path, size, hosts=tuple(hosts), ssh=model.ssh)


def load_jobfile(text: str, source: str) -> Suite:
    """An existing fio job file as a suite: one workload, its sections unchanged, no target.

    Targets come from ``--target`` (see ``with_targets``); without one, the job file's own
    ``filename``/``directory`` settings are used as they are.
    """
    base = Path(source).parent if source and not source.startswith("<") else None
    sections = jobfile.parse(text, source, base)
    name = Path(source).stem if source and not source.startswith("<") else "jobfile"
    workload = Workload(name=name, sections=sections, origin=source)
    return Suite(
        name=name, source=source, text=text, targets=(Target("jobfile", None),),
        workloads=(workload,), is_jobfile=True,
    )


def with_targets(suite: Suite, overrides: Mapping[str, str]) -> Suite:
    """The suite run on exactly the ``--target NAME=PATH`` targets given on the command line.

    A name the suite also defines keeps that target's other settings (size). An empty
    ``overrides`` leaves the suite as it is.
    """
    if not overrides:
        return suite
    known = {t.name: t for t in suite.targets}
    targets = tuple(
        replace(known[name], path=path) if name in known else Target(name, path)
        for name, path in overrides.items()
    )
    return replace(suite, targets=targets)


def with_method(suite: Suite, tune: Mapping[str, tuple[str, ...]] | None = None, pin: str | None = None) -> Suite:
    """The suite with ``--tune`` settings (replacing the suite's for the same keys; a key given
    several times is an axis) and ``--pin`` (replacing the suite's)."""
    if tune:
        suite = replace(suite, tune={**suite.tune, **tune})
    if pin:
        suite = replace(suite, method=replace(suite.method, pin=pin))
    return suite


#: Options ``--set`` cannot change: where fio does I/O is the targets' (``--target NAME=PATH``), so that the
#: safety checks and the fence see every place a job writes as a target.
NOT_SETTABLE = frozenset({"filename", "directory", "filename_format", "opendir", "unique_filename"})


def with_sets(suite: Suite, sets: Mapping[str, str | None]) -> Suite:
    """The suite with the fio options ``sets`` (``--set KEY=VALUE``; None: a bare option such as
    ``time_based``) in every job section of every workload, in place of the value the section, its
    ``[global]`` section or the suite's defaults gave; kept in ``Suite.overrides`` (stored with the run).
    fio judges names and values when the plan checks each job. Raises ``SuiteError`` for a location option."""
    if not sets:
        return suite
    if refused := sorted(set(sets) & NOT_SETTABLE):
        raise SuiteError(f"--set {refused[0]}: where fio does I/O is the target's", hint="use --target NAME=PATH")

    def section(s: jobfile.Section) -> jobfile.Section:
        if s.is_global:
            return s
        return replace(s, options=(*(o for o in s.options if o[0] not in sets), *sets.items()))

    workloads = tuple(replace(w, sections=tuple(map(section, w.sections))) for w in suite.workloads)
    return replace(suite, workloads=workloads, overrides={**suite.overrides, **sets})


def with_passes(suite: Suite, passes: int | None = None, tiers: Sequence[Tier] = ()) -> Suite:
    """The suite with ``--passes`` (replacing the suite's) and ``--tier`` devices (replacing the
    suite's of the same name). Raises ``SuiteError`` for a number of passes out of range."""
    if passes is not None:
        try:
            suite = replace(suite, passes=check_passes(passes))
        except ValueError as exc:
            raise SuiteError(f"--passes: {exc}") from None
    if tiers:
        named = {t.name: t for t in (*suite.tiers, *tiers)}
        suite = replace(suite, tiers=tuple(named.values()))
    return suite


def parse_target_args(args: Sequence[str]) -> dict[str, str]:
    """``["ssd=/mnt/ssd", "/dev/sdb"]`` -> ``{"ssd": "/mnt/ssd", "sdb": "/dev/sdb"}``.

    A bare path is named after its last component. Raises ``SuiteError`` for an empty name or
    path, or a name given twice.
    """
    out: dict[str, str] = {}
    for arg in args:
        name, sep, path = arg.partition("=")
        if not sep:
            name, path = Path(arg).name or arg, arg
        if not name or not path or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise SuiteError(f"--target {arg!r}: expected NAME=PATH with a name of letters, digits, '.', '_', '-'")
        if re.search(r"[\x00-\x1f\x7f]", path):
            raise SuiteError(f"--target {arg!r}: the path holds a control character")
        if name in out:
            raise SuiteError(f"--target {name} is given twice")
        out[name] = path
    return out


def option_place(suite: Suite, spec: JobSpec, job: str, key: str) -> str:
    """Where the fio option ``key`` of ``spec``'s job ``job`` is set, for error messages: ``suite.yaml:7:
    workloads[2].size`` (or ``defaults.size``, ``targets.ssd.size``); ``job.fio: [job1] size`` for a
    fio job file."""
    if suite.is_jobfile:
        return f"{suite.source}: [{job}] {key}"
    lines = yaml_lines(suite.text)
    index = int(m[1]) if (m := re.fullmatch(r"workloads\[(\d+)\]", spec.workload.origin)) else None
    for path in (("workloads", index, key), ("defaults", key), ("targets", spec.target.name, key)):
        if path in lines:
            return f"{suite.source}:{lines[path]}: {place(path, '')[0]}"
    return f"{suite.source}: {spec.workload.origin}.{key}"
