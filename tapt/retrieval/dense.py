"""Dense retrieval: encode a corpus into an exact FAISS index, encode queries, search.

This is the one place that encodes a corpus. Passages are sorted by length so that each
batch pads little, and each batch goes straight into the index, so memory holds the
index plus one batch.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from tapt.encoders.base import Encoder
from tapt.retrieval.metrics import Run
from tapt.retrieval.search import ExactIndex


@dataclass
class Retrieval:
    """A ranking and how long producing it took."""

    run: Run
    timings: dict[str, float] = field(default_factory=dict)


def length_order(encoder: Encoder, texts: Sequence[str]) -> list[int]:
    """Positions of ``texts`` from longest to shortest (stable)."""
    return sorted(range(len(texts)), key=lambda i: -encoder.text_length(texts[i]))


def chunks(order: Sequence[int], size: int) -> list[Sequence[int]]:
    return [order[start:start + size] for start in range(0, len(order), size)]


def encode_corpus_into(index: ExactIndex, encoder: Encoder, texts: Sequence[str],
                       batch_size: int = 32, progress: bool = True,
                       chunk_size: int | None = None) -> list[int]:
    """Encode ``texts`` longest-first into ``index``; returns the order rows were added in.

    Each ``encode_corpus`` call gets ``chunk_size`` texts (default: one batch), so memory
    holds the index plus one chunk.
    """
    order = length_order(encoder, texts)
    for chunk in tqdm(chunks(order, chunk_size or batch_size), desc="encode corpus",
                      unit="batch", disable=not progress):
        index.add(encoder.encode_corpus([texts[i] for i in chunk], batch_size=batch_size))
    return order


def encode_queries_sorted(encoder: Encoder, texts: Sequence[str], batch_size: int = 32,
                          chunk_size: int | None = None) -> np.ndarray:
    """Encode queries longest-first in chunks (like the corpus); rows in input order."""
    order = length_order(encoder, texts)
    embeddings = np.zeros((len(texts), encoder.embedding_dim), dtype=np.float32)
    for chunk in chunks(order, chunk_size or batch_size):
        embeddings[list(chunk)] = encoder.encode_queries([texts[i] for i in chunk],
                                                         batch_size=batch_size)
    return embeddings


def rank(index: ExactIndex, row_ids: Sequence[str], query_ids: Sequence[str],
         query_embeddings: np.ndarray, top_k: int) -> tuple[Run, float]:
    """Search ``index`` and map rows back to ids; returns the run and the search seconds."""
    start = time.perf_counter()
    scores, positions = index.search(query_embeddings, top_k)
    seconds = time.perf_counter() - start
    run: Run = {}
    for query_id, row_scores, row_positions in zip(query_ids, scores, positions):
        run[query_id] = {row_ids[p]: float(s) for s, p in zip(row_scores, row_positions) if p >= 0}
    return run, seconds


class DenseRetriever:
    """Exact top-k retrieval with any :class:`Encoder`."""

    def __init__(self, encoder: Encoder, *, batch_size: int = 32, top_k: int = 100,
                 use_gpu: bool | None = None, progress: bool = True,
                 chunk_size: int | None = None) -> None:
        self.encoder = encoder
        self.chunk_size = chunk_size
        self.batch_size = batch_size
        self.top_k = top_k
        self.use_gpu = use_gpu
        self.progress = progress

    @property
    def name(self) -> str:
        return self.encoder.name

    def retrieve(self, corpus_ids: Sequence[str], corpus_texts: Sequence[str],
                 query_ids: Sequence[str], query_texts: Sequence[str]) -> Retrieval:
        encoder = self.encoder
        index = ExactIndex(encoder.embedding_dim, normalize=encoder.normalize,
                           use_gpu=self.use_gpu)
        start = time.perf_counter()
        order = encode_corpus_into(index, encoder, corpus_texts, self.batch_size, self.progress,
                                   self.chunk_size)
        corpus_seconds = time.perf_counter() - start
        tokens = encoder.count_tokens(corpus_texts)
        start = time.perf_counter()
        query_embeddings = encode_queries_sorted(encoder, query_texts, self.batch_size,
                                                 self.chunk_size)
        query_seconds = time.perf_counter() - start
        run, search_seconds = rank(index, [corpus_ids[i] for i in order], query_ids,
                                   query_embeddings, self.top_k)
        timings = throughput(len(corpus_texts), tokens, corpus_seconds, len(query_texts),
                             query_seconds, search_seconds)
        timings["faiss_gpu"] = float(index.on_gpu)
        return Retrieval(run=run, timings=timings)


def throughput(passages: int, tokens: int | None, corpus_seconds: float, queries: int,
               query_seconds: float, search_seconds: float) -> dict[str, float]:
    """The timing figures every retriever reports."""
    figures = {
        "corpus_encode_s": corpus_seconds,
        "passages_per_s": passages / corpus_seconds if corpus_seconds else float("inf"),
        "query_encode_s": query_seconds,
        "query_encode_ms_per_query": 1000 * query_seconds / max(queries, 1),
        "search_s": search_seconds,
        "search_ms_per_query": 1000 * search_seconds / max(queries, 1),
    }
    if tokens is not None:
        figures["tokens_per_s"] = tokens / corpus_seconds if corpus_seconds else float("inf")
    return figures
