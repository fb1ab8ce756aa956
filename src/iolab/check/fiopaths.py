"""The paths fio will open for a job file, read the way fio reads it, and the commands it would run.

The static guard (``safety``) checks every device found here before anything starts, and the fence
(``runner.fence``) binds exactly what was checked. fio's rules followed (fio 3.x ``init.c``,
``filesetup.c``, ``options.c``, HOWTO "Job file format", "Environment variables"):

* every section whose name starts with ``global`` applies to the jobs after it, and any line that
  starts with ``include`` is an include (``jobfile.parse``);
* ``filename`` values are ``:``-separated lists (``\\:`` escapes a colon), and every
  ``filename=`` line of a job and of the global sections before it adds files (``add_file``);
* ``directory`` (also a ``:`` list) is put in front of every file name, absolute or not;
* without ``filename``: a job named after an existing non-regular file (``[/dev/sda]``) uses it
  (``exists_and_not_regfile``), otherwise fio makes ``nrfiles`` names from ``filename_format``
  (default ``$jobname.$jobnum.$filenum``) for each of ``numjobs`` clones;
* ``${VAR}`` is fio's environment (the same as iolab's), ``$ncpus``, ``$pagesize``,
  ``$mb_memory`` are fio's keywords;
* ``replay_redirect`` sends an iolog's I/O to one device; an iolog (``read_iolog``, version 2 or
  3 text) names its files in ``FILE add|open`` lines; log, iolog and verify-state names are
  written too (``write_*_log``, ``write_iolog``, ``verify_state_save`` by the job's name).

Relative names resolve in fio's working directory, which is iolab's work directory of the job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import SafetyError
from ..fio import jobfile

#: Options that make fio run a program (or load code): refused unless the user allows it.
EXEC_OPTIONS = ("exec_prerun", "exec_postrun")
#: Options whose value is a file fio writes (a prefix for logs, completed by fio).
_LOGS = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
_WRITTEN = ("write_iolog", *_LOGS)
_MAX_NAMES = 4096


@dataclass(frozen=True)
class JobPaths:
    """What a job file opens: ``files`` (data files and devices, absolute or relative to fio's
    working directory), ``written`` (logs and iologs fio writes), ``execs`` (``option=value``
    of each way it runs a program)."""

    files: tuple[str, ...]
    written: tuple[str, ...]
    execs: tuple[str, ...]


def substitute(value: str, env: Mapping[str, str]) -> str:
    """fio's substitutions in an option value: ``${VAR}`` from ``env`` (empty when unset) and the
    keywords ``$ncpus``, ``$pagesize``, ``$mb_memory`` (``options.c`` ``fio_keyword_replace``)."""
    value = re.sub(r"\$\{([^}]*)\}", lambda m: env.get(m.group(1), ""), value)
    pagesize = os.sysconf("SC_PAGE_SIZE")
    keywords = {"$ncpus": str(os.cpu_count() or 1), "$pagesize": str(pagesize),
                "$mb_memory": str(os.sysconf("SC_PHYS_PAGES") * pagesize // 2**20)}
    for word, text in keywords.items():
        value = value.replace(word, text)
    return value


def split_list(value: str) -> list[str]:
    """A ``filename``/``directory`` value as fio splits it: on ``:`` not escaped by ``\\``."""
    return [p.replace("\\:", ":") for p in re.split(r"(?<!\\):", value) if p]


def job_paths(text: str, env: Mapping[str, str] | None = None, base_dir: Path | None = None) -> JobPaths:
    """Every path fio opens for job-file ``text`` and every program it runs. Raises ``SuiteError``
    when the text cannot be read (fio would refuse it too)."""
    env = os.environ if env is None else env
    sections = jobfile.parse(text, base_dir=base_dir)
    files: list[str] = []
    written: list[str] = []
    execs: list[str] = []
    defaults: list[jobfile.Option] = []
    for section in sections:
        if section.is_global:
            defaults += section.options
            continue
        options = [(k, substitute(v, env) if v is not None else None) for k, v in [*defaults, *section.options]]
        files += _data_files(section.name, options)
        written += _written(section.name, options)
        execs += _execs(options)
    return JobPaths(tuple(dict.fromkeys(files)), tuple(dict.fromkeys(written)), tuple(dict.fromkeys(execs)))


def _last(options: Sequence[jobfile.Option], key: str) -> str | None:
    found = [v for k, v in options if k == key]
    return found[-1] if found else None


def _data_files(name: str, options: Sequence[jobfile.Option]) -> list[str]:
    directories = split_list(_last(options, "directory") or "") or [""]
    names = [p for k, v in options if k == "filename" and v for p in split_list(v)]
    out: list[str] = []
    if not names:
        if _last(options, "read_iolog") is None and _exists_not_regular(name):
            names = [name]
        else:
            names = _formatted(name, options)
    for directory in directories:
        # fio puts the directory and a '/' in front of every name, absolute or not (init.c set_name_idx)
        out += [f"{directory.rstrip('/')}/{n}" if directory else n for n in names]
    redirect = _last(options, "replay_redirect")
    if redirect:
        out.append(redirect)
    iolog = _last(options, "read_iolog")
    if iolog and not redirect:
        out += iolog_files(iolog)
    opendir = _last(options, "opendir")
    if opendir:
        out.append(opendir)
    return out


def _exists_not_regular(path: str) -> bool:
    try:
        return not os.path.isfile(path) and os.path.exists(path) and not os.path.isdir(path)
    except (OSError, ValueError):
        return False


def _formatted(name: str, options: Sequence[jobfile.Option]) -> list[str]:
    """The names fio makes from ``filename_format`` for every clone and file (``init.c``
    ``make_filename``); at most ``_MAX_NAMES``."""
    fmt = _last(options, "filename_format") or "$jobname.$jobnum.$filenum"
    numjobs = _int(_last(options, "numjobs"))
    nrfiles = _int(_last(options, "nrfiles"))
    names = []
    for jobnum in range(min(numjobs, _MAX_NAMES)):
        for filenum in range(min(nrfiles, _MAX_NAMES // max(1, numjobs) + 1)):
            names.append(fmt.replace("$jobname", name).replace("$jobnum", str(jobnum))
                         .replace("$filenum", str(filenum)).replace("$clientuid", "0"))
    return list(dict.fromkeys(names))


def _int(text: str | None) -> int:
    try:
        return max(1, int(text or "1"))
    except ValueError:
        return 1


def _written(name: str, options: Sequence[jobfile.Option], keys: Sequence[str] = _WRITTEN) -> list[str]:
    out = [v for k, v in options if k in keys and v]
    for key in _LOGS:
        if key in keys and any(k == key and v is None for k, v in options):
            out.append(name)
    return out


def log_names(text: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The names of the logs a job file asks for (``write_bw_log`` … ``write_hist_log``; the job's
    name where the option has no value): in client/server mode fio's *client* writes them, on
    the machine that runs it, from what its servers send (``client.c``). Raises ``SuiteError``
    when the text cannot be read."""
    env = os.environ if env is None else env
    out: list[str] = []
    defaults: list[jobfile.Option] = []
    for section in jobfile.parse(text):
        if section.is_global:
            defaults += section.options
            continue
        options = [(k, substitute(v, env) if v is not None else None) for k, v in [*defaults, *section.options]]
        out += _written(section.name, options, _LOGS)
    return list(dict.fromkeys(out))


def _execs(options: Sequence[jobfile.Option]) -> list[str]:
    out = [f"{k}={v}" for k, v in options if k in EXEC_OPTIONS]
    engine = (_last(options, "ioengine") or "").strip()
    if engine == "exec" or engine.startswith("external") or "/" in engine:
        out.append(f"ioengine={engine}")
    return out


def iolog_files(path: str) -> list[str]:
    """The files a fio iolog (version 2 or 3 text) names in its ``FILE add`` / ``FILE open``
    lines (``iolog.c`` ``read_iolog2``); none for a file that cannot be read here or a binary
    blktrace (fio will say what is wrong with it)."""
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            head = f.readline()
            if "fio version" not in head:
                return []
            lines = f.read(16 * 2**20).splitlines()
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("add", "open"):  # version 2: FILE ACTION
            out.append(parts[0])
        elif len(parts) >= 3 and parts[2] in ("add", "open"):  # version 3: TIME FILE ACTION
            out.append(parts[1])
    return list(dict.fromkeys(out))


def check_exec(paths: JobPaths, allow_exec: bool, where: str) -> None:
    """Refuse a job that runs programs (``exec_prerun``, ``exec_postrun``, ``ioengine=exec``,
    external engines) unless the user allowed it; they then run inside the fence."""
    if paths.execs and not allow_exec:
        raise SafetyError(f"{where}: the job runs a program or loads code ({', '.join(paths.execs)}); iolab runs "
                         "commands only when you say so", hint="if this is intended, add --allow-exec (the program "
                         "then runs inside the same fence as fio)")
