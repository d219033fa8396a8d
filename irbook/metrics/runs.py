"""Deprecated alias module, removed in the next release.

`irbook.metrics.runs` became the engine's layers: `columns`, `io`, `conventions`,
`join` (appendix chapter 08_engine) and `registry` (chapter 1). Everything it exported
is importable from `irbook.metrics`.
"""

import warnings

from .columns import *  # noqa: F403
from .conventions import *  # noqa: F403
from .io import *  # noqa: F403
from .join import *  # noqa: F403
from .registry import *  # noqa: F403

warnings.warn(
    "irbook.metrics.runs is deprecated: import from irbook.metrics",
    DeprecationWarning,
    stacklevel=2,
)
