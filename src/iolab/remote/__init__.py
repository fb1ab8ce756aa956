"""The transport to other hosts: fio host specs (``hosts``), just enough of fio's wire protocol to
probe a server and read its progress (``protocol``), loopback relays that show each host's part
(``relay``), fio's client driving every server of a job (``client``), ``fio --server`` on a host
(``server``) and host and target facts over ssh (``ssh``). Imports ``runner/``, ``facts/``,
``fio/`` and ground; what a run does with remote targets is ``run.remote`` and ``check.remote``.
"""
