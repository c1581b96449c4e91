"""Prefect tasks: thin wrappers around library calls. ``stages.run_stage`` runs any stage per
shard on the configured task runner (``runners``); ``ingest``, ``release`` and ``evaluate``
wrap the other steps; ``models`` reads Prefect Secret blocks for the model layer."""
