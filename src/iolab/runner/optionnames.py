"""The option names the installed fio accepts, asked of fio itself and kept per fio version.

fio finds an option by exact name or alias (``options.h`` ``o_match``: ``strcmp`` on ``name`` and
``alias``), after substituting ``${VAR}`` and ``$ncpus``-style keywords over the whole
``name=value`` string (``options.c`` ``fio_option_dup_subs``). The guard reads a job file as fio
will only when every option name is one fio knows as written, so a name that is not — or that
holds a ``$``, which fio may turn into any other option — is refused before fio starts.

Sources, all from the fio binary that will run the job: ``fio --cmdhelp=all`` (every option of
fio's main table, without aliases), ``fio --cmdhelp=NAME`` (which shows ``alias: NAME`` when
NAME is one), ``fio --enghelp=ENGINE`` (an engine's own options, registered only when the engine
loads). Answers are cached in ``$XDG_CACHE_HOME/iolab/fio-options-<version>-<format>.json`` (default
``~/.cache/iolab``): a plan asks fio only about names it has not seen with that fio version.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

from .. import outputs
from ..errors import FioNotFound

#: The cache file's format: what iolab asks fio and keeps (a new one starts a new file).
_FORMAT = 2
_lock = threading.Lock()
_cache: dict[str, dict[str, Any]] = {}


def canonical(name: str, engine: str | None, fio: str = "fio") -> str | None:
    """fio's own name of option ``name`` (itself, or the option it is an alias of) in a job whose
    engine is ``engine`` (its options count too; any name, when fio cannot load that engine: the job
    cannot run then, and fio's ``--parse-only`` says why); None when fio does not know ``name``.
    Raises ``FioNotFound``."""
    with _lock:
        known = _known(fio)
        if name in known["options"]:
            return name
        if name not in known["aliases"]:
            known["aliases"][name] = _alias_of(name, known["fio"])
            _save(known)
        found = known["aliases"][name]
        if found is None and engine:
            if engine not in known["engines"]:
                known["engines"][engine] = _engine_options(engine, known["fio"])
                _save(known)
            options = known["engines"][engine]
            # an engine fio cannot load: the job cannot run (fio --parse-only says why), its names are moot
            found = name if options is None or name in options else None
        return found


def known_names(fio: str = "fio") -> list[str]:
    """The names of fio's main option table, for suggestions (none asked of fio here)."""
    known = _cache.get(fio)
    return sorted(known["options"]) if known else []


def _known(fio: str) -> dict[str, Any]:
    """What is known of ``fio`` (asked once per process, then the cache file of its version)."""
    if fio in _cache:
        return _cache[fio]
    from .local import find_fio, fio_version
    path = find_fio(fio)
    version = fio_version(path)
    file = _cache_dir() / f"fio-options-{re.sub(r'[^A-Za-z0-9._-]', '_', version)}-{_FORMAT}.json"
    try:
        known = json.loads(file.read_text())
        known["options"] = set(known["options"])
    except (OSError, ValueError, KeyError, TypeError):
        known = {"options": _main_options(path), "aliases": {}, "engines": {}}
    known["file"], known["fio"] = str(file), path
    _cache[fio] = known
    _save(known)
    return known


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "iolab"


def _save(known: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only means asking fio again next time."""
    data = {"options": sorted(known["options"]), "aliases": known["aliases"],
            "engines": known["engines"]}
    with contextlib.suppress(outputs.OutputError):  # never onto a device or through a link (outputs)
        outputs.write(known["file"], "the cache of fio's option names", json.dumps(data))


def _ask(fio: str, *args: str) -> str:
    try:
        out = subprocess.run([fio, *args], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise FioNotFound(f"cannot ask fio for its option names: {exc}") from exc
    return out.stdout


#: fio's built-in profiles (``profiles/``): their options sit in fio's main table, so a job file may
#: set them (``threads=1``), inert without ``--profile``; ``--cmdhelp=all`` lists them only with it.
_PROFILES = ("act", "tiobench")


def _main_options(fio: str) -> set[str]:
    """``fio [--profile=P] --cmdhelp=all`` prints ``name : help`` per option (children indented)."""
    names = set()
    for args in (["--cmdhelp=all"], *(["--profile=" + p, "--cmdhelp=all"] for p in _PROFILES)):
        names |= {line.split(":", 1)[0].strip() for line in _ask(fio, *args).splitlines()
                  if re.match(r"^\s*\S+\s*: ", line)}
    if not names:
        raise FioNotFound(f"{fio} --cmdhelp=all listed no options", hint="check the fio installation")
    return names


def _alias_of(name: str, fio: str) -> str | None:
    """The option ``name`` is an alias of: ``fio --cmdhelp=NAME`` shows that option's block with
    ``alias: NAME``; for a name it does not know it shows nothing or the nearest match."""
    text = _ask(fio, f"--cmdhelp={name}")
    head = re.search(r"^\s*(\S+): .*\n\s*alias: (\S+)\s*$", text, re.MULTILINE)
    return head.group(1) if head and head.group(2) == name else None


def _engine_options(engine: str, fio: str) -> list[str] | None:
    """``fio --enghelp=ENGINE``: ``name : help`` per option ("has no options": none); None for an
    engine this fio cannot load ("not found", "not loadable")."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", engine):
        return []  # external:/path.so and the like: never loaded just to list options
    out = subprocess.run([fio, f"--enghelp={engine}"], capture_output=True, text=True, timeout=30, check=False)
    if re.search(r"not (found|loadable)", out.stdout + out.stderr):
        return None
    return [line.split(":", 1)[0].strip() for line in out.stdout.splitlines() if re.match(r"^\s*\S+\s*: ", line)]
