"""The bill before the run: expected requests, tokens, GPU-hours and judge cost of a curation
config, computed from the stages' own request builders and the retention rates of an
earlier release, a dry run or the paper (``mmcurate plan``). No model is called."""
