"""mmcurate's own planners, registered as each benchmark's ``plan``, ``evaluation_plan`` and
``recuration_plan`` parts on import (``benchmarks.parts``): a layer that asks a benchmark for a
plan imports this first."""

from __future__ import annotations

from mmcurate.planning import bill as _bill  # noqa: F401
from mmcurate.planning import recuration as _recuration  # noqa: F401
