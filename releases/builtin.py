"""mmcurate's own release kinds, registered as each benchmark's ``release`` part on import
(``benchmarks.parts``): a layer that asks a benchmark for its release kind imports this first."""

from __future__ import annotations

from mmcurate.releases.cragmm import draft as _cragmm  # noqa: F401
from mmcurate.releases.deflectionbench import draft as _deflectionbench  # noqa: F401
from mmcurate.releases.pope import draft as _pope  # noqa: F401
from mmcurate.releases.reflectv import draft as _reflectv  # noqa: F401
from mmcurate.releases.reflvqa import draft as _reflvqa  # noqa: F401
