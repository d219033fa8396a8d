"""`Positions` (a batch as the ranks of its judged docs) scores every measure it allows
exactly as `to_ranked` + `score_ranked` do, bit for bit, in every convention: ties of
mixed labels, pooled labels (< 0), queries on one side only, padded widths."""

import numpy as np
import pytest

from irbook.metrics import (
    Columns,
    evaluate,
    positions_ok,
    score_positions,
    score_ranked,
    to_positions,
    to_ranked,
)
from irbook.metrics.stream import evaluate_file

NAMES = [
    "hits@5", "hit_rate@3", "precision@10", "precision", "recall@20", "recall",
    "f1@5", "f1", "r-precision", "mrr", "mrr@3", "map", "map@7", "num_ret",
    "num_ret@4", "num_rel", "num_rel_ret", "num_rel_ret@2", "ndcg@10", "ndcg@3",
    "dcg@5", "ndcg_burges@10", "dcg_burges@40", "hits-l2", "map-l2", "ndcg@10-l2",
    "precision@5-l0", "recall-l3", "mrr-l0",
]  # fmt: skip


def random_case(rng) -> tuple:
    "Random graded qrels and a run (dicts) written in score order, ties kept."
    qrels, run = {}, {}
    for qi in range(rng.integers(1, 8)):
        q = f"q{qi}"
        docs = [f"d{x}" for x in rng.choice(60, rng.integers(1, 40), replace=False)]
        for d in docs[: rng.integers(0, len(docs) + 1)]:
            qrels.setdefault(q, {})[d] = int(rng.integers(-1, 4))
        if rng.random() < 0.15:  # a query the run lacks
            continue
        n = int(rng.integers(0, 30))
        rd = [f"d{x}" for x in rng.choice(60, n, replace=False)]
        tied = rng.random() < 0.5  # few distinct scores: many ties
        sc = rng.integers(0, 6, n).astype(float) if tied else rng.random(n).round(2)
        order = np.argsort(-sc, kind="stable")
        if rng.random() < 0.2:  # not in score order at all
            order = rng.permutation(n)
        run[q] = {rd[i]: float(sc[i]) for i in order}
    return qrels, {q: d for q, d in run.items() if d}


@pytest.mark.parametrize("counted,chunk", [(8, 2**21), (0, 2**21), (40, 7)])
@pytest.mark.parametrize("seed", range(2))
def test_positions_equal_ranked(seed, counted, chunk, monkeypatch):
    """Equal bits, a judged doc's rank counted (up to `counted` a ranking, `chunk`
    comparisons at a time: 7 cuts every ranking apart) or read from a sort."""
    import irbook.metrics.positions as P

    monkeypatch.setattr(P, "_COUNTED", counted)
    monkeypatch.setattr(P, "_CHUNK", chunk)
    rng = np.random.default_rng(seed)
    assert positions_ok(NAMES)
    checked = 0
    for _ in range(25):
        qrels, run = random_case(rng)
        if not qrels or not run:
            continue
        qc, rc = Columns.from_dict(qrels, "qrels"), Columns.from_dict(run, "run")
        for conv in ("ranx", "trec_eval", "pytrec_eval"):
            for mc in (False, True):
                widths = None
                if rng.random() < 0.5:
                    widths = (int(rng.integers(0, 50)), int(rng.integers(0, 50)))
                try:
                    r = to_ranked(qc, rc, mc, convention=conv, widths=widths)
                except ValueError:  # the convention refuses the query sets
                    with pytest.raises(ValueError):
                        to_positions(qc, rc, mc, convention=conv, widths=widths)
                    continue
                p = to_positions(qc, rc, mc, convention=conv, widths=widths)
                want, got = score_ranked(r, NAMES), score_positions(p, NAMES)
                assert p.query_ids == r.query_ids
                assert p.n_retrieved.tolist() == r.n_retrieved.tolist()
                for m in NAMES:  # the same bits, not only close
                    assert want[m].tobytes() == got[m].tobytes(), (conv, mc, m)
                checked += 1
    assert checked > 60


def test_positions_refuse():
    "What reads more than the judged ranks is left to `to_ranked`."
    refused = (["map", "bpref"], ["P(judged_only=True)@5"], ["ndcg"], ["rbp.5"],
               ["ndcg@10", "err@10"], ["compat"], ["iprec_at_recall_0.50"])  # fmt: skip
    for names in refused:
        assert not positions_ok(names), names


def test_ties_broken_as_the_convention_breaks_them():
    "A relevant doc tied with an unjudged one: its rank is the convention's."
    qrels = {"q": {"a": 1}}
    run = {"q": {"b": 0.5, "a": 0.5, "c": 0.1}}  # a after b in the file
    qc, rc = Columns.from_dict(qrels, "qrels"), Columns.from_dict(run, "run")
    # trec_eval: ties by doc id descending, so b (above a) stays first
    assert to_positions(qc, rc, convention="trec_eval").rank.tolist() == [1]
    run = {"q": {"a": 0.5, "b": 0.5, "c": 0.1}}  # a first in the file: moved to 2nd
    rc = Columns.from_dict(run, "run")
    assert to_positions(qc, rc, convention="trec_eval").rank.tolist() == [1]
    assert evaluate(qc, rc, "mrr", convention="trec_eval") == 0.5


def test_stream_uses_positions_same_values(tmp_path):
    "The stream engine's values (positions) equal the memory engine's (`to_ranked`)."
    rng = np.random.default_rng(7)
    lines, qrels = [], {}
    for qi in range(150):
        q = str(1000 + qi)
        docs = rng.choice(5000, 60, replace=False)
        sc = np.sort(rng.normal(10, 2, 60).round(1))[::-1]  # ties of one decimal
        lines += [f"{q} Q0 {d} {i} {s} r\n" for i, (d, s) in enumerate(zip(docs, sc))]
        rel = rng.choice(docs, 3, replace=False) if qi % 5 else rng.choice(5000, 2)
        qrels[q] = {str(d): int(rng.integers(0, 3)) for d in rel}
    path = tmp_path / "run"
    path.write_text("".join(lines))
    names = ["ndcg@10", "mrr", "map@50", "recall@50", "P@5"]
    qc = Columns.from_dict(qrels, "qrels")
    run = Columns.from_dict(
        {q: {ln.split()[2]: float(ln.split()[4]) for ln in lines if ln.split()[0] == q}
         for q in qrels}, "run")  # fmt: skip
    for conv in ("trec_eval", "ranx"):
        want = evaluate(qc, run, names, convention=conv, per_query=True)
        for memory in (2**14, 2**30):  # many small batches, and one
            got = evaluate_file(qc, path, names, convention=conv, per_query=True,
                                memory=memory)  # fmt: skip
            assert got.loc[want.index].to_dict() == want.to_dict()


@pytest.mark.parametrize("form", ["dicts", "ranx"])
def test_evaluate_in_memory_equal_either_way(form, monkeypatch):
    "`evaluate` in memory scores from the judged ranks (`SCORERS`) as `to_ranked` does."
    from ranx import Qrels, Run

    import irbook.metrics.registry as R

    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(25):
        qrels, run = random_case(rng)
        if not qrels or not run:
            continue
        qrels = {q: {d: max(v, 0) for d, v in x.items()} for q, x in qrels.items()}
        if form == "ranx":  # ranx keeps positive labels only, and sorts the run
            qrels = {q: {d: v for d, v in x.items() if v > 0} for q, x in qrels.items()}
            qrels = {q: x for q, x in qrels.items() if x}
            if not qrels:
                continue
            qrels, run = Qrels(qrels), Run(run)
        for conv in ("ranx", "trec_eval"):
            kw = dict(per_query=True, make_comparable=True, convention=conv)
            fast = evaluate(qrels, run, NAMES, **kw)
            with monkeypatch.context() as m:
                m.setattr(R, "SCORERS", [])
                slow = evaluate(qrels, run, NAMES, **kw)
            assert fast.index.tolist() == slow.index.tolist()
            for col in NAMES:
                assert fast[col].to_numpy().tobytes() == slow[col].to_numpy().tobytes()
            checked += 1
    assert checked > 20
