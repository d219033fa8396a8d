"""irbook.metrics: every ranx metric, one module per chapter of Part I.

- `runs` (chapter 1): TREC readers, `Ranked`, `to_ranked`, the registry, `evaluate`
- `sets` (chapter 2): hits, hit rate, precision, recall, F1, R-precision, plots
- `rank` (chapter 3): MRR, MAP, RBP, bpref, and their plots
- `graded` (chapter 4): DCG, NDCG (and Burges' variants), and their plots
- `ranx_compat` (appendix): ranx's tie order and ranx-object reading

Importing the package registers every metric, so `evaluate` knows all fourteen names.
"""

import warnings

from ..core import QueryMismatch, check_k  # noqa: F401
from .graded import *  # noqa: F403
from .rank import *  # noqa: F403
from .ranx_compat import numba_argsort, ranx_order  # noqa: F401
from .runs import *  # noqa: F403
from .sets import *  # noqa: F403

_MOVED = {"vs_ranx": "irbook.stats"}  # deprecated aliases, removed in the next release


def __getattr__(name):
    if name in _MOVED:
        import importlib  # on first use only: irbook.stats imports this package

        warnings.warn(
            f"irbook.metrics.{name} moved to {_MOVED[name]}.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module 'irbook.metrics' has no attribute {name!r}")
