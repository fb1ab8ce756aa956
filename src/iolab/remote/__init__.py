"""Remote hosts: fio's client/server mode made reliable.

``hosts`` parses fio host specs, ``protocol`` speaks just enough of fio's wire protocol to probe a
server and read its progress messages, ``relay`` carries each host's connection through loopback
so that progress is seen per host, ``facts`` gathers host and target facts over ssh, ``server``
starts and stops ``fio --server``, and ``jobs`` ties them into the run (preflight, per-host
results, partial runs).
"""
