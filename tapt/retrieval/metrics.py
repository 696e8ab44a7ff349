"""FormBench retrieval metrics, computed by pytrec_eval (trec_eval's definitions).

- ``binary_ndcg@10``: nDCG@10 where only relevant passages count, gain 1 (the paper's
  primary metric).
- ``graded_ndcg@10``: nDCG@10 with the grades as gains (FormBench: 3 / 2 / 1).
- ``mrr@10``: reciprocal rank of the first relevant passage within the top 10.
- ``recall@100``: share of relevant passages retrieved in the top 100.

Relevant means graded ``>= relevant_from``: the dataset's relevance rule
(:mod:`tapt.data.relevance`; FormBench: anchors, grade >= 3; BEIR: grade >= 1).

Ties in score are broken as trec_eval does (by descending document id), so results
match ``trec_eval`` run on the same run file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytrec_eval

from tapt.data.beir import ANCHOR, Qrels, max_grade
from tapt.data.relevance import choose_rule

Run = dict[str, dict[str, float]]
"""query id -> {corpus id -> score} (the retrieved list, any order)."""

METRIC_KEYS = ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100")


@dataclass
class MetricResult:
    """Mean metrics over the evaluated queries and each query's own values."""

    mean: dict[str, float]
    per_query: dict[str, dict[str, float]]

    @property
    def num_queries(self) -> int:
        return len(self.per_query)


def binarize(qrels: Qrels, relevant_from: int = ANCHOR) -> Qrels:
    """Keep grade ``>= relevant_from`` as relevant (1), everything else as 0."""
    return {q: {d: int(s >= relevant_from) for d, s in docs.items()} for q, docs in qrels.items()}


def _evaluate(qrels: Qrels, run: Run, measures: set[str]) -> dict[str, dict[str, float]]:
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    return evaluator.evaluate(run)


def score_run(qrels: Qrels, run: Mapping[str, Mapping[str, float]], *,
              relevant_from: int | None = None) -> MetricResult:
    """Score ``run`` against graded ``qrels``; a grade ``>= relevant_from`` is relevant
    (None: the ``auto`` relevance rule on these qrels, 3 when a grade of 3 or more occurs,
    else 1).

    As in trec_eval, each metric averages over the queries that have at least one
    relevant passage under that metric: binary metrics over queries with a relevant
    passage, graded nDCG over queries with any positive grade. A judged query with nothing
    retrieved scores 0 (pytrec_eval alone would drop it); run entries for queries
    without qrels are ignored.

    Args:
        qrels: Query id -> {passage id -> grade}.
        run: Query id -> {passage id -> score}, any order, any depth (the metrics read
            the top 10 and the top 100).
        relevant_from: The lowest relevant grade; None: the ``auto`` rule.

    Returns:
        A :class:`MetricResult`: ``mean`` (each of :data:`METRIC_KEYS` averaged) and
        ``per_query`` (each query's own values).

    Raises:
        ValueError: no query has a relevant passage: every metric would be 0.

    Example::

        qrels = {"q1": {"d1": 3, "d2": 2}, "q2": {"d3": 3}}
        run = {"q1": {"d2": 0.9, "d1": 0.8}, "q2": {"d3": 0.7}}
        result = score_run(qrels, run)
        result.mean["mrr@10"]             # 0.75: q1's anchor at rank 2, q2's at rank 1
        result.per_query["q1"]["mrr@10"]  # 0.5
    """
    if relevant_from is None:
        relevant_from = choose_rule("auto", max_grade([qrels])).relevant_from
    binary = {q: docs for q, docs in binarize(qrels, relevant_from).items()
              if any(docs.values())}
    if not binary:
        raise ValueError(f"no query has a relevant passage (graded >= {relevant_from}): "
                         "every metric would be 0; choose the relevant grade "
                         "(--relevant-from N, data.relevant_from)")
    graded = {q: docs for q, docs in qrels.items() if any(s > 0 for s in docs.values())}
    full_run = {q: {d: float(s) for d, s in run.get(q, {}).items()} for q in graded}
    # pytrec_eval skips queries whose run is empty; they keep the 0.0 set below.
    scored_run = {q: docs for q, docs in full_run.items() if docs}
    binary_scores = _evaluate(binary, scored_run, {"ndcg_cut.10", "recall.100"})
    # MRR@10: trec_eval's recip_rank has no cut-off, so apply it on a top-10 run.
    top10 = {q: dict(trec_ranking(docs)[:10]) for q, docs in scored_run.items()}
    mrr_scores = _evaluate(binary, top10, {"recip_rank"})
    graded_scores = _evaluate(graded, scored_run, {"ndcg_cut.10"})
    per_query: dict[str, dict[str, float]] = {}
    for query_id in graded:
        values = {"graded_ndcg@10": graded_scores.get(query_id, {}).get("ndcg_cut_10", 0.0)}
        if query_id in binary:
            found = binary_scores.get(query_id, {})
            values["binary_ndcg@10"] = found.get("ndcg_cut_10", 0.0)
            values["mrr@10"] = mrr_scores.get(query_id, {}).get("recip_rank", 0.0)
            values["recall@100"] = found.get("recall_100", 0.0)
        per_query[query_id] = values
    mean = {}
    for key in METRIC_KEYS:
        values = [row[key] for row in per_query.values() if key in row]
        mean[key] = sum(values) / len(values) if values else 0.0
    return MetricResult(mean=mean, per_query=per_query)


def trec_ranking(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """``(doc id, score)`` pairs in trec_eval's order: descending score, ties by descending id."""
    return sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)
