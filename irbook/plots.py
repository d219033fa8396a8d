"""Deprecated alias module, removed in the next release.

The plots moved to irbook.figures (appendix "How the figures are drawn"), apart from the
metrics and statistics they draw.
"""

import warnings

from .figures import (  # noqa: F401
    LABEL_COLORS,
    label_color,
    plot_at_k,
    plot_average_precision,
    plot_bootstrap_diff,
    plot_bpref_pairs,
    plot_dcg_vs_ideal,
    plot_first_relevant,
    plot_forest,
    plot_gains,
    plot_log_discount,
    plot_query,
    plot_ranking,
    plot_rbp_weights,
)
from .metrics import *  # noqa: F403

warnings.warn(
    "irbook.plots is deprecated: import plots from irbook.figures",
    DeprecationWarning,
    stacklevel=2,
)
