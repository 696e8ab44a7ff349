"""The one place where a retriever is built: ``bm25``, dense (an encoder) or hybrid (an
encoder fused with BM25).

The encoders come from :mod:`tapt.encoders.factory`. Hybrid parameters are checked once,
by :class:`~tapt.retrieval.hybrid.HybridRetriever` (and, on the command line, by the
flags' argparse types).
"""

from __future__ import annotations

from dataclasses import dataclass

from tapt.encoders.base import Encoder
from tapt.retrieval.bm25 import BM25Retriever
from tapt.retrieval.dense import DenseRetriever
from tapt.retrieval.hybrid import HybridRetriever

BM25 = "bm25"


@dataclass(frozen=True)
class HybridOptions:
    """Fuse the dense ranking with BM25's (see :mod:`tapt.retrieval.hybrid`); ``depth``:
    the passages each system contributes per query (None: the fused ``top_k``)."""

    fusion: str = "rrf"
    rrf_k: float = 60.0
    alpha: float = 0.5
    depth: int | None = None


def is_bm25(name: str) -> bool:
    """True for the lexical baseline's name (``bm25``, any case)."""
    return str(name).strip().lower() == BM25


@dataclass
class SearchOptions:
    """How a dense retriever searches and whether it reuses cached passage embeddings:
    ``backend`` auto | faiss | torch, ``storage`` float32 | float16 (torch), ``cache_dir``
    the local-model embedding cache (None: off), ``cache_storage`` float32 | float16,
    ``precision`` the corpus index's rows (float32, or quantised: int8 | uint8 | binary |
    ubinary) and ``rescore`` the rescoring multiplier of a quantised index (None: none)."""

    backend: str = "auto"
    storage: str = "float32"
    cache_dir: str | None = None
    cache_storage: str = "float32"
    precision: str = "float32"
    rescore: int | None = None

    def dense_kwargs(self) -> dict:
        return {"search_backend": self.backend, "search_storage": self.storage,
                "cache_dir": self.cache_dir, "cache_storage": self.cache_storage,
                "embedding_precision": self.precision, "rescore_multiplier": self.rescore}


def build_retriever(source: str | Encoder, *, top_k: int = 100, batch_size: int = 32,
                    progress: bool = False, k1: float = 1.5, b: float = 0.75,
                    hybrid: HybridOptions | None = None, search: SearchOptions | None = None):
    """``bm25`` -> :class:`~tapt.retrieval.bm25.BM25Retriever` (``k1``, ``b``); an encoder
    -> :class:`~tapt.retrieval.dense.DenseRetriever`, fused with BM25 by a
    :class:`~tapt.retrieval.hybrid.HybridRetriever` when ``hybrid`` is given.

    Raises ``ValueError`` for a name other than ``bm25`` (open it with
    :func:`tapt.encoders.factory.open_encoder` first) and for bad hybrid parameters.
    """
    if isinstance(source, str):
        if not is_bm25(source):
            raise ValueError(f"retriever {source!r}: give bm25 or an encoder "
                             "(tapt.encoders.factory.open_encoder)")
        if hybrid is not None:
            raise ValueError("hybrid retrieval fuses an encoder's ranking with BM25's; "
                             "got bm25 alone")
        return BM25Retriever(top_k=top_k, k1=k1, b=b, progress=progress)
    dense_kwargs = (search or SearchOptions()).dense_kwargs()
    if hybrid is None:
        return DenseRetriever(source, batch_size=batch_size, top_k=top_k, progress=progress,
                              **dense_kwargs)

    depth = hybrid.depth or top_k
    dense = DenseRetriever(source, batch_size=batch_size, top_k=depth, progress=progress,
                           **dense_kwargs)
    return HybridRetriever(dense, BM25Retriever(top_k=depth, progress=progress),
                           fusion=hybrid.fusion, rrf_k=hybrid.rrf_k, alpha=hybrid.alpha,
                           top_k=top_k)
