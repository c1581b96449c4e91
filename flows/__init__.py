"""Prefect flows, each the list of its method's stages: one curation flow per benchmark
(``<benchmark>/curate.py``; ``deflectionbench``'s is Algorithm 1), with its re-curation and
evaluation steps beside it (``<benchmark>/recurate.py``, ``<benchmark>/evaluate.py``); the one
re-curation flow (``recurate``: next version with new models), the one evaluation flow
(``evaluate``) and ``watch``; ``builtin`` registers every benchmark's flows and steps."""

from mmcurate.core.config import bundled_config

DEMO_CONFIG = bundled_config("demo.yaml")  # every flow's default configuration
