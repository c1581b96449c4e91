"""Releases: drafts assembled from stage results (``deflection``, ``reflvqa``), the atomic
writer (``writer``), reader, manifest and checksums, dataset card, Great Expectations
validation, report and plots, diffs between versions, ``why`` traces and publishing."""
