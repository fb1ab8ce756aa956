"""``fit --check``: a fitted job run on a device through the run pipeline while that device is
captured, so that the fitted workload's fingerprint can be set beside the original's
(``capture.fit.closeness``)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace

from ...describe import suite as suite_mod
from ...describe.observe import with_args
from ...errors import IolabError
from ...model import Run
from ...run import pipeline
from ...run.pipeline import Watch
from ...run.plan import RunOptions
from ...store.database import Store
from . import record


def check_fit(store: Store, job_path: str, name: str, device: str, destroy: Collection[str], capture_id: int,
              watch: Watch | None = None, label: str | None = None, tags: Mapping[str, str] | None = None,
              observe: bool = True) -> tuple[Run, Run]:
    """Run the fitted job file ``job_path`` on ``device`` (target ``name``; writing it needs it in
    ``destroy``) as a run labelled ``label`` (default ``fit-of-CAPTURE``) with ``tags``, observed unless
    ``observe`` is False, capturing the device meanwhile; returns the run and its capture (stored as a
    run too, labelled ``LABEL-capture``). Raises what the pipeline raises (``run.pipeline.run``), and
    ``IolabError`` when the fitted job failed (nothing to compare)."""
    suite = suite_mod.with_targets(suite_mod.load(job_path), {name: device})
    suite = suite if observe else replace(suite, observe=with_args(suite.observe, (), off=True))
    label, tags = label or f"fit-of-{capture_id}", {"fit_of": str(capture_id), **(tags or {})}
    captured: list[record.Background] = []

    @contextmanager
    def capturing() -> Iterator[None]:  # from the moment the jobs start to their end
        with record.Background(device) as background:
            captured.append(background)
            yield

    run = pipeline.run(store, suite, RunOptions(destroy=tuple(destroy)), label=label, tags=tags, watch=watch,
                       during=capturing())
    if run.info.status != "complete":
        raise IolabError(f"the fitted job failed on {device} (run {run.info.id}): nothing to compare",
                         hint=f"see fio's message: iolab show {run.info.id}")
    fitted_capture = record.save(store, captured[0].result(), label=f"{label}-capture", tags=tags)
    return run, store.get_run(fitted_capture)
