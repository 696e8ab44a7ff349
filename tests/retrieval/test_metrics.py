"""score_run against hand-computed values (trec_eval definitions) and the TREC run file.

trec_eval conventions used below:
- nDCG@10: DCG = sum over ranks r <= 10 of gain / log2(r + 1), gain = the qrels grade
  (binary: 1 for anchors, grade >= 3); IDCG = DCG of the ideal ordering of the judgments.
- ranking: by score descending, ties broken by document id descending.
- a query with no relevant judgment is left out of that metric's mean.
"""

from __future__ import annotations

import math

import pytest

from tapt.retrieval.evaluate import EvalReport
from tapt.retrieval.metrics import METRIC_KEYS, binarize, score_run

L3, L5, L11 = math.log2(3), math.log2(5), math.log2(11)  # discounts at ranks 2, 4, 10
BINARY = ("binary_ndcg@10", "mrr@10", "recall@100")


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def approx(value):
    return pytest.approx(value, abs=1e-9)


def one(qrels, run, query="q", **kwargs) -> dict[str, float]:
    """Per-query values of ``query``; checks the mean equals them for a single query."""
    result = score_run(qrels, run, **kwargs)
    assert set(result.per_query) == {query}
    for key, value in result.per_query[query].items():
        assert result.mean[key] == approx(value)
    return result.per_query[query]


def filler(count: int, start: float = 0.9, step: float = 0.001, prefix: str = "n") -> dict:
    """``count`` unjudged documents with strictly decreasing scores."""
    return {f"{prefix}{i:03d}": start - i * step for i in range(count)}


# --------------------------------------------------------------------------- single queries

def test_anchor_at_rank_1():
    qrels = {"q": {"a": 3, "h": 2, "s": 1}}
    run = {"q": {"a": 0.9, "x": 0.8, "h": 0.7, "s": 0.6}}
    values = one(qrels, run)
    assert values["binary_ndcg@10"] == approx(1.0)  # (1/log2(2)) / (1/log2(2))
    assert values["mrr@10"] == approx(1.0)
    assert values["recall@100"] == approx(1.0)
    # DCG = 3/log2(2) + 0/log2(3) + 2/log2(4) + 1/log2(5) = 3 + 0 + 1 + 1/log2(5)
    # IDCG = 3/log2(2) + 2/log2(3) + 1/log2(4) = 3 + 2/log2(3) + 0.5
    assert values["graded_ndcg@10"] == approx((3 + 1 + 1 / L5) / (3 + 2 / L3 + 0.5))


def test_anchor_at_rank_3_below_hard_negative():
    qrels = {"q": {"a": 3, "h": 2, "s": 1}}
    run = {"q": {"h": 0.9, "x": 0.8, "a": 0.7, "s": 0.6}}
    values = one(qrels, run)
    assert values["binary_ndcg@10"] == approx(0.5)  # (1/log2(4)) / (1/log2(2)) = 1/2
    assert values["mrr@10"] == approx(1 / 3)
    assert values["recall@100"] == approx(1.0)
    # DCG = 2/log2(2) + 0 + 3/log2(4) + 1/log2(5) = 2 + 1.5 + 1/log2(5)
    # IDCG = 3 + 2/log2(3) + 1/log2(4)
    assert values["graded_ndcg@10"] == approx((2 + 1.5 + 1 / L5) / (3 + 2 / L3 + 0.5))


def test_graded_gain_is_linear_in_the_grade():
    # a soft negative at rank 1 then the anchor: DCG = 1/1 + 3/log2(3);
    # IDCG = 3/1 + 1/log2(3). With exponential gains (2^g - 1) it would differ.
    values = one({"q": {"a": 3, "s": 1}}, {"q": {"s": 0.9, "a": 0.8}})
    assert values["graded_ndcg@10"] == approx((1 + 3 / L3) / (3 + 1 / L3))
    assert values["binary_ndcg@10"] == approx(1 / L3)  # (1/log2(3)) / 1


def test_anchor_not_retrieved():
    qrels = {"q": {"a": 3, "h": 2}}
    values = one(qrels, {"q": {"h": 0.9, "x": 0.8}})
    assert [values[k] for k in BINARY] == [0.0, 0.0, 0.0]
    # DCG = 2/log2(2) = 2; IDCG = 3/log2(2) + 2/log2(3)
    assert values["graded_ndcg@10"] == approx(2 / (3 + 2 / L3))


def test_anchor_at_rank_10_and_rank_11():
    qrels = {"q": {"a": 3}}
    at_10 = one(qrels, {"q": {**filler(9), "a": 0.1}})
    assert at_10["mrr@10"] == approx(1 / 10)
    assert at_10["binary_ndcg@10"] == approx(1 / L11)  # (1/log2(11)) / 1
    assert at_10["recall@100"] == approx(1.0)
    at_11 = one(qrels, {"q": {**filler(10), "a": 0.1}})
    assert at_11["mrr@10"] == 0.0
    assert at_11["binary_ndcg@10"] == 0.0
    assert at_11["recall@100"] == approx(1.0)


def test_recall_at_100_with_two_anchors():
    qrels = {"q": {"a1": 3, "a2": 3, "h": 2}}
    # ranks: h 1, a1 2, 98 unjudged at 3..100, a2 at 101
    run = {"q": {"h": 0.99, "a1": 0.98, **filler(98), "a2": 0.0001}}
    values = one(qrels, run)
    assert values["recall@100"] == approx(1 / 2)  # 1 of the 2 anchors in the top 100
    assert values["mrr@10"] == approx(1 / 2)
    # DCG = 1/log2(3); IDCG = 1/log2(2) + 1/log2(3)
    assert values["binary_ndcg@10"] == approx((1 / L3) / (1 + 1 / L3))
    # DCG = 2/log2(2) + 3/log2(3); IDCG = 3/log2(2) + 3/log2(3) + 2/log2(4)
    assert values["graded_ndcg@10"] == approx((2 + 3 / L3) / (3 + 3 / L3 + 1))
    # one unjudged document fewer puts a2 at rank 100: both anchors found
    run = {"q": {"h": 0.99, "a1": 0.98, **filler(97), "a2": 0.0001}}
    assert one(qrels, run)["recall@100"] == approx(1.0)


def test_anchor_grade_above_3_is_relevant_and_grade_0_is_not():
    qrels = {"q": {"z": 0, "a": 4}}
    values = one(qrels, {"q": {"z": 0.9, "a": 0.8}})
    assert values["binary_ndcg@10"] == approx(1 / L3)  # the anchor at rank 2
    assert values["mrr@10"] == approx(1 / 2)
    assert values["graded_ndcg@10"] == approx((4 / L3) / 4)  # 4/log2(3) over 4/log2(2)


def test_relevant_from_lowers_the_binary_threshold():
    qrels = {"q": {"a": 3, "h": 2, "s": 1}}
    run = {"q": {"h": 0.9, "x": 0.8, "a": 0.7}}
    values = one(qrels, run, relevant_from=2)
    # relevant: a, h. DCG = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3)
    assert values["binary_ndcg@10"] == approx(1.5 / (1 + 1 / L3))
    assert values["mrr@10"] == approx(1.0)
    assert values["recall@100"] == approx(1.0)


def test_binarize():
    assert binarize({"q": {"a": 3, "b": 2, "c": 4, "d": 0}}) == \
        {"q": {"a": 1, "b": 0, "c": 1, "d": 0}}
    assert binarize({"q": {"a": 3, "b": 2}}, relevant_from=2) == {"q": {"a": 1, "b": 1}}


# --------------------------------------------------------------------------- ties

def test_ties_broken_by_descending_doc_id_not_insertion_order():
    # d1 (the anchor) is inserted first; trec_eval ranks d2 first (descending id)
    values = one({"q": {"d1": 3}}, {"q": {"d1": 0.5, "d2": 0.5}})
    assert values["binary_ndcg@10"] == approx(1 / L3)  # anchor at rank 2
    assert values["mrr@10"] == approx(1 / 2)
    # d1 inserted first again, but now d2 is the anchor: it ranks first
    values = one({"q": {"d2": 3}}, {"q": {"d1": 0.5, "d2": 0.5}})
    assert values["binary_ndcg@10"] == approx(1.0)
    assert values["mrr@10"] == approx(1.0)


def test_ties_compare_ids_as_strings():
    # "d9" > "d10" as strings, so d9 ranks first although 9 < 10
    values = one({"q": {"d10": 3}}, {"q": {"d10": 0.5, "d9": 0.5}})
    assert values["mrr@10"] == approx(1 / 2)


def test_tie_across_the_mrr_cut_off():
    # 9 higher-scored documents, then the anchor "a" and "z" tied for rank 10:
    # "z" > "a" takes rank 10, the anchor falls to rank 11 -> MRR@10 = 0, nDCG@10 = 0
    run = {"q": {**filler(9), "a": 0.1, "z": 0.1}}
    values = one({"q": {"a": 3}}, run)
    assert values["mrr@10"] == 0.0
    assert values["binary_ndcg@10"] == 0.0
    assert values["recall@100"] == approx(1.0)
    # with the anchor named "z" it takes rank 10
    values = one({"q": {"z": 3}}, run)
    assert values["mrr@10"] == approx(1 / 10)
    assert values["binary_ndcg@10"] == approx(1 / L11)


# --------------------------------------------------------------------------- means

def test_means_follow_trec_eval_conventions():
    qrels = {
        "qA": {"a": 3, "h": 2, "s": 1},   # anchor at rank 1
        "qB": {"b": 3, "h": 2, "s": 1},   # anchor at rank 3 below the hard negative
        "qN": {"h": 2, "s": 1},           # no anchor: graded nDCG only
        "qM": {"m": 3, "h": 2},           # judged, absent from the run
        "qX": {"x": 3, "h": 2},           # anchor not retrieved
        "qE": {"e": 3},                   # judged, empty ranking
        "q0": {"h": 0},                   # nothing relevant at all: left out
    }
    run = {
        "qA": {"a": 0.9, "u": 0.8, "h": 0.7, "s": 0.6},
        "qB": {"h": 0.9, "u": 0.8, "b": 0.7, "s": 0.6},
        "qN": {"s": 0.9, "h": 0.8},
        "qX": {"h": 0.9, "u": 0.8},
        "qE": {},
        "q0": {"h": 0.9},
        "qZ": {"z": 0.9},                 # no qrels: ignored
    }
    result = score_run(qrels, run)
    per = result.per_query
    assert set(per) == {"qA", "qB", "qN", "qM", "qX", "qE"}
    assert result.num_queries == 6
    assert set(per["qN"]) == {"graded_ndcg@10"}
    for query in ("qA", "qB", "qM", "qX", "qE"):
        assert set(per[query]) == set(METRIC_KEYS)
    for query in ("qM", "qE"):
        assert per[query] == {key: 0.0 for key in METRIC_KEYS}
    assert [per["qX"][k] for k in BINARY] == [0.0, 0.0, 0.0]

    graded = {
        "qA": (3 + 1 + 1 / L5) / (3 + 2 / L3 + 0.5),    # see test_anchor_at_rank_1
        "qB": (2 + 1.5 + 1 / L5) / (3 + 2 / L3 + 0.5),  # see test_anchor_at_rank_3...
        "qN": (1 + 2 / L3) / (2 + 1 / L3),   # s@1, h@2: 1/1 + 2/log2(3) over 2/1 + 1/log2(3)
        "qM": 0.0,
        "qX": 2 / (3 + 2 / L3),              # h@1: 2/1 over 3/1 + 2/log2(3)
        "qE": 0.0,
    }
    for query, value in graded.items():
        assert per[query]["graded_ndcg@10"] == approx(value)
    # binary metrics: mean over the 5 queries with an anchor (qA, qB, qM, qX, qE)
    assert result.mean["binary_ndcg@10"] == approx((1 + 0.5 + 0 + 0 + 0) / 5)
    assert result.mean["mrr@10"] == approx((1 + 1 / 3 + 0 + 0 + 0) / 5)
    assert result.mean["recall@100"] == approx((1 + 1 + 0 + 0 + 0) / 5)
    # graded nDCG: mean over the 6 queries with any positive grade (qN included)
    assert result.mean["graded_ndcg@10"] == approx(sum(graded.values()) / 6)


def test_queries_without_a_relevant_passage_are_an_error_not_zeros():
    with pytest.raises(ValueError, match="no query has a relevant passage"):
        score_run({"q": {"h": 2}}, {"q": {"h": 1.0}}, relevant_from=3)
    # without relevant_from, the auto rule: no grade 3 here, so BEIR's (grade >= 1)
    assert score_run({"q": {"h": 2}}, {"q": {"h": 1.0}}).mean == {
        key: approx(1.0) for key in METRIC_KEYS}


def test_integer_scores_in_the_run_are_accepted():
    values = one({"q": {"a": 3}}, {"q": {"b": 2, "a": 1}})
    assert values["mrr@10"] == approx(1 / 2)


# --------------------------------------------------------------------------- TREC run file

def report(run) -> EvalReport:
    return EvalReport(metrics={}, per_query={}, run=run, timings={})


def test_write_trec_run_lines_in_trec_order(tmp_path):
    run = {"q2": {"d1": 0.5, "d3": 0.9, "d2": 0.5, "d10": 0.25}, "q1": {"x": 1.0}}
    path = tmp_path / "nested" / "dir" / "run.trec"
    report(run).write_trec_run(path, tag="mytag")
    assert path.read_text(encoding="utf-8").splitlines() == [
        "q2 Q0 d3 1 0.9 mytag",
        "q2 Q0 d2 2 0.5 mytag",   # tie: descending id, d2 before d1
        "q2 Q0 d1 3 0.5 mytag",
        "q2 Q0 d10 4 0.25 mytag",
        "q1 Q0 x 1 1.0 mytag",
    ]
    report(run).write_trec_run(path)  # the default tag, file replaced
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 5 and all(line.endswith(" tapt") for line in lines)


def read_run(path) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        query_id, _, doc_id, _, score, _ = line.split()
        run.setdefault(query_id, {})[doc_id] = float(score)
    return run


def test_written_run_scores_like_the_in_memory_run(tmp_path):
    qrels = {"q1": {"a": 3, "h": 2}, "q2": {"b": 3, "s": 1}}
    run = {"q1": {"h": 0.875, "a": 0.5, "x": 0.5}, "q2": {"s": 0.25, "b": 0.125, "y": 0.125}}
    path = tmp_path / "run.trec"
    report(run).write_trec_run(path)
    assert score_run(qrels, read_run(path)) == score_run(qrels, run)


def test_written_run_keeps_near_ties_apart(tmp_path):
    qrels = {"q": {"a": 3}}
    run = {"q": {"a": 0.81234561, "b": 0.81234559}}  # the anchor is first in memory
    path = tmp_path / "run.trec"
    report(run).write_trec_run(path)
    assert score_run(qrels, read_run(path)).per_query == score_run(qrels, run).per_query
