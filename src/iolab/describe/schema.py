"""A suite file's schema, validated once at the boundary (pydantic): every key and fio value checked
with a message that names the place (``suite.yaml:12: workloads[2].bs: expected a size like 4k``).
fio's own ``--parse-only`` checks every option later (``runner.local.check_job``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .. import units
from ..errors import SuiteError
from ..facts import pinning
from ..remote import hosts as remote_hosts
from .method import Precondition, check_precondition
from .observe import Observe, check_observe
from .places import place, yaml_lines
from .tiers import Tier, check_tiers
from .tune import check_tune

FioValue = str | int | float | bool | None

RW_VALUES = ("read", "write", "trim", "randread", "randwrite", "randtrim", "rw", "readwrite", "randrw",
             "trimwrite", "randtrimwrite")


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


class TargetModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(None, description=(
        "a file (created when missing), a directory (fio makes its files inside) or a block device; with "
        "hosts, the path on each host"))
    size: str | int | None = Field(None, description="a fio size used when a workload sets none (64g)")
    hosts: list[str] | None = Field(None, description=(
        "run on all these hosts at once: ssh://USER@HOST, or HOST[:PORT] of a fio server"))
    hosts_file: str | None = Field(None, description="a file of hosts, one a line (relative to the suite file)")
    ssh: bool = Field(False, description="gather each host's facts over ssh (implied by ssh:// hosts)")

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
    def _remote(self) -> TargetModel:
        if self.hosts is not None and self.hosts_file is not None:
            raise ValueError("give hosts or hosts_file, not both")
        remote = self.hosts is not None or self.hosts_file is not None
        if self.ssh and not remote:
            raise ValueError("ssh: true needs hosts (or hosts_file): it gathers facts on remote hosts")
        if remote and not (self.path and self.path.startswith("/")):
            raise ValueError("a target with hosts needs path: the absolute path of the file, directory or "
                             "device on each host")
        return self


class LintModel(BaseModel):
    """``lint: {ignore: [P3, P4]}``: warnings acknowledged for this suite (``check.acknowledge``)."""
    model_config = ConfigDict(extra="forbid")
    ignore: list[str] = Field(default_factory=list, description=(
        "lint warnings acknowledged: stored with the run as such, not printed in full"))

    @field_validator("ignore")
    @classmethod
    def _codes(cls, v: list[str]) -> list[str]:
        from .lintcodes import check_codes
        return list(check_codes(v))


class SuiteModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, description="the suite's name [default: the file's name]")
    description: str = Field("", description="free text, shown with the suite")
    targets: dict[str, TargetModel] = Field(default_factory=dict, description=(
        "NAME: PATH, or NAME: {a target's keys, below}; --target NAME=PATH replaces them"))
    defaults: dict[str, Any] = Field(default_factory=dict, description=(
        "fio options for every workload, verbatim (null: a flag without value)"))
    workloads: list[dict[str, Any]] = Field(min_length=1, description=(
        "one mapping of fio options per workload, verbatim; a list of values is a matrix axis (iodepth: [1, "
        "32]); name: optional"))
    repeat: int = Field(default=1, ge=1, le=1000, description="repetitions of every job, 1 to 1000")
    tune: dict[str, Any] = Field(default_factory=dict, description=(
        "host tuning while jobs run, restored after each: scheduler, rq_affinity, nomerges, nr_requests, "
        "read_ahead_kb, write_cache, governor, cpu_dma_latency (µs, held for the job) (a list is an axis)"))
    pin: str | None = Field(None, description="mq or numa: fio on the CPUs of the device's blk-mq queues or NUMA node")
    drop_caches: bool = Field(False, description="sync and drop the page cache before every job")
    precondition: Any = Field(None, description=(
        "{fill: 2x, bs: 128k, rounds: 25, round_time: 60s, track: iops}: fill the region, then rounds until "
        "steady state"))
    observe: Any = Field(None, description=(
        "{port, local, hosts, prometheus}: whose node_exporter is sampled; false: nobody's"))
    passes: Any = Field(1, description=(
        "every job N times back to back over the same region (a cache's warm-up curve), 1 to 1000"))
    tiers: Any = Field(None, description=(
        "NAME: DEVICE[@HOST]: devices under a cache whose I/Os are counted per job (origin: the hit ratio)"))
    lint: LintModel | None = Field(None, description=(
        "{ignore: [P3, ...]}: lint warnings acknowledged (iolab help lint)"))

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


def unknown_key(key: str, model: type[BaseModel]) -> str:
    """What to say of ``key``, which ``model`` does not have (pydantic says "Extra inputs are not
    permitted"): the closest key it has, and all of them."""
    import difflib
    keys = list(model.model_fields)
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    guess = f"; did you mean `{close[0]}`?" if close else ""
    what = {TargetModel: "a target", LintModel: "lint"}.get(model, "a suite")
    return f"unknown key{guess} ({what} has: {', '.join(keys)})"


def validation_error(source: str, text: str, exc: ValidationError) -> SuiteError:
    lines = yaml_lines(text)
    messages = []
    for err in exc.errors():
        msg, loc = str(err["msg"]).removeprefix("Value error, "), err["loc"]
        if loc[-1:] == ("[key]",):  # a key that is not text: YAML read `true:` or `5:` as a bool or a number
            loc, msg = loc[:-2], f"key {err['input']!r}: expected text (a name; quote it)"
        elif err["type"] == "extra_forbidden":
            model = (TargetModel if loc[:1] == ("targets",) and len(loc) == 3 else
                     LintModel if loc[:1] == ("lint",) and len(loc) == 2 else SuiteModel)
            msg = unknown_key(str(loc[-1]), model)
        where, path = place(loc, msg)
        if where and ": " in msg and msg.split(": ", 1)[0] in where:
            msg = msg.split(": ", 1)[1]
        line = next((lines[path[:n]] for n in range(len(path), -1, -1) if path[:n] in lines), None)
        prefix = f"{source}:{line}" if line else source
        messages.append(f"{prefix}: {where}: {msg}" if where else f"{prefix}: {msg}")
    return SuiteError("\n".join(messages), hint="fix the suite file; fio options are used verbatim")


def check_passes(value: Any) -> int:
    """A number of warm-up passes: a whole number 1..1000. Raises ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
        raise ValueError(f"expected a whole number of passes 1..1000, got {value!r}")
    return value


def validated(data: Mapping[str, Any], source: str, text: str) -> SuiteModel:
    """A suite document (parsed YAML ``data`` of ``text``) as the schema reads it. Raises ``SuiteError``
    naming ``source``, the line and the place of every problem."""
    try:
        return SuiteModel.model_validate(data)
    except ValidationError as exc:
        raise validation_error(source, text, exc) from None
