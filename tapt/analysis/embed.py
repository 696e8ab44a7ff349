"""Load the models named on an analysis command line and embed texts through tapt's one
encoding path: queries through :func:`tapt.retrieval.dense.stream_embeddings`, passages
through :func:`tapt.retrieval.dense.passage_stream` (the embedding cache, long passages),
both with the non-finite check.

``bm25`` names the lexical baseline (a retriever, not an encoder: only the corpus-size
ablation accepts it); every other name becomes an encoder through the one factory,
:func:`tapt.encoders.factory.open_encoder` (API models with :class:`APIOptions`, local
and Hub models with :class:`ModelOptions`), exactly as ``tapt eval`` loads it. Passages
go through the embedding cache as ``tapt eval``'s do (:func:`embed` with ``cache_dir``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from tapt.analysis.result_files import split_spec
from tapt.encoders.base import Encoder, TextKind, collect_in_order
from tapt.encoders.factory import APIOptions, ModelOptions, open_encoder
from tapt.retrieval.dense import (
    EncodingTally,
    check_finite,
    open_cache,
    passage_stream,
    stream_embeddings,
)
from tapt.retrieval.retriever_factory import BM25, build_retriever, is_bm25
from tapt.retrieval.sharding import broadcast_rows

__all__ = ["BM25", "APIOptions", "ModelOptions", "embed", "labelled", "load_encoder",
           "load_model", "materialize", "materialized", "unit_rows"]


def labelled(spec: str) -> tuple[str, str]:
    """``NAME=MODEL`` -> ``(NAME, MODEL)``; a plain model (or an existing path holding
    ``=``) -> ``(its label, model)``: a local folder by its last two parts (``x/final``, no
    absolute path of this machine in a table or a picture), anything else as given. Names
    label tables and plots."""
    name, model = split_spec(spec)
    if name:
        return name, model
    path = Path(model)
    return ("/".join(path.resolve().parts[-2:]) if path.exists() else model), model


def load_encoder(name: str, options: ModelOptions | None = None,
                 api: APIOptions | None = None) -> Encoder:
    """The embedding model ``name`` as an :class:`~tapt.encoders.base.Encoder`
    (:func:`tapt.encoders.factory.open_encoder`; close it, or use it in ``with``).

    Raises:
        ValueError: ``bm25`` (a retriever without embeddings), an unknown family, an API
            name without a model.
    """
    if is_bm25(name):
        raise ValueError("bm25 is a lexical retriever and has no embeddings; this analysis "
                         "needs an embedding model")
    return open_encoder(name, options, api)


def load_model(name: str, options: ModelOptions | None = None, *, top_k: int = 100,
               api: APIOptions | None = None):
    """``bm25`` -> :class:`~tapt.retrieval.bm25.BM25Retriever`; otherwise :func:`load_encoder`."""
    if is_bm25(name):
        return build_retriever(BM25, top_k=top_k,
                               progress=(options or ModelOptions()).progress)
    return load_encoder(name, options, api)


def materialize(model):
    """``model`` itself, or what it returns when it is a loader (a zero-argument callable):
    analyses take loaders so that one model at a time sits in memory."""
    return model() if callable(model) else model


@contextmanager
def materialized(model) -> Iterator:
    """:func:`materialize` as a context: what a loader built is closed on exit (an API
    encoder's client and cache); a model given as it is stays open (its owner closes it)."""
    if not callable(model):
        yield model
        return
    made = model()
    try:
        yield made
    finally:
        close = getattr(made, "close", None)
        if callable(close):
            close()


def embed(encoder: Encoder, texts: Sequence[str], kind: TextKind, *, ids: Sequence[str],
          batch_size: int = 32, cache_dir: str | None = None,
          tally: EncodingTally | None = None) -> np.ndarray:
    """``(len(texts), dim)`` float32 embeddings in input order; non-finite rows raise
    :class:`~tapt.util.finite.NonFiniteEmbeddingsError` naming a few ``ids``.

    ``cache_dir``: passages (``kind`` document) are read from and written to the embedding
    cache there (:func:`~tapt.retrieval.dense.passage_stream`, the path of ``tapt eval``);
    ``tally``, when given, is filled (``from_cache``: the passages read from the cache).
    Under torchrun / accelerate launch (a process group) each rank encodes a share and
    every rank gets the whole matrix (collective: call it on every rank; no cache)."""
    tally = EncodingTally() if tally is None else tally
    stream = (passage_stream(encoder, texts, batch_size, tally, open_cache(encoder, cache_dir))
              if kind == "document" else
              stream_embeddings(encoder, texts, kind, batch_size, tally))
    matrix = collect_in_order(stream, len(texts), encoder.embedding_dim)
    check_finite(tally, encoder.name, "queries" if kind == "query" else "passages", ids)
    return broadcast_rows(matrix)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), for cosine similarities."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
