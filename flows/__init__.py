"""Prefect flows, each the list of its method's stages: ``deflectionbench`` (Algorithm 1),
``reflvqa``, ``recurate`` (next version with new models) and ``evaluate``."""
