"""Shared data model: canonical sample schema, ids, image store, quarantine, ledger, config."""
