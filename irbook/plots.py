"""Deprecated alias module, removed in the next release.

The plots moved beside their metrics (irbook.metrics.sets, .rank, .graded) and the
bootstrap plots to irbook.stats.
"""

import warnings

from .metrics import *  # noqa: F403
from .metrics.graded import (  # noqa: F401
    plot_dcg_vs_ideal,
    plot_gains,
    plot_log_discount,
)
from .metrics.rank import (  # noqa: F401
    plot_average_precision,
    plot_bpref_pairs,
    plot_first_relevant,
    plot_rbp_weights,
)
from .metrics.sets import (  # noqa: F401
    LABEL_COLORS,
    label_color,
    plot_at_k,
    plot_query,
    plot_ranking,
)
from .stats import plot_bootstrap_diff, plot_forest  # noqa: F401

warnings.warn(
    "irbook.plots is deprecated: import plots from irbook.metrics (or irbook.stats)",
    DeprecationWarning,
    stacklevel=2,
)
