"""Drivers that run one system's side of a peer comparison (``benchmarks.peer_mem0``).

Each driver runs in its own process and reads one job (JSON) from standard input and prints
one result (JSON). :mod:`.workload` is shared by every driver and uses the standard library
only (and ``benchmarks.stats``, which does too), because the peers' drivers run in the peers'
own virtual environments, where engram is not installed.
"""
