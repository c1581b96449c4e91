"""mmcurate's own evaluation checks and refusals, registered as each benchmark's
``evaluation_check`` and ``evaluation_refuse`` parts on import (``benchmarks.parts``): a layer that
checks a benchmark's evaluation options imports this first."""

from __future__ import annotations

from mmcurate.evaluation.cragmm import cruise as _cragmm  # noqa: F401
from mmcurate.evaluation.deflectionbench import scenarios as _deflectionbench  # noqa: F401
from mmcurate.evaluation.pope import probes as _pope  # noqa: F401
from mmcurate.evaluation.reflvqa import settings as _reflvqa_settings  # noqa: F401
from mmcurate.evaluation.reflvqa import subset as _reflvqa_subset  # noqa: F401
