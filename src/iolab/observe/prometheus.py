"""Reading the same node_exporter series afterwards from a Prometheus server (HTTP API v1).

For fleets whose Prometheus already scrapes every host's exporter, iolab does not scrape them
itself: after each job it asks Prometheus for the raw samples of the job's time span with a
range-vector selector evaluated at the job's end (an instant query, ``/api/v1/query`` with
``{__name__=~"…", instance="HOST:PORT"}[Ns]``, reaching back to the scrape before the job).
That returns every sample with the time Prometheus scraped it, which the counter interpolation
needs; a ``query_range`` with a step would resample them onto the step grid and blur the window
edges by up to a scrape interval.
The series are those ``exporter`` keeps, and they are reduced the same way (CPU summed per mode).

The exporter is found by Prometheus's ``instance`` label, which is ``HOST:PORT`` of the scraped
endpoint unless relabelled. The resolution is Prometheus's scrape interval (often 15 s), so a
job should last several intervals; Prometheus stores a scrape shortly after it happens, so
iolab waits (up to ``WAIT_S``) until a sample after the job's end is there.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

from ..errors import HostError
from ..model import Gap, HostSamples
from . import exporter
from .sampler import Endpoint, samples

#: Seconds to wait for Prometheus to hold a sample after the job's end.
WAIT_S = 30.0
#: Seconds looked back before the job's start for the scrape just before it (scrape intervals are
#: rarely longer).
LOOKBACK_S = 60
_NAMES = "|".join([exporter.CPU, *exporter.PER_DEVICE, exporter.BCACHE_PREFIX + ".+"])


def selector(instance: str, seconds: int) -> str:
    """The PromQL range-vector selector of an exporter's kept series over ``seconds``."""
    return f'{{__name__=~"{_NAMES}",instance="{instance}"}}[{seconds}s]'


def query(url: str, promql: str, at: float, timeout_s: float = 10.0) -> list[dict[str, Any]]:
    """The ``result`` of an instant query at ``at`` (Unix seconds): for a range vector a list
    of ``{"metric": {labels}, "values": [[t, "v"], …]}``. Raises ``HostError`` naming the server."""
    params = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?{params}", timeout=timeout_s) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = ""
        with contextlib.suppress(ValueError, OSError):
            detail = json.loads(exc.read()).get("error", "")
        raise HostError(f"Prometheus at {url}: HTTP {exc.code} {detail or exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise HostError(f"Prometheus at {url}: {getattr(exc, 'reason', exc)}") from None
    if body.get("status") != "success" or body.get("data", {}).get("resultType") != "matrix":
        raise HostError(f"Prometheus at {url}: unexpected answer {str(body)[:200]}")
    return list(body["data"]["result"])


def read(url: str, endpoint: Endpoint, started_at: datetime, ended_at: datetime,
         window_ms: tuple[int, int] | None, wait_s: float = WAIT_S) -> HostSamples:
    """The exporter's samples from ``started_at`` to ``ended_at`` as Prometheus holds them (see
    the module docstring). No samples at all is one ``Gap`` saying so; a server that cannot be
    queried is one too (never an exception: the run goes on)."""
    t0 = started_at.timestamp()
    deadline = time.monotonic() + wait_s
    source = f"{url} instance={endpoint.address}"
    while True:
        now = time.time()
        seconds = math.ceil(now - t0) + LOOKBACK_S
        try:
            result = query(url, selector(endpoint.address, seconds), now)
        except HostError as exc:
            return _nothing(endpoint, started_at, ended_at, window_ms, source, exc.message)
        latest = max((float(v[0]) for r in result for v in r.get("values", ())), default=None)
        if (latest is not None and latest >= ended_at.timestamp()) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    if not result:
        return _nothing(endpoint, started_at, ended_at, window_ms, source,
                        f"Prometheus at {url} has no samples of instance {endpoint.address}")
    by_time: dict[int, list[tuple[str, dict[str, str], float]]] = {}
    for series in result:
        labels = {k: v for k, v in series["metric"].items() if k not in ("__name__", "instance", "job")}
        for t, value in series.get("values", ()):
            t_ms = round((float(t) - t0) * 1000)
            by_time.setdefault(t_ms, []).append((series["metric"]["__name__"], labels, float(value)))
    before = [t for t in by_time if t < 0]
    scrapes = [(t, exporter.reduce(values)) for t, values in sorted(by_time.items())
               if t >= 0 or t == max(before)]  # of the lookback, only the scrape just before the start
    return samples(endpoint, started_at, scrapes, (), window_ms, source)


def _nothing(endpoint: Endpoint, started_at: datetime, ended_at: datetime, window_ms: tuple[int, int] | None,
             source: str, error: str) -> HostSamples:
    end_ms = round((ended_at - started_at).total_seconds() * 1000)
    return samples(endpoint, started_at, [], (Gap(0, end_ms, 1, error),), window_ms, source)
