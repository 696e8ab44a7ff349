"""Several Matryoshka widths scored from one encoding (``tapt eval --dims 1024 512 256``).

The queries and the corpus are encoded once at the model's full width; each width then
keeps the first N columns of both, fills its own exact index (re-normalised when the
encoder normalises, as :class:`~tapt.encoders.base.TruncatedEncoder` + the index would),
searches and scores, exactly as ``tapt eval --truncate-dim N`` would.

Limits: the full-width corpus stays in memory for the whole run (``passages x dim x 4``
bytes of float32, e.g. 4 GB for 1M passages at 1024 dims), plus one index at a time. The
corpus goes through the embedding cache as ``tapt eval`` does
(:func:`tapt.retrieval.dense.passage_stream`: full-width rows, so every width and a plain
``tapt eval`` share them). Under DDP every rank encodes its share and rank 0 scores.

Example::

    reports = evaluate_widths(DenseRetriever(encoder), dataset, "test", [768, 256, 64])
    reports[256].metrics["binary_ndcg@10"]
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from tapt.data.arrow_corpus import corpus_texts as passage_texts
from tapt.data.beir import BeirDataset
from tapt.retrieval.dense import (
    DenseRetriever,
    EncodingTally,
    Retrieval,
    check_finite,
    passage_stream,
    rank,
    stream_embeddings,
    throughput,
)
from tapt.retrieval.evaluate import EvalReport, check_split, score_retrieval, split_queries
from tapt.retrieval.search import make_index
from tapt.retrieval.sharding import world


def check_widths(widths: Sequence[int], full: int, flag: str = "--dims") -> list[int]:
    """The distinct widths, widest first; a ``ValueError`` naming ``flag`` for a width that
    is not in ``1..full`` (the model's width)."""
    bad = [width for width in widths if not 0 < int(width) <= full]
    if bad or not widths:
        raise ValueError(f"{flag}: widths must be in 1..{full} (the model's embedding "
                         f"width), got {' '.join(map(str, widths)) or 'none'}")
    return sorted({int(width) for width in widths}, reverse=True)


def encode_full(retriever: DenseRetriever, corpus_ids: Sequence[str],
                corpus_texts: Sequence[str], query_ids: Sequence[str],
                query_texts: Sequence[str]):
    """``(query rows, corpus rows, corpus positions, timings)`` at full width, or None on a
    DDP rank other than 0. A passage may have several rows (``--long-passages chunk-max``)."""
    encoder, batch = retriever.encoder, retriever.batch_size
    start = time.perf_counter()
    queries = EncodingTally()
    query_rows = np.zeros((len(query_texts), encoder.embedding_dim), dtype=np.float32)
    for part in stream_embeddings(encoder, query_texts, "query", batch, queries):
        query_rows[part.positions] = part.embeddings
    query_seconds = time.perf_counter() - start
    check_finite(queries, encoder.name, "queries", query_ids)
    start = time.perf_counter()
    passages = EncodingTally()
    rows, positions = [], []
    for part in passage_stream(encoder, corpus_texts, batch, passages, retriever.open_cache()):
        rows.append(part.embeddings)
        positions.append(part.positions)
    corpus_seconds = time.perf_counter() - start
    check_finite(passages, encoder.name, "passages", corpus_ids)
    if world()[0] != 0:  # rank 0 alone holds the gathered rows
        return None
    timings = throughput(len(corpus_texts), passages.tokens, corpus_seconds,
                         len(query_texts), query_seconds, 0.0)
    timings["corpus_from_cache"] = float(passages.from_cache)
    corpus_rows = np.concatenate(rows) if rows else np.zeros((0, encoder.embedding_dim),
                                                             dtype=np.float32)
    order = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
    return query_rows, corpus_rows, order, timings


def evaluate_widths(retriever: DenseRetriever, dataset: BeirDataset, split: str,
                    widths: Sequence[int], *, corpus_ids: Sequence[str] | None = None,
                    with_title: bool = True, info: dict | None = None
                    ) -> dict[int, EvalReport] | None:
    """One :class:`EvalReport` per width (widest first), from one encoding (see the module
    docstring); None on a DDP rank other than 0. Each report's ``evaluated.model`` is
    ``MODEL@WIDTH`` and ``evaluated.width`` its width."""
    encoder = retriever.encoder
    widths = check_widths(widths, encoder.embedding_dim)
    check_split(dataset, split)
    corpus_ids = list(dataset.corpus) if corpus_ids is None else list(corpus_ids)
    corpus_texts = passage_texts(dataset.corpus, corpus_ids, with_title)  # lazy for Arrow
    query_ids, query_texts = split_queries(dataset, split)
    encoded = encode_full(retriever, corpus_ids, corpus_texts, query_ids, query_texts)
    if encoded is None:
        return None
    query_rows, corpus_rows, order, timings = encoded
    row_ids = [corpus_ids[p] for p in order]
    rows_per_id = int(np.bincount(order).max()) if len(order) > len(corpus_ids) else 1
    reports: dict[int, EvalReport] = {}
    for width in widths:
        index = make_index(width, normalize=encoder.normalize,
                           backend=retriever.search_backend, use_gpu=retriever.use_gpu,
                           storage_dtype=retriever.search_storage)
        index.add(corpus_rows[:, :width])
        run, seconds = rank(index, row_ids, query_ids, np.ascontiguousarray(
            query_rows[:, :width]), retriever.top_k, rows_per_id)
        figures = {**timings, "search_s": seconds,
                   "search_ms_per_query": 1000 * seconds / max(len(query_ids), 1)}
        retrieval = Retrieval(run=run, timings=figures, search_backend=index.backend)
        reports[width] = score_retrieval(
            retrieval, retriever, dataset, split, corpus_ids=corpus_ids, with_title=with_title,
            info={**(info or {}), "model": f"{encoder.name}@{width}", "width": width})
        del index
    return reports


def widths_section(reports: dict[int, EvalReport]) -> dict:
    """What ``tapt eval --dims --output`` records under ``dims``: each width's metrics."""
    return {"widths": list(reports), "full_width_encoded_once": True,
            "metrics": {str(width): report.metrics for width, report in reports.items()}}


__all__ = ["check_widths", "encode_full", "evaluate_widths", "widths_section"]
