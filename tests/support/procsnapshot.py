"""This machine's kernel counters as iolab reads them (``/proc/stat``, ``/proc/diskstats``, ``/proc/net/dev``,
``/sys/class/net/*/speed``) just before and just after one node_exporter scrape of the same machine,
recorded for the fast tier's test of ``observe.local.reduce`` against ``observe.exporter.reduce``
(``tests/unit/observe/test_local.py``). The live comparison: ``tests/integration/test_observe_local.py``.

``python tests/support/procsnapshot.py`` (on the project's machine, Debian's
prometheus-node-exporter installed; loopback only) writes ``tests/data/observe/local-and-exporter.json``:
``before`` and ``after`` (the texts and each interface's speed file, None where unreadable),
``exporter`` (the exposition text of the scrape between them, the collectors iolab samples with),
``ticks_per_s`` (``sysconf(SC_CLK_TCK)``), ``cpu_count`` (``os.cpu_count()``), ``made``.
``tests/data/observe/README.md`` says the same.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from iolab.facts.sysfs import read_text
from iolab.observe import exporter, local
from paths import DATA

SNAPSHOT = DATA / "observe" / "local-and-exporter.json"


def read(proc: str = "/proc", sys_class_net: str = "/sys/class/net") -> dict[str, Any]:
    """The texts ``observe.local.scrape`` reads, as they are now."""
    texts = {name: read_text(os.path.join(proc, name)) or "" for name in ("stat", "diskstats", "net/dev")}
    speeds = {name: read_text(os.path.join(sys_class_net, name, "speed"))
              for name in local.interfaces(texts["net/dev"])}
    return {**texts, "speeds": speeds}


def reduced(texts: dict[str, Any], ticks_per_s: float) -> exporter.Scrape:
    """``observe.local.reduce`` of texts ``read`` returned."""
    return local.reduce(texts["stat"], texts["diskstats"], texts["net/dev"], texts["speeds"], ticks_per_s)


def load(path: Path = SNAPSHOT) -> dict[str, Any]:
    return json.loads(path.read_text())


def record(path: Path = SNAPSHOT) -> dict[str, Any]:
    from netns import local_node_exporter  # a process: only when recording

    with local_node_exporter() as (address, _):
        exporter.fetch(address, exporter.SAMPLE_COLLECTORS, 5.0)  # the exporter's first answer is slow
        before = read()
        text = exporter.fetch(address, exporter.SAMPLE_COLLECTORS, 5.0)
        after = read()
    snapshot = {"before": before, "exporter": text, "after": after, "ticks_per_s": os.sysconf("SC_CLK_TCK"),
                "cpu_count": os.cpu_count(), "made": datetime.now(UTC).isoformat(timespec="seconds"),
                "how": "python tests/support/procsnapshot.py"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(snapshot, indent=1) + "\n")
    return snapshot


if __name__ == "__main__":
    record(Path(sys.argv[1]) if len(sys.argv) > 1 else SNAPSHOT)
