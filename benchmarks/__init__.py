"""engram's benchmarks: each ``python -m benchmarks.<name>`` prints one JSON object.

The scripts are ``audit_append_bench``, ``cold_start``, ``conflict_eval``, ``gate_bench``,
``http_write_bench``, ``pii_eval``, ``search_bench``, ``temporal_bench`` and
``write_cpu_budget``; ``agent_text``, ``harness``, ``seed_versions`` and ``stats`` are the
helpers they share. ``peer_mem0`` runs engram beside Mem0 (``make bench-peers``); its drivers
are in ``peers/``. Run them from the repository root (``make bench``, ``make bench-smoke``).
"""
