"""Releases: drafts assembled from stage results (``<benchmark>/draft.py``, each with its release
kind and Great Expectations suite, ``<benchmark>/checks.py``), the atomic writer (``writer``),
reader, manifest and checksums, dataset card, Great Expectations validation, report and plots,
diffs between versions, ``why`` traces and publishing; ``builtin`` registers every release kind."""
