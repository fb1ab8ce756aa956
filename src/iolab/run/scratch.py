"""Scratch files: what iolab removes after a run — a missing-file target it created, and in a
directory target the files fio laid out for the run's jobs (``<job>.N.M``) that were not there
before it started — locally and, where ssh facts said what is iolab's, on remote hosts. A local file
is removed only while it is the file the run created (its mark, ``runner.marks.created_by``): a
file put at that name since (after a kill, before ``--resume``) is someone's."""

from __future__ import annotations

import contextlib
import os
import re
from typing import TYPE_CHECKING

from ..fio import jobfile
from ..model import ResultRecord, Run
from ..runner import marks
from . import remote as remote_jobs

if TYPE_CHECKING:
    from ..store.database import Store


def target_files(result: ResultRecord, kind: str | None) -> list[str]:
    """The regular files a job reads or writes in its target (for drop_caches' check)."""
    if result.target_path is None:
        return []
    if kind in ("file", "missing"):
        return [result.target_path]
    if kind == "directory":
        jobs = {name for name, _ in jobfile.effective_jobs(jobfile.parse(result.job_text))}
        return [os.path.join(result.target_path, n) for n in sorted(fio_files(result.target_path))
                if n.rsplit(".", 2)[0] in jobs]
    return []


def fio_files(directory: str) -> set[str]:
    """Files in ``directory`` named the way fio names its own (``job.N.M``)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {n for n in names if re.fullmatch(r".+\.\d+\.\d+", n)}


def remove_listed(run: Run, key: str) -> list[str]:
    """``cleanup`` without the database: removes what ``run`` (as loaded; ``key`` its
    ``runner.marks.run_key``) says is scratch, each file only while it is one the run created;
    returns the problems met on remote hosts."""
    run_options = run.info.options
    for path in run_options.get("scratch", ()):
        _remove_created(path, key)
    jobs = {name for r in run.results for name, _ in jobfile.effective_jobs(jobfile.parse(r.job_text))}
    for directory, existing in run_options.get("preexisting", {}).items():
        for name in fio_files(directory) - set(existing):
            if name.rsplit(".", 2)[0] in jobs:
                _remove_created(os.path.join(directory, name), key)
    problems = []
    for target, stored in (run_options.get("remote_scratch") or {}).items():
        mine = {name for r in run.results if r.target == target
                for name, _ in jobfile.effective_jobs(jobfile.parse(r.job_text))}
        if stored:
            problems += remote_jobs.remove_scratch(stored, mine)
    return problems


def _remove_created(path: str, key: str) -> None:
    """Remove ``path`` if it is a file the run ``key`` created, still as it left it (``marks``); the
    name is removed only while it holds the inode checked."""
    with marks.opened(path) as fd:
        if fd is None or not marks.created_by(fd, key):
            return
        st = os.fstat(fd)
        with contextlib.suppress(OSError):
            now = os.lstat(path)
            if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                os.unlink(path)


def cleanup(store: Store, run_id: int, keep: bool) -> None:
    """Remove scratch files iolab created: missing-file targets, and in directory targets the
    files fio laid out for this run's jobs (named ``<job>.N.M``) that were not there before the
    run started (the listing is stored with the run, so a resumed run cleans up too); the same
    on the hosts of remote targets where ssh facts said what is iolab's (``remote.jobs.scratch``).
    Files that cannot be removed on a remote host become a warning of the run. ``keep`` (the
    run's ``keep_files``) keeps everything; a workflow whose probes reused the laid-out file
    removes it when it ends, with ``keep=False``."""
    if keep:
        return
    run = store.get_run(run_id)
    problems = remove_listed(run, marks.run_key(store.display_url, run_id, run.info.created_at))
    if problems:
        store.update_run(run_id, warnings=[*run.info.warnings, *(f"scratch files left: {p}" for p in problems)])
