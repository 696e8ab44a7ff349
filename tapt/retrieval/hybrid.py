"""Hybrid retrieval: a dense ranking fused with BM25's, scored like any other retriever.

:class:`HybridRetriever` runs two retrievers (tapt's :class:`~tapt.retrieval.dense.DenseRetriever`
and :class:`~tapt.retrieval.bm25.BM25Retriever`, or any objects with ``name`` and
``retrieve``) on the same corpus and queries, and fuses their runs per query:

- ``rrf`` (default), reciprocal rank fusion (Cormack et al., SIGIR 2009):
  ``score(d) = sum over systems of 1 / (k + rank(d))``, ranks from 1 in each system's
  list, ``k`` = 60 by default;
- ``linear``: ``alpha * dense'(d) + (1 - alpha) * sparse'(d)``, where ``x'`` is the
  system's score min-max normalised over that query's list (1 for the top, 0 for the
  last; every passage 1 when all scores are equal), ``alpha`` the dense weight.

Each system contributes only its own top-``depth`` list (the retrievers' ``top_k``, 100 by
default): a passage missing from one list gets no score from that system (0 in both
formulas), so it can still be ranked by the other. BM25 lists can be shorter than
``depth``: bm25s drops passages that share no term with the query. The fused list is cut
to ``top_k``, ranked as trec_eval ranks (ties by descending id), and
:func:`tapt.retrieval.evaluate.evaluate` scores it with the usual metrics.

:mod:`tapt.retrieval.fusion_tuning` picks ``k`` or ``alpha`` on a dev split from the two
systems' runs (:meth:`HybridRetriever.retrieve_parts`, :meth:`~HybridRetriever.fuse_parts`).

Example::

    hybrid = HybridRetriever(DenseRetriever(encoder), BM25Retriever(), fusion="rrf")
    report = evaluate(hybrid, dataset, "test")
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from tapt.retrieval.dense import Retrieval
from tapt.retrieval.metrics import Run, trec_ranking
from tapt.util.bounds import FRACTION, POSITIVE_INT, RRF_K, TOP_K

FUSIONS = ("rrf", "linear")
TUNED = "auto"
"""A fusion left to tuning (:mod:`tapt.retrieval.fusion_tuning`): RRF or linear, whichever
scores better on the tuning split."""
MISSING = "a passage absent from one system's top-depth list gets no score from that system"


def ranked(docs: Mapping[str, float]) -> list[str]:
    """Document ids best first, ties by descending id (trec_eval's order)."""
    return [doc for doc, _ in trec_ranking(docs)]


def reciprocal_rank_fusion(runs: Sequence[Run], k: float = 60) -> Run:
    """``sum 1 / (k + rank)`` over the runs in which a passage appears (rank 1 = best)."""
    k = RRF_K.check(k, "k (the RRF constant)")
    fused: Run = {}
    for run in runs:
        for query_id, docs in run.items():
            scores = fused.setdefault(query_id, {})
            for rank, doc in enumerate(ranked(docs), start=1):
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
    return fused


def min_max(docs: Mapping[str, float]) -> dict[str, float]:
    """Scores mapped to [0, 1] by the list's minimum and maximum (all 1 when they agree)."""
    if not docs:
        return {}
    low, high = min(docs.values()), max(docs.values())
    if high == low:
        return dict.fromkeys(docs, 1.0)
    return {doc: (score - low) / (high - low) for doc, score in docs.items()}


def linear_fusion(dense: Run, sparse: Run, alpha: float = 0.5) -> Run:
    """``alpha * minmax(dense) + (1 - alpha) * minmax(sparse)`` per query."""
    alpha = FRACTION.check(alpha, "alpha (the dense weight)")
    fused: Run = {}
    for query_id in dict.fromkeys([*dense, *sparse]):
        scores: dict[str, float] = {}
        for weight, run in ((alpha, dense), (1.0 - alpha, sparse)):
            for doc, value in min_max(run.get(query_id, {})).items():
                scores[doc] = scores.get(doc, 0.0) + weight * value
        fused[query_id] = scores
    return fused


def cut(run: Run, top_k: int) -> Run:
    """Each query's best ``top_k`` passages."""
    top_k = POSITIVE_INT.check(top_k, "top_k")
    return {query_id: dict(trec_ranking(docs)[:top_k]) for query_id, docs in run.items()}


class HybridRetriever:
    """Fuse a dense and a sparse retriever's top lists (see the module docstring).

    ``top_k`` is the length of the fused list; each system's depth is its own ``top_k``.
    ``encoder`` is the dense side's, so reports record its dtype.
    """

    def __init__(self, dense, sparse, *, fusion: str = "rrf", rrf_k: float = 60,
                 alpha: float = 0.5, top_k: int = 100) -> None:
        if fusion not in (*FUSIONS, TUNED):
            raise ValueError(f"fusion must be one of {', '.join((*FUSIONS, TUNED))}, got "
                             f"{fusion!r}")
        self.dense = dense
        self.sparse = sparse
        self.fusion = fusion
        self.rrf_k = RRF_K.check(rrf_k, "rrf_k") if fusion in ("rrf", TUNED) else rrf_k
        self.alpha = FRACTION.check(alpha, "alpha (the dense weight)") \
            if fusion in ("linear", TUNED) else alpha
        self.top_k = TOP_K.check(top_k, "top_k")

    @property
    def name(self) -> str:
        return f"{self.dense.name}+{self.sparse.name}-{self.fusion}"

    @property
    def encoder(self):
        return getattr(self.dense, "encoder", None)

    def fuse(self, dense: Run, sparse: Run) -> Run:
        if self.fusion == TUNED:
            raise ValueError("fusion auto is picked on a tuning split (tapt eval --tune-on "
                             "SPLIT); to fuse without tuning, give --fusion rrf or linear")
        if self.fusion == "rrf":
            fused = reciprocal_rank_fusion([dense, sparse], self.rrf_k)
        else:
            fused = linear_fusion(dense, sparse, self.alpha)
        return cut(fused, self.top_k)

    def with_fusion(self, fusion: str, value: float) -> HybridRetriever:
        """A copy fusing by ``fusion`` (rrf or linear) with ``value`` as its RRF ``k`` or
        its dense weight ``alpha``; the two systems are shared, not copied."""
        setting = "rrf_k" if fusion == "rrf" else "alpha"
        return HybridRetriever(self.dense, self.sparse, fusion=fusion, top_k=self.top_k,
                               **{"rrf_k": self.rrf_k, "alpha": self.alpha, setting: value})

    def with_setting(self, value: float) -> HybridRetriever:
        """A copy fusing with ``value`` as its RRF ``k`` (rrf) or dense weight ``alpha``
        (linear); the two systems are shared, not copied."""
        setting = "rrf_k" if self.fusion == "rrf" else "alpha"
        return HybridRetriever(self.dense, self.sparse, fusion=self.fusion, top_k=self.top_k,
                               **{"rrf_k": self.rrf_k, "alpha": self.alpha, setting: value})

    def retrieve_parts(self, corpus_ids: Sequence[str], corpus_texts: Sequence[str],
                       query_ids: Sequence[str], query_texts: Sequence[str]
                       ) -> tuple[Retrieval, Retrieval | None, dict[str, float]]:
        """Both systems' own retrievals, unfused, and their timings (prefixed as
        :meth:`retrieve` reports them); the sparse one is None on a DDP rank other than 0."""
        start = time.perf_counter()
        dense = self.dense.retrieve(corpus_ids, corpus_texts, query_ids, query_texts)
        dense_seconds = time.perf_counter() - start
        if dense.run is None:  # a DDP rank other than 0
            return dense, None, {}
        start = time.perf_counter()
        sparse = self.sparse.retrieve(corpus_ids, corpus_texts, query_ids, query_texts)
        sparse_seconds = time.perf_counter() - start
        sparse_name = self.sparse.name
        timings = {"dense_s": dense_seconds, f"{sparse_name}_s": sparse_seconds}
        timings.update({f"dense_{key}": value for key, value in dense.timings.items()})
        timings.update({f"{sparse_name}_{key}": value for key, value in sparse.timings.items()})
        return dense, sparse, timings

    def fuse_parts(self, dense: Run, sparse: Run, query_ids: Sequence[str],
                   timings: dict[str, float]) -> Retrieval:
        """The fused retrieval of ``query_ids`` from the two systems' runs."""
        start = time.perf_counter()
        run = self.fuse(dense, sparse)
        run = {query_id: run.get(query_id, {}) for query_id in query_ids}
        fusion_seconds = time.perf_counter() - start
        timings = {**timings, "fusion_s": fusion_seconds,
                   "fusion_ms_per_query": 1000 * fusion_seconds / max(len(query_ids), 1)}
        return Retrieval(run=run, timings=timings)

    def retrieve(self, corpus_ids: Sequence[str], corpus_texts: Sequence[str],
                 query_ids: Sequence[str], query_texts: Sequence[str]) -> Retrieval:
        dense, sparse, timings = self.retrieve_parts(corpus_ids, corpus_texts, query_ids,
                                                     query_texts)
        if sparse is None:  # a DDP rank other than 0
            return Retrieval(run=None)
        return self.fuse_parts(dense.run, sparse.run, query_ids, timings)

    def result_info(self) -> dict:
        """What ``tapt eval --output`` records under ``evaluated.hybrid``."""
        sparse_settings = {key: getattr(self.sparse, key) for key in ("k1", "b", "stopwords")
                           if hasattr(self.sparse, key)}
        return {"hybrid": {
            "dense": self.dense.name,
            "sparse": self.sparse.name,
            "sparse_settings": sparse_settings,
            "fusion": self.fusion,
            "rrf_k": self.rrf_k if self.fusion == "rrf" else None,
            "alpha": self.alpha if self.fusion == "linear" else None,
            "normalization": "min-max per query over each system's list"
            if self.fusion == "linear" else None,
            "depth": {"dense": getattr(self.dense, "top_k", None),
                      "sparse": getattr(self.sparse, "top_k", None)},
            "top_k": self.top_k,
            "missing": MISSING,
        }}


__all__ = ["FUSIONS", "HybridRetriever", "cut", "linear_fusion", "min_max",
           "reciprocal_rank_fusion"]
