"""irbook.metrics: every ranx metric, and the engine under them.

The engine, lowest layer first (appendix chapter `08_engine`, except where noted):
- `columns`: `Columns`, a qrels or run as flat arrays, and every input check
- `io`: the only code that opens a qrels or run file (TREC text, .gz, parquet,
  ranx lz4/json)
- `conventions`: named rule sets (ranx, trec_eval 10, pytrec_eval): rank order, query
  rule, metric details
- `join`: qrels and run joined into one `Joined` record, then `Ranked`, the input of
  every metric
- `positions`: `Positions`, a batch as the ranks of its judged documents only, from
  which the stream engine scores the measures that read nothing else
- `registry` (chapter 1): metric names (ranx's and trec_eval's), `register`,
  `parse_metric`, `evaluate`, `OFFICIAL`
The metrics, one module per chapter of Part I:
- `sets` (chapter 2): hits, hit rate, precision, recall, F1, R-precision
- `rank` (chapter 3): MRR, MAP, RBP, bpref
- `graded` (chapter 4): DCG, NDCG (and Burges' variants)
- `ranx_compat` (appendix 6): ranx's tie order and ranx-object reading

Importing the package registers every metric and the engines `evaluate(engine=...)`
hands a run file to (`stream`: bounded memory; `distributed`: dask), so `evaluate`
knows ranx's fourteen names (`METRICS`) and the trec_eval measures ranx lacks
(`TREC_ONLY`). The chapters' diagrams
are drawn by `irbook.figures`, above this package: evaluating loads no plotting library.
"""

from ..core import QueryMismatch, check_k  # noqa: F401
from .columns import *  # noqa: F403
from .conventions import *  # noqa: F403
from .graded import *  # noqa: F403
from .io import *  # noqa: F403
from .join import *  # noqa: F403
from .positions import *  # noqa: F403
from .rank import *  # noqa: F403
from .ranx_compat import numba_argsort, ranx_order  # noqa: F401
from .registry import *  # noqa: F403
from .sets import *  # noqa: F403
from .trec import *  # noqa: F403

# the engines `evaluate(engine=...)` can hand a run file to: in bounded memory, or dask
from .distributed import evaluate_distributed as _dask  # noqa: E402
from .stream import evaluate_file as _batches  # noqa: E402

ENGINES.update(stream=_batches, dask=_dask)  # noqa: F405
# and the way to score from the judged docs' ranks alone (`positions`) where it applies
SCORERS.append(score_batch)  # noqa: F405
