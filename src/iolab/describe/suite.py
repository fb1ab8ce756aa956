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
too; see ``tuning``, ``pinning`` and ``method``; so is ``observe`` (``observe.config``). A list under
``tune`` is an axis like any other: ``tune: {scheduler: [mq-deadline, none]}`` runs every workload under both settings.

``passes: N`` runs every workload N times in a row over the same region (a cache's warm-up: see
``warmup``), and ``tiers:`` names the devices under a cache whose I/Os are counted (``tiers``).

Errors name the file, line and place: ``suite.yaml:12: workloads[2].bs: expected a size like
4k, got '4x'`` (``SuiteError``, exit code 2).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import units
from ..errors import SuiteError
from ..facts import pinning
from ..fio import jobfile
from ..fio.jobfile import Option, Section
from ..remote import hosts as remote_hosts
from ..remote.hosts import HostSpec
from .method import Method, Precondition, check_precondition
from .observe import Observe, check_observe
from .tiers import Tier, check_tiers
from .tune import check_tune
from .tune import label as tuning_label

FioValue = str | int | float | bool | None
RW_VALUES = ("read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite", "randrw",
             "trimwrite", "randtrimwrite")


@dataclass(frozen=True)
class Target:
    """A named place to run workloads on.

    ``path`` is a file (created when missing), a directory (fio makes its files inside) or a
    block device; ``None`` for a job file that names its own files. ``size`` is a fio size
    (``8g``) used when a workload sets none.

    With ``hosts`` the target is remote: every workload runs on all hosts at once through fio's
    client/server mode, ``path`` being the file, directory or device on each host (absolute;
    a path ending in ``/`` is a directory). ``ssh`` asks iolab to gather host and target facts
    on every host with the system ssh client (``remote.facts``).
    """

    name: str
    path: str | None
    size: str | None = None
    hosts: tuple[HostSpec, ...] = ()
    ssh: bool = False


@dataclass(frozen=True)
class Workload:
    """One expanded workload: fio job sections without any location option.

    ``origin`` names where it came from for error messages (``workloads[2]``).
    """

    name: str
    sections: tuple[Section, ...]
    origin: str


@dataclass(frozen=True)
class Suite:
    """A validated suite: what the file said, expanded to concrete workloads."""

    name: str
    source: str
    text: str
    targets: tuple[Target, ...]
    workloads: tuple[Workload, ...]
    repeat: int = 1
    description: str = ""
    is_jobfile: bool = False
    tune: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    method: Method = field(default_factory=Method)
    observe: Observe = field(default_factory=Observe)
    passes: int = 1
    tiers: tuple[Tier, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """One workload on one target: a single fio invocation (before repetition).

    ``tune`` holds the host settings in force while it runs (``tuning``); with a tuning axis
    the workload's name carries the setting (``randread-4k-qd32-sched_none``).
    """

    target: Target
    workload: Workload
    tune: Mapping[str, str] = field(default_factory=dict)

    @property
    def sections(self) -> tuple[Section, ...]:
        return self.workload.sections


@dataclass(frozen=True)
class PlannedJob:
    """A JobSpec at its place in the run: ``seq`` orders the plan, ``repeat`` counts from 0;
    ``pass_index`` is the warm-up pass (1..N) of a suite with ``passes``, 0 without."""

    seq: int
    spec: JobSpec
    repeat: int
    pass_index: int = 0


# ---------------------------------------------------------------------------------------------
# Validation at the file boundary


def _check_size(value: str) -> None:
    for part in re.split(r"[,:-]", value):  # bs=4k,64k (per direction), bsrange=1k-4k
        if part:
            units.parse_size(part)


def _check_size_or_percent(value: str) -> None:
    if not value.endswith("%"):
        units.parse_size(value)


def _check_positive_int(value: str) -> None:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"expected a whole number >= 1, got {value!r}")


def _check_percent(value: str) -> None:
    if not value.isdigit() or not 0 <= int(value) <= 100:
        raise ValueError(f"expected a percentage 0..100, got {value!r}")


def _check_rw(value: str) -> None:
    if value.split(":", 1)[0] not in RW_VALUES:
        raise ValueError(f"expected one of {', '.join(RW_VALUES)}, got {value!r}")


def _check_bool(value: str) -> None:
    if value not in ("0", "1"):
        raise ValueError(f"expected 0 or 1 (or true/false), got {value!r}")


def _check_duration(value: str) -> None:
    units.parse_duration_us(value)


#: What iolab checks itself, with messages that name the place; fio's own ``--parse-only``
#: checks every option later (see ``runner.local.check_job``).
_OPTION_CHECKS = {
    "bs": _check_size, "blocksize": _check_size, "bsrange": _check_size, "size": _check_size_or_percent,
    "io_size": _check_size_or_percent, "offset": _check_size_or_percent, "iodepth": _check_positive_int,
    "numjobs": _check_positive_int, "nrfiles": _check_positive_int, "rw": _check_rw, "readwrite": _check_rw,
    "rwmixread": _check_percent, "rwmixwrite": _check_percent, "direct": _check_bool,
    "time_based": _check_bool, "runtime": _check_duration, "ramp_time": _check_duration,
}


def fio_value(value: FioValue) -> str | None:
    """A YAML scalar as fio text: ``True`` -> ``1``, ``None`` -> a flag without value."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in options.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(key)):
            raise ValueError(f"{key!r} is not a fio option name")
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            raise ValueError(f"{key}: an empty list gives no workload")
        for v in values:
            if isinstance(v, dict | list):
                raise ValueError(f"{key}: expected a fio value (text or number), got {type(v).__name__}")
            text = fio_value(v)
            if text is not None and re.search(r"[\x00-\x1f\x7f]", text):
                raise ValueError(f"{key}: {text!r} holds a control character, which would start another line of "
                                 "the fio job file")
            check = _OPTION_CHECKS.get(key)
            if check is not None and v is not None:
                try:
                    check(fio_value(v) or "")
                except ValueError as exc:
                    raise ValueError(f"{key}: {exc}") from None
    return dict(options)


class _TargetModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = None
    size: str | int | None = None
    hosts: list[str] | None = None
    hosts_file: str | None = None
    ssh: bool = False

    @field_validator("size")
    @classmethod
    def _size(cls, v: str | int | None) -> str | None:
        if v is None:
            return None
        _check_size_or_percent(str(v))
        return str(v)

    @field_validator("hosts")
    @classmethod
    def _hosts(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        if not v:
            raise ValueError("an empty list names no host")
        parsed = []
        for i, text in enumerate(v):
            try:
                parsed.append(remote_hosts.parse(text))
            except ValueError as exc:
                raise ValueError(f"[{i}]: {exc}") from None
        remote_hosts.check_unique(parsed)
        return v

    @model_validator(mode="after")
    def _remote(self) -> _TargetModel:
        if self.hosts is not None and self.hosts_file is not None:
            raise ValueError("give hosts or hosts_file, not both")
        remote = self.hosts is not None or self.hosts_file is not None
        if self.ssh and not remote:
            raise ValueError("ssh: true needs hosts (or hosts_file): it gathers facts on remote hosts")
        if remote and not (self.path and self.path.startswith("/")):
            raise ValueError("a target with hosts needs path: the absolute path of the file, directory or "
                             "device on each host")
        return self


class _SuiteModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    description: str = ""
    targets: dict[str, _TargetModel] = Field(default_factory=dict)
    defaults: dict[str, Any] = Field(default_factory=dict)
    workloads: list[dict[str, Any]] = Field(min_length=1)
    repeat: int = Field(default=1, ge=1, le=1000)
    tune: dict[str, Any] = Field(default_factory=dict)
    pin: str | None = None
    drop_caches: bool = False
    precondition: Any = None
    observe: Any = None
    passes: Any = 1
    tiers: Any = None

    @field_validator("passes")
    @classmethod
    def _passes(cls, v: Any) -> int:
        return check_passes(v)

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, v: Any) -> tuple[Tier, ...]:
        return check_tiers(v)

    @field_validator("observe")
    @classmethod
    def _observe(cls, v: Any) -> Observe:
        return check_observe(v)

    @field_validator("tune")
    @classmethod
    def _tune(cls, v: dict[str, Any]) -> dict[str, tuple[str, ...]]:
        return check_tune(v)

    @field_validator("pin")
    @classmethod
    def _pin(cls, v: str | None) -> str | None:
        return None if v is None else pinning.check_mode(v)

    @field_validator("precondition")
    @classmethod
    def _precondition(cls, v: Any) -> Precondition | None:
        return None if v is None else check_precondition(v)

    @field_validator("defaults")
    @classmethod
    def _defaults(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_options(v)

    @field_validator("workloads")
    @classmethod
    def _workloads(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, w in enumerate(v):
            options = {k: val for k, val in w.items() if k != "name"}
            if "name" in w and not isinstance(w["name"], str):
                raise ValueError(f"[{i}].name: expected text")
            try:
                _check_options(options)
            except ValueError as exc:
                raise ValueError(f"[{i}].{exc}") from None
        return v

    @field_validator("targets", mode="before")
    @classmethod
    def _target_paths(cls, v: Any) -> Any:
        """``ssd: /mnt/ssd`` is short for ``ssd: {path: /mnt/ssd}``."""
        if isinstance(v, dict):
            return {k: t if isinstance(t, dict) else {"path": t} for k, t in v.items()}
        return v

    @field_validator("targets")
    @classmethod
    def _target_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                raise ValueError(f"{name!r}: a target name uses letters, digits, '.', '_' and '-'")
        return v


def _yaml_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map each place in the YAML document (``("workloads", 2, "bs")``) to its line number."""
    try:
        root = yaml.compose(text)
    except (yaml.YAMLError, RecursionError):
        return {}
    return _node_lines(root)[0] if root is not None else {}


def _node_lines(root: yaml.Node) -> tuple[dict[tuple[Any, ...], int], list[tuple[tuple[Any, ...], int, int]]]:
    """The line of each place under ``root``, and the keys a mapping gives twice: (place, first line,
    second line). A node an alias repeats is walked once (``&a``/``*a`` can repeat one node
    exponentially often)."""
    lines: dict[tuple[Any, ...], int] = {}
    twice: list[tuple[tuple[Any, ...], int, int]] = []
    seen: set[int] = set()
    todo: list[tuple[yaml.Node, tuple[Any, ...]]] = [(root, ())]
    while todo:  # iterative: a deeply nested document must not exhaust Python's stack here
        node, path = todo.pop()
        lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key, value in node.value:
                line = key.start_mark.line + 1
                if isinstance(key, yaml.ScalarNode) and key.value in first:
                    twice.append(((*path, key.value), first[key.value], line))
                first.setdefault(key.value if isinstance(key, yaml.ScalarNode) else id(key), line)
                lines.setdefault((*path, key.value), line)
                todo.append((value, (*path, key.value)))
        elif isinstance(node, yaml.SequenceNode):
            todo.extend((item, (*path, i)) for i, item in enumerate(node.value))
    return lines, twice


def _place(loc: Sequence[Any], msg: str) -> tuple[str, tuple[Any, ...]]:
    """Turn pydantic's location plus our ``[2].bs: ...`` message prefix into ``workloads[2].bs``."""
    path = [p for p in loc if p not in ("str", "_TargetModel")]
    match = re.match(r"^((?:\[\d+\]|\.?[A-Za-z_][A-Za-z0-9_]*)+): (.*)$", msg, re.S)
    if match and (match.group(1).startswith("[") or path[-1:] in (["defaults"], ["tune"], ["precondition"],
                                                                   ["observe"], ["tiers"])):
        for part in re.findall(r"\[(\d+)\]|([A-Za-z_][A-Za-z0-9_]*)", match.group(1)):
            path.append(int(part[0]) if part[0] else part[1])
        msg = match.group(2)
    text = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path))
    return text, tuple(path)


def _validation_error(source: str, text: str, exc: ValidationError) -> SuiteError:
    lines = _yaml_lines(text)
    messages = []
    for err in exc.errors():
        msg, loc = str(err["msg"]).removeprefix("Value error, "), err["loc"]
        if loc[-1:] == ("[key]",):  # a key that is not text: YAML read `true:` or `5:` as a bool or a number
            loc, msg = loc[:-2], f"key {err['input']!r}: expected text (a name; quote it)"
        where, path = _place(loc, msg)
        if where and ": " in msg and msg.split(": ", 1)[0] in where:
            msg = msg.split(": ", 1)[1]
        line = next((lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in lines), None)
        prefix = f"{source}:{line}" if line else source
        messages.append(f"{prefix}: {where}: {msg}" if where else f"{prefix}: {msg}")
    return SuiteError("\n".join(messages), hint="fix the suite file; fio options are used verbatim")


# ---------------------------------------------------------------------------------------------
# Loading


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
    data = _parse_yaml(text, source)
    if not isinstance(data, dict):
        raise SuiteError(f"{source}: expected a mapping with 'workloads' (and 'targets', 'defaults', 'repeat')")
    try:
        model = _SuiteModel.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(source, text, exc) from None
    targets = tuple(
        _target(name, t, source, text) for name, t in model.targets.items()
    )
    _check_matrix(model.defaults, model.workloads, source, text)
    workloads = _expand_workloads(model.defaults, model.workloads)
    return Suite(
        name=model.name or default_name, source=source, text=text, targets=targets,
        workloads=workloads, repeat=model.repeat, description=model.description, tune=model.tune,
        method=Method(pin=model.pin, drop_caches=model.drop_caches, precondition=model.precondition),
        observe=model.observe if "observe" in data else Observe(), passes=model.passes, tiers=model.tiers or (),
    )


def _parse_yaml(text: str, source: str) -> Any:
    """The YAML document in ``text``. Raises ``SuiteError`` naming the line for invalid YAML, a key
    given twice in one mapping (YAML's loaders would keep the last silently), or nesting too deep to
    be a suite."""
    depth, line = _flow_depth(text)
    if depth > MAX_DEPTH:
        raise _too_deep(source, line)
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None
        lines, twice = _node_lines(root)
        if twice:
            path, first, second = twice[0]
            where, _ = _place(path, "")
            raise SuiteError(f"{source}:{second}: {where}: given twice (lines {first} and {second})",
                             hint="give each key once; YAML keeps only the last")
        if len(lines) > MAX_PLACES:
            raise SuiteError(f"{source}: {len(lines)} values; a suite has at most {MAX_PLACES}")
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else text.count("\n", 0, getattr(exc, "position", 0)) + 1
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).split("\n")[0]
        raise SuiteError(f"{source}:{line}: not valid YAML: {problem}") from None
    except RecursionError:
        raise _too_deep(source, _flow_depth(text)[1]) from None
    finally:
        if loader is not None:
            loader.dispose()


def _flow_depth(text: str) -> tuple[int, int]:
    """How deep ``[`` and ``{`` nest outside quotes and comments, and the line where that depth is first
    reached. A cheap look before parsing: PyYAML's scanner slows down quadratically with the depth."""
    depth = deepest = at = 0
    quote = ""
    for i, char in enumerate(text):
        if quote:
            if char == quote or char == "\n":
                quote = ""
        elif char in "'\"#":
            quote = "\n" if char == "#" else char
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, i
        elif char in "]}":
            depth -= 1
    return deepest, text.count("\n", 0, at) + 1


def _too_deep(source: str, line: int) -> SuiteError:
    return SuiteError(f"{source}:{line}: nested too deeply to be a suite",
                      hint="a suite nests a few levels (workloads, a list of options, a list of values)")


#: The most values a suite file may hold, the deepest its ``[``/``{`` may nest, and the most workloads it
#: may expand to: well above any real suite, far below what would make reading or planning it slow.
MAX_PLACES = 100_000
MAX_DEPTH = 32
MAX_WORKLOADS = 10_000


def _check_matrix(defaults: Mapping[str, Any], raw: Sequence[Mapping[str, Any]], source: str, text: str) -> None:
    """Refuse a matrix that expands to more than ``MAX_WORKLOADS`` workloads, naming the workload."""
    total = 0
    for index, w in enumerate(raw):
        merged = {**defaults, **{k: v for k, v in w.items() if k != "name"}}
        axes = {k: len(v) for k, v in merged.items() if isinstance(v, list)}
        count = math.prod(axes.values())
        total += count
        if total > MAX_WORKLOADS:
            line = _yaml_lines(text).get(("workloads", index))
            where = f"{source}:{line}" if line else source
            sizes = f" ({' × '.join(axes)}: {' × '.join(map(str, axes.values()))})" if axes else ""
            raise SuiteError(f"{where}: workloads[{index}]: expands to {count} workloads{sizes}; at most "
                             f"{MAX_WORKLOADS} in a suite", hint="split the sweep into several suites")


def _target(name: str, model: _TargetModel, source: str, text: str) -> Target:
    """A validated target; a ``hosts_file`` is read relative to the suite file's folder."""
    hosts = [remote_hosts.parse(h) for h in model.hosts or ()]
    if model.hosts_file is not None:
        base = Path(source).parent if not source.startswith(("<", "builtin:")) else Path.cwd()
        path = base / Path(model.hosts_file).expanduser()
        line = _yaml_lines(text).get(("targets", name, "hosts_file"))
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


def option_place(suite: Suite, spec: JobSpec, job: str, key: str) -> str:
    """Where the fio option ``key`` of ``spec``'s job ``job`` is set, for error messages: ``suite.yaml:7:
    workloads[2].size`` (or ``defaults.size``, ``targets.ssd.size``); ``job.fio: [job1] size`` for a
    fio job file."""
    if suite.is_jobfile:
        return f"{suite.source}: [{job}] {key}"
    lines = _yaml_lines(suite.text)
    index = int(m[1]) if (m := re.fullmatch(r"workloads\[(\d+)\]", spec.workload.origin)) else None
    for path in (("workloads", index, key), ("defaults", key), ("targets", spec.target.name, key)):
        if path in lines:
            return f"{suite.source}:{lines[path]}: {_place(path, '')[0]}"
    return f"{suite.source}: {spec.workload.origin}.{key}"


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


def check_passes(value: Any) -> int:
    """A number of warm-up passes: a whole number 1..1000. Raises ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ValueError(f"expected a whole number of passes 1..1000, got {value!r}")
    return value


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


# ---------------------------------------------------------------------------------------------
# Expansion


_SHORT = {"rwmixread": "r", "rwmixwrite": "w", "numjobs": "j", "iodepth": "qd"}


def _label(key: str, value: str | None) -> str:
    text = "on" if value is None else value
    if key in ("rw", "readwrite", "bs", "blocksize", "ioengine"):
        return text
    return f"{_SHORT.get(key, key)}{text}"


def _name_for(given: str | None, options: Mapping[str, str | None], axes: Sequence[str]) -> str:
    if given:
        parts = [given, *(_label(k, options[k]) for k in axes)]
    else:
        rw = options.get("rw") or options.get("readwrite") or "read"
        bs = options.get("bs") or options.get("blocksize") or "4k"
        parts = [rw, bs, f"qd{options.get('iodepth') or 1}"]
        if options.get("numjobs") not in (None, "1"):
            parts.append(f"j{options['numjobs']}")
        shown = {"rw", "readwrite", "bs", "blocksize", "iodepth", "numjobs"}
        parts += [_label(k, options[k]) for k in axes if k not in shown]
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", "-".join(str(p).replace(":", "_") for p in parts))


def _expand_workloads(defaults: Mapping[str, Any], raw: Sequence[Mapping[str, Any]]) -> tuple[Workload, ...]:
    out: list[Workload] = []
    seen: dict[str, int] = {}
    for index, w in enumerate(raw):
        merged = {**defaults, **{k: v for k, v in w.items() if k != "name"}}
        axes = [k for k, v in merged.items() if isinstance(v, list)]
        for combo in itertools.product(*(merged[k] for k in axes)):
            chosen = dict(zip(axes, combo, strict=True))
            options = {k: fio_value(chosen.get(k, v)) for k, v in merged.items()}
            name = _name_for(w.get("name"), options, axes)
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:
                name = f"{name}-{seen[name]}"
            section = Section(name, tuple((k, v) for k, v in options.items()))
            out.append(Workload(name=name, sections=(section,), origin=f"workloads[{index}]"))
    return tuple(out)


def plan(suite: Suite, repeat: int | None = None) -> list[PlannedJob]:
    """Every (target, workload, repetition) in run order.

    Repetitions are interleaved (all jobs once, then all again) so slow drift of the device
    (thermal, SLC cache, background GC) spreads over every job instead of biasing one. A suite
    with ``passes`` runs each job's passes back to back (a warm-up must not be interrupted by other
    jobs on the same target); the repetitions of the whole sequence are interleaved as above.
    """
    rounds = repeat if repeat is not None else suite.repeat
    specs = [JobSpec(t, tuned, tune) for t in suite.targets for w in suite.workloads
             for tuned, tune in _tunings(w, suite.tune)]
    passes = range(1, suite.passes + 1) if suite.passes > 1 else (0,)
    jobs: list[PlannedJob] = []
    for r in range(rounds):
        for spec in specs:
            for p in passes:
                jobs.append(PlannedJob(seq=len(jobs), spec=spec, repeat=r, pass_index=p))
    return jobs


def _tunings(workload: Workload, tune: Mapping[str, tuple[str, ...]]) -> list[tuple[Workload, dict[str, str]]]:
    """``workload`` under every combination of the tuning values, adjacent in the plan so the
    results of one workload show side by side. An axis (several values) adds its label to the
    name, and to the section name when that is the workload's own; fio options stay equal."""
    keys = list(tune)
    axes = [k for k in keys if len(tune[k]) > 1]
    out = []
    for combo in itertools.product(*(tune[k] for k in keys)):
        chosen = dict(zip(keys, combo, strict=True))
        if not axes:
            out.append((workload, chosen))
            continue
        name = "-".join([workload.name, *(tuning_label(k, chosen[k]) for k in axes)])
        name = re.sub(r"[^A-Za-z0-9_.+-]", "_", name)
        sections = tuple(replace(s, name=name) if s.name == workload.name else s for s in workload.sections)
        out.append((replace(workload, name=name, sections=sections), chosen))
    return out


# ---------------------------------------------------------------------------------------------
# Rendering


def location_options(kind: str, path: str) -> tuple[Option, ...]:
    """Where fio puts its I/O for a target of ``kind`` (``targets.inspect``): a directory gets
    ``directory=``, anything else ``filename=``. fio treats ``:`` in a file name as a list
    separator, so it is escaped (HOWTO ``filename``)."""
    escaped = path.replace(":", "\\:")
    return (("directory", escaped),) if kind == "directory" else (("filename", escaped),)


def job_sections(spec: JobSpec, kind: str | None, extra: Sequence[Option] = ()) -> tuple[Section, ...]:
    """The sections fio runs for ``spec`` on a target of ``kind``.

    A suite workload gets the location first, then the target's size unless the workload sets
    one, then ``extra`` (run-time options such as logs). A job file gets a leading ``[global]``
    with the location, and its own global ``filename``/``directory`` are dropped so the target
    applies; job sections that name their own files keep them.
    """
    target = spec.target
    location = location_options(kind or "file", target.path) if target.path else ()
    sections = spec.sections
    if len(sections) == 1 and not sections[0].is_global:
        (section,) = sections
        own = dict(section.options)
        size: tuple[Option, ...] = ()
        if target.size and "size" not in own:
            size = (("size", target.size),)
        kept = tuple((k, v) for k, v in section.options if k not in ("filename", "directory") or not location)
        return (Section(section.name, (*location, *kept, *size, *extra)),)
    cleaned = tuple(
        Section(s.name, tuple((k, v) for k, v in s.options if not (s.is_global and location and
                                                                   k in ("filename", "directory"))))
        for s in sections
    )
    head = Section("global", (*location, *extra)) if location or extra else None
    return ((head,) if head else ()) + cleaned


def render_job(spec: JobSpec, kind: str | None, extra: Sequence[Option] = ()) -> str:
    """The complete job file iolab hands to fio for ``spec`` (deterministic)."""
    header = [f"iolab: workload {spec.workload.name} on target {spec.target.name}"]
    if spec.target.path:
        header.append(f"target path: {spec.target.path} ({kind})")
    return jobfile.render(job_sections(spec, kind, extra), header)
