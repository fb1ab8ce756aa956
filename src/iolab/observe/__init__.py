"""Observers: every host's cost of a job, read from Prometheus ``node_exporter``.

iolab does not run an agent of its own: it reads the exporter storage fleets already run
(Debian ``prometheus-node-exporter``), on every host involved in a job — the local host (which
runs fio or fio's client), every fio server of a remote target, and hosts named only to be
watched (a storage target running no fio job). The flow:

* ``config.endpoints`` decides whom to observe (suite ``observe:``, ``--observe``) and probes
  each exporter once before the run (``exporter.probe``, which also reads the host's facts);
* ``sampler.observing`` scrapes every exporter once a second in a background thread per host
  while a job runs (file layout and ramp included, marked by the job's measured window) and
  records failed scrapes as gaps: an observer never stops a run;
* or, with ``prometheus:``, ``prometheus.read`` fetches the same series afterwards from a
  Prometheus server that scrapes the exporters anyway;
* ``usage`` turns the samples into per-job figures (pure functions): CPU seconds by mode, CPU
  µs per I/O, NIC bytes/s against link speed, per-device I/Os, bytes and busy time, bcache
  counters. The samples are stored with the result (``Store.save_result(observations=…)``),
  the figures in ``extra["observed"]``.
Imports ``describe/``, ``remote.hosts``, ``facts/`` and ground.
"""
