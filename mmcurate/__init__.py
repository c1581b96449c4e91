"""mmcurate: curate and maintain retrieval-dependent multimodal benchmarks."""
from importlib.metadata import version

from mmcurate.core.config import ModelSpec, Settings, load_config
from mmcurate.core.errors import MmcurateError

__all__ = ["ModelSpec", "MmcurateError", "Settings", "load_config"]
__version__ = version("mmcurate")  # stated once, in pyproject.toml
