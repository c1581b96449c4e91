"""Prefect flows, each the list of its method's stages: one curation flow per benchmark
(``deflectionbench`` is Algorithm 1), the one re-curation flow (``recurate``: next version with
new models), the one evaluation flow (``evaluate``) and ``watch``."""
from mmcurate.core.config import bundled_config

DEMO_CONFIG = bundled_config("demo.yaml")  # every flow's default configuration
