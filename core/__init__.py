"""The shared data model every package builds on: Arrow schemas (samples, ledger,
quarantine, documents), stable ids, the content-addressed image store, Parquet I/O, the
typed configuration and component specs, text normalisation and sentence splitting, and the
one stage shape (``stages.Stage``, ``StageContext``, ``StageResult``)."""
