"""Compat (Clarke et al. 2021) equals ir_measures' Compat, per query, on random inputs
that exercise its three tie rules: the run's ties (doc id ascending), the ideal's ties
between equal labels (the run's score, an unretrieved doc counting 0, negative scores
included), then the qrels' line order; graded labels, relevance levels, normalised and
not, every input form (dicts, a DataFrame, files in memory and streamed, the command).
"""

import json

import numpy as np
import pandas as pd
import pytest

ir_measures = pytest.importorskip("ir_measures")

from irbook.cli import main  # noqa: E402
from irbook.metrics import evaluate  # noqa: E402


def sample(seed, n=25):
    "Random graded qrels and a run with many tied and negative scores."
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(n):
        docs = [f"d{i}" for i in range(int(rng.integers(3, 30)))]
        judged = rng.choice(docs, int(rng.integers(1, len(docs) + 1)), replace=False)
        qrels[f"q{q}"] = {d: int(rng.choice([0, 1, 1, 2, 3])) for d in judged}
        depth = 0 if q % 7 == 3 else int(rng.integers(1, len(docs) + 1))
        picked = rng.choice(docs, depth, replace=False)
        scores = rng.integers(-3, 4, depth) / 2  # few values: ties; 0 and below too
        run[f"q{q}"] = {d: float(s) for d, s in zip(picked, scores)}
    run = {q: d for q, d in run.items() if d}  # a query without results: not in the run
    return qrels, run


def irm(qrels, run, measure):
    "ir_measures' per-query values {query: value}."
    Q = [ir_measures.Qrel(q, d, v) for q, ds in qrels.items() for d, v in ds.items()]
    R = [ir_measures.ScoredDoc(q, d, s) for q, ds in run.items() for d, s in ds.items()]
    return {m.query_id: m.value for m in ir_measures.iter_calc([measure], Q, R)}


NAMES = {  # irbook's spelling -> ir_measures' measure
    "Compat(p=0.8)": ir_measures.Compat(p=0.8),
    "compat": ir_measures.Compat,
    "compat.5": ir_measures.Compat(p=0.5),
    "Compat(p=0.9, normalize=False)": ir_measures.Compat(p=0.9, normalize=False),
    "compat_unnormalized.99": ir_measures.Compat(p=0.99, normalize=False),
}


@pytest.mark.parametrize("seed", range(6))
def test_equal_to_ir_measures_per_query(seed):
    qrels, run = sample(seed)
    got = evaluate(qrels, run, list(NAMES), per_query=True, make_comparable=True)
    for name, measure in NAMES.items():
        want = irm(qrels, run, measure)
        assert len(want) > 10
        for q, v in want.items():
            assert got.loc[q, name] == pytest.approx(v, abs=1e-12), (seed, name, q)
    # a qrels query missing from the run: an empty ranking, 0 (ir_measures skips it)
    missing = [q for q in qrels if q not in run]
    assert missing and (got.loc[missing].to_numpy() == 0).all()


def test_each_tie_rule_changes_the_value():
    "The cases that tell the rules apart: each would fail if its rule were dropped."
    run = {"q": {"a": 1.0, "b": 1.0, "c": 0.5}}
    cases = [
        ({"q": {"a": 1, "b": 1}}, run),  # the qrels' line order ...
        ({"q": {"b": 1, "a": 1}}, run),  # ... decides the ideal's tie
        ({"q": {"a": 1}}, {"q": {"a": 1.0, "z": 1.0}}),  # run ties: doc id up
        ({"q": {"z": 1}}, {"q": {"a": 1.0, "z": 1.0}}),
        ({"q": {"u": 1, "c": 1}}, {"q": {"c": 1.0}}),  # unretrieved: score 0
        ({"q": {"u": 1, "c": 1}}, {"q": {"c": -1.0}}),
    ]
    values = []
    for qrels, r in cases:
        got = evaluate(qrels, r, "Compat(p=0.8)")
        assert got == pytest.approx(irm(qrels, r, ir_measures.Compat(p=0.8))["q"])
        values.append(got)
    assert values[0] != values[1] and values[2] != values[3] and values[4] != values[5]


def test_relevance_level_and_options():
    qrels, run = sample(11)
    lifted = {q: {d: max(v - 1, 0) for d, v in ds.items()} for q, ds in qrels.items()}
    a = evaluate(
        qrels, run, "Compat(p=0.8, rel=2)", per_query=True, make_comparable=True
    )
    b = evaluate(lifted, run, "Compat(p=0.8)", per_query=True, make_comparable=True)
    # rel=2 keeps labels >= 2 in the ideal, in the same order as labels - 1 >= 1
    assert np.allclose(a.to_numpy(), b.to_numpy(), atol=1e-12)
    # judged_only: the unjudged docs dropped first, as if the run never held them
    judged = {
        q: {d: s for d, s in ds.items() if d in qrels[q]} for q, ds in run.items()
    }
    c = evaluate(qrels, run, "Compat(judged_only=True, p=0.8)", make_comparable=True)
    d = evaluate(qrels, judged, "Compat(p=0.8)", make_comparable=True)
    assert c == pytest.approx(d, abs=1e-12)
    with pytest.raises(ValueError, match="persistence"):
        evaluate(qrels, run, "Compat(p=1.5)")


def write(tmp_path, qrels, run):
    q, r = tmp_path / "qrels.txt", tmp_path / "run.txt"
    q.write_text(
        "".join(f"{a} 0 {d} {v}\n" for a, ds in qrels.items() for d, v in ds.items())
    )
    r.write_text("".join(
        f"{a} Q0 {d} {i} {s!r} t\n" for a, ds in run.items()
        for i, (d, s) in enumerate(ds.items())
    ))  # fmt: skip
    return q, r


def test_every_input_form_and_engine(tmp_path, capsys):
    qrels, run = sample(3)
    run = {q: ds for q, ds in run.items()}
    common = {q: ds for q, ds in qrels.items() if q in run}  # trec_eval's rule needs it
    want = irm(common, run, ir_measures.Compat(p=0.8))
    mean = float(np.mean(list(want.values())))
    q, r = write(tmp_path, common, run)
    frame = pd.DataFrame(
        [(a, d, s) for a, ds in run.items() for d, s in ds.items()],
        columns=["query_id", "doc_id", "score"],
    )
    for got in [
        evaluate(common, run, "Compat(p=0.8)"),
        evaluate(common, frame, "Compat(p=0.8)"),
        evaluate(q, r, "Compat(p=0.8)"),
        evaluate(q, r, "Compat(p=0.8)", engine="stream", memory=1),
        evaluate(q, r, "Compat(p=0.8)", convention="trec_eval"),
    ]:
        assert got == pytest.approx(mean, abs=1e-12)
    assert (
        main(["eval", str(q), str(r), "-m", "Compat(p=0.8)", "--format", "json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["Compat(p=0.8)"] == pytest.approx(mean)
