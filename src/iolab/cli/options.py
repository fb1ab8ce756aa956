"""Options several commands share, each declared once (sqlite-utils' shared-option decorators).

Some gather what they read into one value for the command, so that a command takes a few objects
instead of one parameter per option: ``run_options`` a ``run.plan.RunOptions``, ``suite_options``
a ``SuiteArgs`` (what changes a suite on the command line), ``naming_options`` a ``Naming`` (the
run's label and tags).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..errors import UsageError
from . import DURATION, FORMATS, parse_tags

if TYPE_CHECKING:
    from ..describe.spec import Target

F = TypeVar("F", bound=Callable[..., Any])


def _gathered(name: str, build: Callable[..., Any], options: Sequence[Callable[[F], F]]) -> Callable[[F], F]:
    """``options`` on a command, their values handed to it as one parameter ``name`` = ``build(**values)``."""
    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            values = {p: kwargs.pop(p) for p in params}
            return command(*args, **kwargs, **{name: build(**values)})

        before = len(getattr(wrapper, "__click_params__", []))
        for option in reversed(options):
            wrapper = option(wrapper)  # type: ignore[assignment]
        params = [p.name for p in wrapper.__click_params__[before:]]  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]
    return decorate


def format_option(choices: Sequence[str] = FORMATS, help: str | None = None) -> Callable[[F], F]:
    """``--format`` (``fmt``): how the command prints its results."""
    return click.option("--format", "fmt", type=click.Choice(tuple(choices)), default="table", show_default=True,
                        help=help)


def destroy_option(help: str = "Allow writes to this block device, destroying its contents (repeatable).",
                   ) -> Callable[[F], F]:
    """``--destroy DEVICE`` (``destroy``, a tuple): the devices the user lets iolab overwrite."""
    return click.option("--destroy", multiple=True, metavar="DEVICE", help=help)


def label_option(what: str = "run") -> Callable[[F], F]:
    """``--label``: a name for the run (or capture, replay …) the command stores."""
    return click.option("--label", help=f"A name for the {what}, usable wherever a run id is.")


def tag_option(what: str = "run") -> Callable[[F], F]:
    """``--tag KEY=VALUE`` (``tags``, a dict; ``UsageError`` for a tag without ``=``)."""
    return click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", help=f"Tag the {what} (repeatable).",
                        callback=lambda _ctx, _param, values: parse_tags(values))


@dataclass(frozen=True)
class Naming:
    """The run's name and tags as the command line gives them (``--label``, ``--tag``)."""

    label: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)


def naming_options(what: str = "run") -> Callable[[F], F]:
    """``--label`` and ``--tag``, handed to the command as ``named: Naming``."""
    return _gathered("named", Naming, (label_option(what), tag_option(what)))


quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="No plan and no progress on stderr: lint findings, errors and the results "
    "only. (Without a terminal, progress is a line per job start and end and every 10 s.)")


def _keep_db_wait(ctx: click.Context, _param: click.Parameter, value: float) -> float:
    ctx.ensure_object(dict)
    ctx.obj["db_wait"] = value  # read when the command opens the database (``cli.store_of``)
    return value


db_wait_option = click.option(
    "--db-wait", "db_wait", type=DURATION, metavar="DURATION", default="3m", show_default=True, expose_value=False,
    callback=_keep_db_wait, help="How long to wait out a results database that is away (restarting, locked, full) "
    "before the run stops; finished results wait in the spool for --resume.")


no_observe_option = click.option("--no-observe", is_flag=True, help="Observe no host (no node_exporter sampling).")


def _keep_db(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        ctx.ensure_object(dict)
        ctx.obj["db"] = value  # as `iolab --db`, read when the command opens the database (``cli.store_of``)
    return value


db_option = click.option("--db", metavar="URL", expose_value=False, callback=_keep_db,
                         help="Results database, as `iolab --db URL` (given here, it wins).")


def fio_command_options(what: str = "run") -> Callable[[F], F]:
    """What every command that runs fio takes, declared once: ``--label`` and ``--tag`` (``named``),
    ``-q``/``--quiet`` (``quiet``), ``--no-observe`` (``no_observe``), ``--db`` and ``--db-wait``."""
    def decorate(command: F) -> F:
        for option in reversed((naming_options(what), quiet_option, no_observe_option, db_option, db_wait_option)):
            command = option(command)
        return command
    return decorate


def run_options(*, fence_help: str = "Run fio without the fence (see `iolab run --help`).",
                exec_help: str = "Let the job run programs (exec_prerun ...), fenced.",
                keep_help: str = "Keep the scratch file fio created.",
                destroy_help: str = "Allow writes to this block device.") -> Callable[[F], F]:
    """``--destroy``, ``--keep-files``, ``--no-fence``, ``--allow-exec``, handed to the command as
    ``options: run.plan.RunOptions``."""
    def build(destroy: Sequence[str], keep_files: bool, no_fence: bool, allow_exec: bool) -> Any:
        from ..run.options import RunOptions  # only when the command runs: --help stays light
        return RunOptions(destroy=tuple(destroy), keep_files=keep_files, fence=not no_fence, allow_exec=allow_exec)

    return _gathered("options", build, (
        destroy_option(destroy_help),
        click.option("--keep-files", is_flag=True, help=keep_help),
        click.option("--no-fence", is_flag=True, help=fence_help),
        click.option("--allow-exec", is_flag=True, help=exec_help),
    ))


@dataclass(frozen=True)
class TargetArgs:
    """``-t NAME=PATH`` (``text``) with ``--host`` (repeatable) and ``--ssh``: the one target a workflow
    command (``saturate``, ``autotune``, ``crash-test``) measures, on this machine or on each host."""

    text: str
    hosts: tuple[str, ...] = ()
    ssh: bool = False

    def target(self, fio_options: Mapping[str, str]) -> Target:
        """The ``describe.spec.Target``, sized as a scratch file (``workflows.prober.DEFAULT_SIZE``)
        unless it is a block device (on hosts: a path under ``/dev/``) or ``fio_options`` set ``size``.
        Raises ``UsageError`` (a host that does not parse, a relative path on hosts, ``--ssh``
        without hosts)."""
        from ..describe import suite
        from ..describe.spec import Target
        from ..facts import targets
        from ..remote import hosts as host_specs
        from ..workflows.prober import DEFAULT_SIZE
        (name, path), = suite.parse_target_args([self.text]).items()
        try:
            specs = tuple(host_specs.parse(h) for h in self.hosts)
            host_specs.check_unique(list(specs))
        except ValueError as exc:
            raise UsageError(f"--host: {exc}") from None
        if specs and not path.startswith("/"):
            raise UsageError(f"--target {self.text}: with --host, give the absolute path on each host")
        if self.ssh and not specs:
            raise UsageError("--ssh gathers facts on remote hosts: give them with --host")
        block = path.startswith("/dev/") if specs else targets.inspect(os.path.abspath(path)).kind == "block"
        return Target(name, path, None if block or "size" in fio_options else DEFAULT_SIZE, hosts=specs, ssh=self.ssh)


def target_options(help: str) -> Callable[[F], F]:
    """``-t``/``--target``, ``--host`` and ``--ssh``, handed to the command as ``target: TargetArgs``."""
    return _gathered("target", lambda target_arg, hosts, ssh: TargetArgs(target_arg, tuple(hosts), ssh), (
        click.option("-t", "--target", "target_arg", required=True, metavar="NAME=PATH", help=help),
        click.option("--host", "hosts", multiple=True, metavar="HOST",
                     help="Run on this host (repeatable), the target's PATH being on each: ssh://[USER@]HOST[:PORT] "
                          "starts a fenced fio server there over ssh; HOST[:PORT] is a running fio server "
                          "(`iolab server start`)."),
        click.option("--ssh", is_flag=True, help="Check a fio server host's devices over ssh (needed to write "
                                                 "remote devices; ssh:// hosts always are)."),
    ))


@dataclass(frozen=True)
class SuiteArgs:
    """What the command line changes in a suite: ``--target`` (replacing the suite's targets),
    ``--repeat``, ``--tune``, ``--pin``, and for ``run`` the observers, ``--passes`` and ``--tier``."""

    targets: Sequence[str] = ()
    repeat: int | None = None
    tune: Sequence[str] = ()
    pin: str | None = None
    observe: Sequence[str] = ()
    no_observe: bool = False  # ``--no-observe`` of ``fio_command_options``, given by the command
    prometheus: str | None = None
    passes: int | None = None
    tiers: Sequence[str] = ()
    ignore_lint: Sequence[str] = ()
    sets: Sequence[str] = ()

    def given(self) -> bool:
        """Whether any was given (a resumed run takes none: its plan is stored)."""
        return self != SuiteArgs()

    def load(self, ref: str) -> Any:
        """The suite ``ref`` (``describe.suite.load``) as these arguments change it. Raises ``SuiteError``,
        ``UsageError``."""
        from ..describe import suite as suite_mod
        from ..describe.observe import with_args
        from ..describe.tune import parse_tune_args
        loaded = suite_mod.with_targets(suite_mod.load(ref), suite_mod.parse_target_args(self.targets))
        loaded = suite_mod.with_method(loaded, parse_tune_args(self.tune), self.pin)
        try:
            loaded = replace(loaded, observe=with_args(loaded.observe, self.observe, self.no_observe, self.prometheus))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        loaded = suite_mod.with_passes(loaded, self.passes, _tiers(self.tiers))
        loaded = suite_mod.with_sets(loaded, _sets(self.sets))
        if not self.ignore_lint:
            return loaded
        from ..describe.lintcodes import check_codes
        try:
            codes = check_codes(self.ignore_lint)
        except ValueError as exc:
            raise UsageError(f"--ignore-lint: {exc}") from None
        return replace(loaded, lint_ignore=tuple(dict.fromkeys((*loaded.lint_ignore, *codes))))


def _sets(args: Sequence[str]) -> dict[str, str | None]:
    """``--set KEY=VALUE`` values (``--set time_based``: a bare option) as options, the last of a key winning.
    Raises ``UsageError``."""
    out: dict[str, str | None] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        key = key.strip()
        if not key or any(c.isspace() for c in key) or key.startswith(("[", ";", "#")):
            raise UsageError(f"--set {arg!r}: expected a fio option KEY=VALUE such as runtime=30s")
        out[key] = value.strip() if sep else None
    return out


def _tiers(args: Sequence[str]) -> list[Any]:
    """``--tier NAME=DEVICE[@HOST]`` values as tiers. Raises ``UsageError``."""
    from ..describe.tiers import parse_tier
    out = []
    for arg in args:
        name, sep, device = arg.partition("=")
        try:
            if not sep:
                raise ValueError("expected NAME=DEVICE such as origin=/dev/sdb")
            out.append(parse_tier(name, device))
        except ValueError as exc:
            raise UsageError(f"--tier {arg!r}: {exc}") from None
    return out


_TUNE = ("Host tuning while jobs run, restored after each (repeatable; a key given twice is an axis): scheduler, "
         "rq_affinity, nomerges, nr_requests, read_ahead_kb, write_cache, governor.")
_LINT_TUNE = "Tuning as `run --tune` would apply it."
_PIN = "Pin fio to the CPUs of the device's blk-mq queues or NUMA node (cpus_allowed_policy=split)."
_LINT_PIN = "Pinning as `run --pin` would apply it."


def suite_options(*, lint: bool = False) -> Callable[[F], F]:
    """``--target``, ``--repeat``, ``--tune``, ``--pin``, ``--observe``, ``--prometheus``, ``--passes``,
    ``--tier`` (``run``), or for ``lint`` ``--target``, ``--tune`` and ``--pin`` alone, handed
    to the command as ``asked: SuiteArgs``."""
    target = "Lint for" if lint else "Run on"
    options = [
        click.option("-t", "--target", "targets", multiple=True, metavar="NAME=PATH",
                     help=f"{target} this file, directory or block device (repeatable); replaces the suite's "
                          "targets."),
        *(() if lint else (click.option("--repeat", type=click.IntRange(1, 1000),
                                        help="Repetitions of every job (default: the suite's)."),)),
        click.option("--tune", multiple=True, metavar="KEY=VALUE", help=_LINT_TUNE if lint else _TUNE),
        click.option("--pin", type=click.Choice(("mq", "numa")), help=_LINT_PIN if lint else _PIN),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Set this fio option in every job for this run, over the suite's or job file's "
                          "(repeatable; stored with the run): --set runtime=30s --set size=1g."),
        click.option("--ignore-lint", "ignore_lint", multiple=True, metavar="CODE",
                     help="Acknowledge this lint warning (P3, repeatable; as a suite's lint: {ignore: [P3]}): "
                          "stored with the run as acknowledged, not printed in full."),
    ]
    if not lint:
        options += [
            click.option("--observe", "observe", multiple=True, metavar="[NAME=]HOST:PORT",
                         help="Also watch this host's node_exporter (repeatable); local=HOST:PORT moves this host's "
                              "exporter."),
            click.option("--prometheus", metavar="URL",
                         help="Read the observers' series from this Prometheus server after each job instead of "
                              "scraping."),
            click.option("--passes", type=int, metavar="N", help="Run every job N times back to back over the same "
                         "region: a cache's warm-up curve (default: the suite's passes)."),
            click.option("--tier", "tiers", multiple=True, metavar="NAME=DEVICE[@HOST]",
                         help="Count the I/Os reaching this device under the cache per job (repeatable); "
                              "origin=DEVICE gives the hit ratio."),
        ]
    return _gathered("asked", SuiteArgs, options)
