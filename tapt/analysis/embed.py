"""Load the models named on an analysis command line and embed texts through tapt's one
encoding path (:func:`tapt.retrieval.dense.stream_embeddings`, with its non-finite check).

``bm25`` names the lexical baseline (a retriever, not an encoder: only the corpus-size
ablation accepts it); ``openai:MODEL`` / ``voyage:MODEL`` an API encoder
(:func:`tapt.encoders.api.load_api_encoder`, with its cache and rate limits); anything
else is loaded as a SentenceTransformer with its family preset, as ``tapt eval`` loads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tapt.analysis.compare import split_spec
from tapt.bounds import POSITIVE_INT, check_optional
from tapt.encoders.api import load_api_encoder
from tapt.encoders.base import Encoder, TextKind, collect_in_order
from tapt.encoders.loading import ModelSpec
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.dense import EncodingTally, check_finite, stream_embeddings

BM25 = "bm25"
API_PREFIXES = ("openai:", "voyage:")


@dataclass(frozen=True)
class ModelOptions:
    """How ``--model`` values are loaded (the same options as ``tapt eval``)."""

    family: str = "auto"
    max_seq_length: int | None = None
    trust_remote_code: bool = False
    device: str | None = None
    dtype: str = "auto"
    max_tokens_per_batch: int | None = None
    batch_size: int = 32
    progress: bool = False

    def __post_init__(self) -> None:
        check_optional(POSITIVE_INT, self.max_seq_length, "max_seq_length")
        check_optional(POSITIVE_INT, self.max_tokens_per_batch, "max_tokens_per_batch")
        POSITIVE_INT.check(self.batch_size, "batch_size")


def labelled(spec: str) -> tuple[str, str]:
    """``NAME=MODEL`` -> ``(NAME, MODEL)``; a plain model (or an existing path holding
    ``=``) -> ``(model, model)``. Names label tables and plots."""
    name, model = split_spec(spec)
    return name or model, model


def load_encoder(name: str, options: ModelOptions = ModelOptions()) -> Encoder:
    """The embedding model ``name`` as an :class:`~tapt.encoders.base.Encoder`: an API
    encoder for ``openai:MODEL`` / ``voyage:MODEL`` (:func:`tapt.encoders.api.load_api_encoder`;
    ``options`` do not apply), else a :class:`~tapt.encoders.sentence.SentenceTransformerEncoder`
    loaded with ``options`` (a Hub id, a local path or ``package:...``).

    Raises:
        ValueError: ``bm25`` (a retriever without embeddings), an unknown family, an API
            name without a model.
    """
    if name.lower() == BM25:
        raise ValueError("bm25 is a lexical retriever and has no embeddings; this analysis "
                         "needs an embedding model")
    if name.lower().startswith(API_PREFIXES):
        return load_api_encoder(name)
    spec = ModelSpec(name, family=options.family, max_seq_length=options.max_seq_length,
                     trust_remote_code=options.trust_remote_code, device=options.device,
                     dtype=options.dtype)
    spec.preset()  # an unknown family fails before anything loads
    return SentenceTransformerEncoder.load(spec, show_progress=options.progress,
                                           max_tokens_per_batch=options.max_tokens_per_batch)


def load_model(name: str, options: ModelOptions = ModelOptions(), *, top_k: int = 100):
    """``bm25`` -> :class:`~tapt.retrieval.bm25.BM25Retriever`; otherwise :func:`load_encoder`."""
    if name.lower() == BM25:
        return BM25Retriever(top_k=top_k, progress=options.progress)
    return load_encoder(name, options)


def materialize(model):
    """``model`` itself, or what it returns when it is a loader (a zero-argument callable):
    analyses take loaders so that one model at a time sits in memory."""
    return model() if callable(model) else model


def embed(encoder: Encoder, texts: Sequence[str], kind: TextKind, *, ids: Sequence[str],
          batch_size: int = 32) -> np.ndarray:
    """``(len(texts), dim)`` float32 embeddings in input order; non-finite rows raise
    :class:`~tapt.finite.NonFiniteEmbeddingsError` naming a few ``ids``."""
    tally = EncodingTally()
    matrix = collect_in_order(stream_embeddings(encoder, texts, kind, batch_size, tally),
                              len(texts), encoder.embedding_dim)
    check_finite(tally, encoder.name, "queries" if kind == "query" else "passages", ids)
    return matrix


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), for cosine similarities."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
