"""mmcurate: curate and maintain retrieval-dependent multimodal benchmarks."""
from mmcurate.core.config import ModelSpec, Settings, load_config
from mmcurate.core.errors import MmcurateError

__all__ = ["ModelSpec", "MmcurateError", "Settings", "load_config"]
__version__ = "0.1.0"
