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

import difflib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import units
from ..errors import SafetyError
from ..fio import jobfile
from ..runner import optionnames
from . import safety

#: Options that make fio run a program (or load code): refused unless the user allows it.
EXEC_OPTIONS = ("exec_prerun", "exec_postrun")
#: Options whose value is a file fio writes (a prefix for logs, completed by fio).
_LOGS = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
_WRITTEN = ("write_iolog", *_LOGS)
#: At most this many file names of one job section are made from ``filename_format`` (``numjobs`` ×
#: ``nrfiles``): the guard checks every name fio opens, and a job naming more is refused (``job_paths``).
MAX_NAMES = 10_000


#: Engines whose I/O goes to the files and devices the job names (fio's ``engines/``): the guard
#: checks those paths and the fence confines them. Every other engine reaches storage by address
#: (a socket, a cluster, a URL: nbd, rbd, rados, gfapi, http, net, rdma, libiscsi, nfs, xnvme …),
#: where neither the guard nor the fence can see what is written: an allow-list, not a deny-list.
PATH_ENGINES = frozenset({
    "sync", "psync", "vsync", "pvsync", "pvsync2", "libaio", "io_uring", "io_uring_cmd", "posixaio", "mmap",
    "splice", "sg", "mtd", "null", "cpuio", "falloc", "e4defrag", "ftruncate", "filecreate", "filestat",
    "filedelete", "dircreate", "dirstat", "dirdelete", "libpmem", "dev-dax", "pmemblk", "exec", "libzbc",
    "libcufile",
})
#: What names the storage an address engine reaches, for messages and for ``--destroy``: the options
#: that identify it, joined after the engine (``rbd:pool/image``); nbd, libiscsi and nfs name it
#: with a URI of their own. An engine not listed is named by its ``filename`` values.
_ADDRESSES = {"rbd": ("pool", "rbdname"), "rados": ("pool",), "gfapi": ("volume", "brick"),
              "gfapi_async": ("volume", "brick"), "net": ("hostname", "port"), "netsplice": ("hostname", "port"),
              "rdma": ("hostname", "port"), "http": ("http_host", "filename"), "libhdfs": ("namenode", "port")}
_URIS = {"nbd": "uri", "nfs": "nfs_url"}


@dataclass(frozen=True)
class SectionPaths:
    """One job section as fio runs it (``[global]`` sections and includes applied): ``writes``
    whether fio opens its files for writing (``safety.opens_for_write``); ``files`` its data files
    and devices (absolute, or relative to fio's working directory); ``trees`` its ``opendir`` roots
    (every regular file beneath is a data file: ``filesetup.c`` ``recurse_dir``); ``engine``;
    ``address`` the storage an engine outside ``PATH_ENGINES`` reaches (None for path engines);
    ``options`` its effective options, in fio's names."""

    name: str
    writes: bool
    files: tuple[str, ...]
    trees: tuple[str, ...] = ()
    engine: str = "psync"
    address: str | None = None
    options: Mapping[str, str | None] = field(default_factory=dict)

    def layout_bytes(self) -> int | None:
        """Bytes fio lays out in each of the section's files: ``filesize``, else a clone's ``size``
        split over its files (``nrfiles``, or the ``filename`` list, which its clones share); None when
        fio decides (a percentage, a range, ``${VAR}``) or lays out nothing (``NO_LAYOUT``, an engine
        reaching storage by address). Source: fio HOWTO ``size``, ``filesize``, ``nrfiles``."""
        if self.engine not in PATH_ENGINES or self.engine in NO_LAYOUT:
            return None
        opts = self.options
        try:
            per_file = units.parse_size(opts.get("filesize") or "0")
            if not per_file:
                shared = split_list(opts.get("filename") or "")
                per_file = units.parse_size(opts.get("size") or "0") // max(1, len(shared) or int(
                    opts.get("nrfiles") or 1))
        except ValueError:
            return None
        return per_file or None

    def relays(self, size_bytes: int) -> bool:
        """Whether fio lays out anew an existing file of ``size_bytes`` that this section opens: it is
        smaller than the section's ``offset`` plus its layout (``layout_bytes``), and the section reads,
        or writes without ``file_append`` (then fio unlinks it and writes it anew); never with
        ``create_on_open``. Source: fio ``filesetup.c`` ``setup_files``, ``extend_file``."""
        per_file = self.layout_bytes()
        opts = self.options
        if per_file is None or _set(opts, "create_on_open"):
            return False
        try:
            offset = units.parse_size(opts.get("offset") or "0") if not (opts.get("offset") or "").endswith("%") else 0
        except ValueError:
            offset = 0
        appends = _set(opts, "file_append") and safety.mode(opts) in ("write", "randwrite")
        return size_bytes < offset + per_file and not appends


def _set(options: Mapping[str, str | None], name: str) -> bool:
    """A fio boolean option is set (present without a value, or a value that is not 0/false/no/off)."""
    if name not in options:
        return False
    value = (options[name] or "").strip().lower()
    return value not in ("0", "false", "no", "off")


#: Engines that write no data into the job's files (fio's ``engines/``: no I/O at all, a program, or files
#: created, stat'ed or removed empty): their ``size`` needs no room and lays nothing out.
NO_LAYOUT = frozenset({"null", "cpuio", "exec", "filecreate", "filestat", "filedelete", "dircreate", "dirstat",
                       "dirdelete"})


@dataclass(frozen=True)
class JobPaths:
    """What a job file opens: ``sections`` (one per job section), ``written`` (logs and iologs
    fio writes), ``execs`` (``option=value`` of each way it runs a program)."""

    sections: tuple[SectionPaths, ...]
    written: tuple[str, ...]
    execs: tuple[str, ...]

    @property
    def files(self) -> tuple[str, ...]:
        """Every data file, device and ``opendir`` root of every section."""
        return tuple(dict.fromkeys(p for s in self.sections for p in (*s.files, *s.trees)))


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


def job_paths(text: str, env: Mapping[str, str] | None = None, base_dir: Path | None = None,
              fio: str = "fio", lenient: bool = False) -> JobPaths:
    """Every path fio opens for job-file ``text``, section by section, and every program it runs.

    Option names are read as fio reads them: each must be one of ``fio``'s own names or aliases
    (``optionnames.canonical``; aliases become the name, ``readwrite`` is ``rw``). Raises
    ``SafetyError`` for a name fio does not know as written, or that holds a ``$`` (fio substitutes
    ``${VAR}`` and its keywords over the whole line, so ``r${EMPTY}w=write`` is ``rw=write`` to fio);
    ``SuiteError`` when the text cannot be read (fio would refuse it too). ``lenient`` passes a plain
    name fio does not know through as written (fio's ``--parse-only`` then rejects it in its own
    words, "Did you mean iodepth?"); a name with ``$`` is refused all the same."""
    found: list[SectionPaths] = []
    written: list[str] = []
    execs: list[str] = []
    for name, options in _jobs(text, env, base_dir, fio, lenient):
        effective = dict(options)
        engine = _engine(effective)
        writes = safety.opens_for_write(effective)
        address = None if engine in PATH_ENGINES or engine == "external" else _address(engine, effective, options)
        opendir = _last(options, "opendir")
        found.append(SectionPaths(name, writes, tuple(dict.fromkeys(_data_files(name, options, writes))),
                                  (opendir,) if opendir else (), engine, address, effective))
        written += _written(name, options)
        execs += _execs(options)
    return JobPaths(tuple(found), tuple(dict.fromkeys(written)), tuple(dict.fromkeys(execs)))


def _jobs(text: str, env: Mapping[str, str] | None, base_dir: Path | None, fio: str,
          lenient: bool = False) -> Iterator[tuple[str, list[jobfile.Option]]]:
    """Each job section's name and options as fio applies them: the ``[global*]`` sections before
    it first, values substituted, names fio's own (``_named_as_fio``)."""
    env = os.environ if env is None else env
    defaults: list[jobfile.Option] = []
    loaded: list[str] = []  # fio knows an engine's options once a section has loaded it, in every later one
    for section in jobfile.parse(text, base_dir=base_dir):
        loaded += [_engine({"ioengine": v}) for k, v in section.options if k == "ioengine" and v]
        if section.is_global:
            defaults += section.options
            continue
        raw = [(k, substitute(v, env) if v is not None else None) for k, v in [*defaults, *section.options]]
        yield section.name, _named_as_fio(section.name, raw, fio, lenient, loaded)


def _named_as_fio(section: str, options: Sequence[jobfile.Option], fio: str, lenient: bool = False,
                  loaded: Sequence[str] = ()) -> list[jobfile.Option]:
    """``options`` with fio's own names (aliases resolved; an option of the job's engine or of any
    engine a section before loaded counts); raises ``SafetyError`` for a name fio would not read as
    written (see ``job_paths``)."""
    engine = _engine(dict(options))
    engines: list[str | None] = [e for e in dict.fromkeys([engine, *loaded]) if e != "external"] or [None]
    out = []
    for key, value in options:
        name = None if "$" in key else next(
            (n for e in engines if (n := optionnames.canonical(key, e, fio)) is not None), None)
        if name is None and "$" not in key and (lenient or engine == "external"):
            name = key  # for fio to reject; or an external engine's own option (it loads only with --allow-exec)
        if name is None:
            why = ("fio substitutes ${VAR} and $keywords over the whole line, option names included, so iolab "
                   "cannot tell which option this is" if "$" in key else
                   f"it is not one of fio's option names{_nearest(key)}")
            raise SafetyError(f"[{section}] {key}: {why}; iolab runs only job files it reads as fio does",
                              hint="spell the option as fio names it (fio --cmdhelp=all, fio --enghelp=ENGINE)")
        out.append((name, value))
    return out


def _nearest(key: str) -> str:
    known = optionnames.known_names()
    close = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _engine(options: Mapping[str, str | None]) -> str:
    """The engine's name (fio's default is psync); ``external`` for code loaded from a path."""
    value = (options.get("ioengine") or "psync").strip()
    if value.startswith("external") or "/" in value:
        return "external"
    return value.split(":", 1)[0].strip()


def _address(engine: str, options: Mapping[str, str | None], listed: Sequence[jobfile.Option]) -> str:
    """What names the storage an address engine reaches (``rbd:pool/image``, an NBD URI)."""
    if engine in _URIS:
        return options.get(_URIS[engine]) or f"{engine}:"
    keys = _ADDRESSES.get(engine)
    if keys:
        return f"{engine}:" + "/".join(options.get(k) or "" for k in keys)
    return f"{engine}:" + ":".join(p for k, v in listed if k == "filename" and v for p in split_list(v))


def _last(options: Sequence[jobfile.Option], key: str) -> str | None:
    found = [v for k, v in options if k == key]
    return found[-1] if found else None


def _data_files(name: str, options: Sequence[jobfile.Option], writes: bool = True) -> list[str]:
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
        named = iolog_files(iolog)
        if named is None and writes:
            raise SafetyError(f"[{name}] read_iolog={iolog}: iolab cannot read which files this log names (a binary "
                              "blktrace, or a log it cannot open), and the job writes: fio would write whatever it "
                              "names, unchecked", hint="name the device or file to replay to with replay_redirect=, "
                                                       "or give a text iolog (fio version 2 or 3)")
        out += named or []
    return out


def _exists_not_regular(path: str) -> bool:
    try:
        return not os.path.isfile(path) and os.path.exists(path) and not os.path.isdir(path)
    except (OSError, ValueError):
        return False


def _formatted(name: str, options: Sequence[jobfile.Option]) -> list[str]:
    """The names fio makes from ``filename_format`` for every clone and file (``init.c``
    ``make_filename``). Raises ``SafetyError`` when that is more than ``MAX_NAMES``: the guard does
    not pass names it has not made."""
    fmt = _last(options, "filename_format") or "$jobname.$jobnum.$filenum"
    numjobs = _int(_last(options, "numjobs"))
    nrfiles = _int(_last(options, "nrfiles"))
    if numjobs * nrfiles > MAX_NAMES:
        raise SafetyError(f"[{name}] numjobs={numjobs} × nrfiles={nrfiles} names {numjobs * nrfiles:,} files; iolab "
                          f"checks every file a job opens, at most {MAX_NAMES:,} of one job, and runs none it has "
                          "not checked", hint=f"use at most {MAX_NAMES:,} files per job (fewer numjobs or nrfiles)")
    names = []
    for jobnum in range(numjobs):
        for filenum in range(nrfiles):
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


def log_names(text: str, env: Mapping[str, str] | None = None, fio: str = "fio") -> list[str]:
    """The names of the logs a job file asks for (``write_bw_log`` … ``write_hist_log``; the job's
    name where the option has no value): in client/server mode fio's *client* writes them, on
    the machine that runs it, from what its servers send (``client.c``). Raises ``SuiteError``
    when the text cannot be read, ``SafetyError`` as ``job_paths`` does."""
    return list(dict.fromkeys(log for name, options in _jobs(text, env, None, fio)
                              for log in _written(name, options, _LOGS)))


def _execs(options: Sequence[jobfile.Option]) -> list[str]:
    out = [f"{k}={v}" for k, v in options if k in EXEC_OPTIONS]
    engine = (_last(options, "ioengine") or "").strip()
    if engine == "exec" or engine.startswith("external") or "/" in engine:
        out.append(f"ioengine={engine}")
    return out


def iolog_files(path: str) -> list[str] | None:
    """The files a fio iolog (version 2 or 3 text) names in its ``FILE add`` / ``FILE open``
    lines (``iolog.c`` ``read_iolog2``), read to its end; None for a file that cannot be read here
    or is not such a log (a binary blktrace names devices by number)."""
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            head = f.readline()
            if "fio version" not in head:
                return None
            lines = list(f)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
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
