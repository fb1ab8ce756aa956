"""Errors raised by the iolab library.

Library code never prints and never exits: it raises one of these. ``cli.main`` catches
``IolabError`` and prints ``Error: <message>`` and, when present, ``Hint: <hint>`` on stderr,
then exits with ``exit_code``; an error raised ``shown`` (a command has said it its own way, such
as a red line under the results) only sets the exit code. Exit codes come from these classes alone.

Exit codes: 0 ok, 1 runtime failure, 2 usage or suite error (or a refused plan), 3 a regression or a loss
of data the user asked to fail on, 130 interrupted.
"""

from __future__ import annotations


class IolabError(Exception):
    """Base class: a complete, user-facing message and an optional hint saying what to do next."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, *, shown: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.shown = shown


class UsageError(IolabError):
    """The command line or a referenced run/selector is wrong."""

    exit_code = 2


class SuiteError(IolabError):
    """A suite or fio job file is malformed; the message names the file and the place."""

    exit_code = 2


class FioNotFound(IolabError):
    """fio is not installed."""


class FioError(IolabError):
    """fio could not be started or produced no usable output."""


class ParseError(IolabError):
    """A fio output could not be parsed; the message names the file and what was expected."""


class SafetyError(IolabError):
    """A job would destroy data or run somewhere it must not; refused before fio starts. Exit code 2,
    as ``iolab lint`` exits for the same refusal: the plan is wrong, nothing failed at run time."""

    exit_code = 2


class StoreError(IolabError):
    """The results database cannot be opened or does not hold what was asked for."""


class RunFailed(IolabError):
    """Some jobs of a run failed, or hosts were lost mid-run (a partial run); the results are stored."""


class PlanRefused(IolabError):
    """A plan holds errors (a destructive write, a job fio rejects): ``iolab lint`` exits 2 for them, as
    ``iolab run`` refuses them before fio starts."""

    exit_code = 2


class RegressionFound(IolabError):
    """A comparison found a significant regression past the user's threshold."""

    exit_code = 3


class DataLost(IolabError):
    """A crash test lost acknowledged writes and the user asked to fail on it (``--fail-on-loss``)."""

    exit_code = 3


class Interrupted(IolabError):
    """The user pressed Ctrl-C (or iolab got SIGTERM); finished results are kept."""

    exit_code = 130


class HostError(IolabError):
    """A remote host cannot be used: unreachable, no fio server, another fio version, lost mid-run.

    The message names the host and the cause.
    """
