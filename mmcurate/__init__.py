"""mmcurate: curate and maintain retrieval-dependent multimodal benchmarks."""

from importlib.metadata import version

import mmcurate.benchmarks  # noqa: F401  registers the built-in benchmarks and their config sections first
from mmcurate.core.config import ModelSpec, Settings, load_config
from mmcurate.core.errors import MmcurateError

__all__ = ["ModelSpec", "MmcurateError", "Settings", "load_config"]
__version__ = version("mmcurate")  # stated once, in pyproject.toml
