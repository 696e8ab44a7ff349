"""BM25 lexical baseline with bm25s, ranked and scored like the dense retrievers.

A retriever, not an encoder: it returns the same :class:`~tapt.retrieval.dense.Retrieval`
(run and timings) as :class:`~tapt.retrieval.dense.DenseRetriever`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np

from tapt.retrieval.dense import Retrieval, throughput
from tapt.retrieval.sharding import world
from tapt.util.bounds import BM25_K1, FRACTION, TOP_K

# bm25s (and its scipy) is imported when a BM25 run starts, not with tapt.


class BM25Retriever:
    """Okapi BM25 (bm25s, ``method="lucene"``) with English stop words by default.

    ``k1`` (term-frequency saturation) is finite and >= 0, ``b`` (length normalisation) in
    [0, 1], ``top_k`` at least 1; anything else is a ``ValueError`` naming the parameter
    (bm25s itself would score every passage NaN for ``k1=nan``). ``keep_index``: keep the
    corpus index for the next :meth:`retrieve` given the same ``corpus_ids`` and
    ``corpus_texts`` objects (queries asked a chunk at a time, ``tapt pseudo``)."""

    name = "bm25"

    def __init__(self, *, top_k: int = 100, k1: float = 1.5, b: float = 0.75,
                 stopwords: str | None = "en", progress: bool = True,
                 keep_index: bool = False) -> None:
        self.top_k = TOP_K.check(top_k, "top_k")
        self.k1 = BM25_K1.check(k1, "k1")
        self.b = FRACTION.check(b, "b")
        self.stopwords = stopwords
        self.progress = progress
        self.keep_index = keep_index
        self._index: tuple | None = None

    def retrieve(self, corpus_ids: Sequence[str], corpus_texts: Sequence[str],
                 query_ids: Sequence[str], query_texts: Sequence[str], *,
                 also_score: Mapping[str, Sequence[str]] | None = None) -> Retrieval:
        """Top-k per query (passages scoring 0 are left out); ``also_score`` adds the
        scores of those passages for those queries even below ``top_k`` (0 included).
        Under a process group only rank 0 ranks (the others get ``run=None``)."""
        if world()[0] != 0:
            return Retrieval(run=None)
        import bm25s
        from bm25s.tokenization import Tokenizer

        start = time.perf_counter()
        if self._index is not None and self._index[0] is corpus_ids \
                and self._index[1] is corpus_texts:
            tokenizer, model, tokens = self._index[2:]  # the same corpus again: one index
        else:
            self._index = None
            tokenizer = Tokenizer(stopwords=self.stopwords)
            corpus_tokens = tokenizer.tokenize(list(corpus_texts), return_as="tuple",
                                               show_progress=self.progress)
            model = bm25s.BM25(k1=self.k1, b=self.b, method="lucene")
            model.index(corpus_tokens, show_progress=self.progress)
            tokens = int(np.sum([len(ids) for ids in corpus_tokens.ids]))
            del corpus_tokens
            if self.keep_index:
                self._index = (corpus_ids, corpus_texts, tokenizer, model, tokens)
        index_seconds = time.perf_counter() - start
        start = time.perf_counter()
        query_tokens = tokenizer.tokenize(list(query_texts), update_vocab=False,
                                          return_as="ids", show_progress=False)
        query_seconds = time.perf_counter() - start
        k = min(self.top_k, len(corpus_ids))
        start = time.perf_counter()
        positions, scores = model.retrieve(query_tokens, k=k, show_progress=self.progress,
                                           n_threads=0)
        search_seconds = time.perf_counter() - start
        run = {}
        for query_id, row_positions, row_scores in zip(query_ids, positions, scores):
            run[query_id] = {corpus_ids[int(p)]: float(s)
                             for p, s in zip(row_positions, row_scores) if s > 0}
        if also_score:
            position = {doc_id: p for p, doc_id in enumerate(corpus_ids)}
            for query_id, ids in zip(query_ids, query_tokens):
                wanted = [position[d] for d in also_score.get(query_id, ()) if d in position]
                if wanted:
                    scores_all = model.get_scores_from_ids(list(ids))
                    run.setdefault(query_id, {}).update(
                        {corpus_ids[p]: float(scores_all[p]) for p in wanted})
        timings = throughput(len(corpus_ids), tokens, index_seconds, len(query_ids),
                             query_seconds, search_seconds)
        return Retrieval(run=run, timings=timings)
