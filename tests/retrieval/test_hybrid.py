"""Hybrid retrieval: RRF and linear fusion on rankings small enough to fuse by hand, through
``evaluate`` with tapt's own retrievers, and ``tapt eval --hybrid bm25`` end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tapt import DenseRetriever, Encoder, evaluate
from tapt.data.beir import BeirDataset, Passage
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.dense import Retrieval
from tapt.retrieval.hybrid import (
    HybridRetriever,
    linear_fusion,
    min_max,
    reciprocal_rank_fusion,
)
from tapt.retrieval.metrics import METRIC_KEYS, trec_ranking

DENSE = {"q1": {"a": 0.9, "b": 0.8, "c": 0.7}, "q2": {"x": 0.3}}
SPARSE = {"q1": {"c": 12.0, "d": 5.0}, "q2": {}}


class Fixed:
    """A retriever that returns a fixed run (and records what it was asked)."""

    def __init__(self, name: str, run: dict, top_k: int = 100) -> None:
        self.name = name
        self.run = run
        self.top_k = top_k
        self.calls = 0

    def retrieve(self, corpus_ids, corpus_texts, query_ids, query_texts) -> Retrieval:
        self.calls += 1
        return Retrieval(run={q: dict(self.run.get(q, {})) for q in query_ids},
                         timings={"search_s": 0.5})


def order(docs: dict) -> list[str]:
    return [doc for doc, _ in trec_ranking(docs)]


def test_rrf_by_hand():
    fused = reciprocal_rank_fusion([DENSE, SPARSE], k=60)
    assert fused["q1"] == pytest.approx({"a": 1 / 61, "b": 1 / 62, "c": 1 / 63 + 1 / 61,
                                         "d": 1 / 62})
    # c is in both lists; b and d tie at 1/62 and trec_eval breaks ties by descending id.
    assert order(fused["q1"]) == ["c", "a", "d", "b"]
    assert fused["q2"] == pytest.approx({"x": 1 / 61})  # BM25 found nothing: dense alone
    k0 = reciprocal_rank_fusion([DENSE, SPARSE], k=0)
    assert k0["q1"] == pytest.approx({"a": 1.0, "b": 0.5, "c": 1 / 3 + 1.0, "d": 0.5})


def test_rrf_uses_ranks_not_scores():
    scaled = {"q1": {doc: 1000 * score for doc, score in DENSE["q1"].items()}}
    assert reciprocal_rank_fusion([scaled, SPARSE])["q1"] == \
        reciprocal_rank_fusion([DENSE, SPARSE])["q1"]


@pytest.mark.parametrize("alpha, expected_scores, expected_order", [
    # dense min-max: a 1, b 0.5, c 0; BM25 min-max: c 1, d 0; absent = 0
    (0.5, {"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.0}, ["c", "a", "b", "d"]),
    (0.8, {"a": 0.8, "b": 0.4, "c": 0.2, "d": 0.0}, ["a", "b", "c", "d"]),
    (0.2, {"a": 0.2, "b": 0.1, "c": 0.8, "d": 0.0}, ["c", "a", "b", "d"]),
    (1.0, {"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.0}, ["a", "b", "d", "c"]),
])
def test_linear_fusion_by_hand(alpha, expected_scores, expected_order):
    fused = linear_fusion(DENSE, SPARSE, alpha)
    assert fused["q1"] == pytest.approx(expected_scores)
    assert order(fused["q1"]) == expected_order
    assert fused["q2"] == pytest.approx({"x": alpha})  # one passage: min-max gives it 1


def test_min_max_edges():
    assert min_max({}) == {}
    assert min_max({"a": 3.0, "b": 3.0}) == {"a": 1.0, "b": 1.0}
    assert min_max({"a": -1.0, "b": 1.0, "c": 0.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_retriever_cuts_to_top_k_and_reports_both_parts():
    dense, sparse = Fixed("dense-model", DENSE), Fixed("bm25", SPARSE)
    hybrid = HybridRetriever(dense, sparse, fusion="rrf", top_k=2)
    retrieval = hybrid.retrieve(["a", "b", "c", "d", "x"], [""] * 5, ["q1", "q2"], ["", ""])
    assert retrieval.run == {"q1": pytest.approx({"c": 1 / 63 + 1 / 61, "a": 1 / 61}),
                             "q2": pytest.approx({"x": 1 / 61})}
    assert dense.calls == sparse.calls == 1
    timings = retrieval.timings
    for key in ("dense_s", "bm25_s", "fusion_s", "fusion_ms_per_query", "dense_search_s",
                "bm25_search_s"):
        assert key in timings and timings[key] >= 0
    assert hybrid.name == "dense-model+bm25-rrf"
    info = hybrid.result_info()["hybrid"]
    assert info["fusion"] == "rrf" and info["rrf_k"] == 60 and info["alpha"] is None
    assert info["depth"] == {"dense": 100, "sparse": 100} and info["top_k"] == 2
    assert "no score" in info["missing"]


def test_metrics_of_the_fused_ranking():
    dataset = BeirDataset(corpus={d: Passage(d) for d in "abcdx"},
                          queries={"q1": "q", "q2": "r"},
                          qrels={"test": {"q1": {"a": 3, "d": 1}}}, source="memory")
    rrf = evaluate(HybridRetriever(Fixed("dense", DENSE), Fixed("bm25", SPARSE)), dataset,
                   "test")
    # fused order c, a, d, b: the anchor a at rank 2, the soft negative d at rank 3
    assert rrf.metrics["mrr@10"] == pytest.approx(0.5)
    assert rrf.metrics["binary_ndcg@10"] == pytest.approx(1 / math.log2(3))
    graded = (3 / math.log2(3) + 1 / math.log2(4)) / (3 + 1 / math.log2(3))
    assert rrf.metrics["graded_ndcg@10"] == pytest.approx(graded)
    linear = evaluate(HybridRetriever(Fixed("dense", DENSE), Fixed("bm25", SPARSE),
                                      fusion="linear", alpha=0.8), dataset, "test")
    assert linear.metrics["mrr@10"] == 1.0  # a, b, c, d
    assert linear.run["q1"] == pytest.approx({"a": 0.8, "b": 0.4, "c": 0.2, "d": 0.0})


class KeywordEncoder(Encoder):
    """Dimension i counts KEYWORDS[i] (raw inner product)."""

    KEYWORDS = ("alpha", "beta", "gamma", "delta")
    name = "keywords"
    normalize = False
    embedding_dim = 4

    def encode_queries(self, texts, batch_size=32):
        return np.array([[t.split().count(w) for w in self.KEYWORDS] for t in texts],
                        dtype=np.float32).reshape(len(texts), 4)

    encode_corpus = encode_queries


def test_fusing_tapts_own_retrievers_equals_fusing_their_reports():
    dataset = BeirDataset(
        corpus={"a3": Passage("alpha alpha alpha"), "a1": Passage("alpha gamma gamma"),
                "b2": Passage("beta beta delta"), "g": Passage("gamma delta"),
                "x": Passage("a passage that mentions none of the keywords")},
        queries={"q1": "alpha gamma", "q2": "beta delta"},
        qrels={"test": {"q1": {"a1": 3}, "q2": {"b2": 3}}}, source="memory")
    dense = evaluate(DenseRetriever(KeywordEncoder(), progress=False), dataset, "test")
    sparse = evaluate(BM25Retriever(progress=False, stopwords=None), dataset, "test")
    hybrid = evaluate(HybridRetriever(DenseRetriever(KeywordEncoder(), progress=False),
                                      BM25Retriever(progress=False, stopwords=None)),
                      dataset, "test")
    assert hybrid.run == reciprocal_rank_fusion([dense.run, sparse.run])
    assert hybrid.info["model"] == "keywords+bm25-rrf"
    assert set(hybrid.run) == {"q1", "q2"}


@pytest.mark.parametrize("kwargs, message", [
    ({"fusion": "max"}, "fusion must be one of rrf, linear"),
    ({"fusion": "linear", "alpha": 1.5}, r"alpha \(the dense weight\) must be in \[0, 1\]"),
    ({"rrf_k": -1}, r"must be in \[0, 1000000\]"),
    ({"top_k": 0}, r"top_k must be in \[1, 100000\]"),
])
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HybridRetriever(Fixed("d", {}), Fixed("s", {}), **kwargs)


# --- tapt eval --hybrid bm25, end to end --------------------------------------------------

def read_run(path: Path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        query_id, _, doc_id, _, score, _ = line.split()
        run.setdefault(query_id, {})[doc_id] = float(score)
    return run


def test_cli_eval_hybrid_bm25(tiny_bert_path, tiny_beir_path, tmp_path):
    from tapt.cli import main

    common = ["--data", str(tiny_beir_path), "--split", "test", "--quiet"]
    assert main(["eval", "--model", str(tiny_bert_path), *common,
                 "--run", str(tmp_path / "dense.trec")]) == 0
    assert main(["bm25", *common, "--run", str(tmp_path / "bm25.trec")]) == 0
    out, run = tmp_path / "hybrid.json", tmp_path / "hybrid.trec"
    assert main(["eval", "--model", str(tiny_bert_path), "--hybrid", "bm25", *common,
                 "--output", str(out), "--run", str(run)]) == 0
    data = json.loads(out.read_text())
    for key in METRIC_KEYS:
        assert 0.0 <= data[key] <= 1.0
    evaluated = data["evaluated"]
    assert evaluated["model"] == f"{tiny_bert_path}+bm25-rrf"
    assert evaluated["hybrid"] == {
        "dense": str(tiny_bert_path), "sparse": "bm25",
        "sparse_settings": {"k1": 1.5, "b": 0.75, "stopwords": "en"},
        "fusion": "rrf", "rrf_k": 60.0, "alpha": None, "normalization": None,
        "depth": {"dense": 100, "sparse": 100}, "top_k": 100,
        "missing": evaluated["hybrid"]["missing"]}
    timings = data["timings"]
    for key in ("dense_s", "bm25_s", "fusion_s", "dense_corpus_encode_s",
                "dense_passages_per_s", "bm25_search_s"):
        assert timings[key] >= 0, key
    # The fused run is exactly RRF over the two systems' own runs.
    expected = reciprocal_rank_fusion([read_run(tmp_path / "dense.trec"),
                                       read_run(tmp_path / "bm25.trec")])
    fused = read_run(run)
    assert set(fused) == set(expected)
    for query_id, docs in fused.items():
        assert docs == pytest.approx(expected[query_id])
    assert {line.split()[5] for line in run.read_text().splitlines()} == \
        {"tiny-bert+bm25-rrf"}


def test_cli_eval_hybrid_linear_records_alpha(tiny_bert_path, tiny_beir_path, tmp_path):
    from tapt.cli import main

    out = tmp_path / "linear.json"
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--hybrid", "bm25", "--fusion", "linear", "--alpha", "0.7",
                 "--fusion-depth", "20", "--top-k", "10", "--output", str(out),
                 "--quiet"]) == 0
    hybrid = json.loads(out.read_text())["evaluated"]["hybrid"]
    assert (hybrid["fusion"], hybrid["alpha"], hybrid["rrf_k"]) == ("linear", 0.7, None)
    assert hybrid["depth"] == {"dense": 20, "sparse": 20} and hybrid["top_k"] == 10
    assert hybrid["normalization"].startswith("min-max")
    with pytest.raises(SystemExit) as refused:  # --alpha's type: a number in [0, 1]
        main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
              "--hybrid", "bm25", "--fusion", "linear", "--alpha", "1.5", "--quiet"])
    assert refused.value.code == 2
