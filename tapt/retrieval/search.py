"""Exact inner-product search with FAISS ``IndexFlatIP``, on all GPUs when faiss has any."""

from __future__ import annotations

import logging

import faiss
import numpy as np

logger = logging.getLogger(__name__)


def gpu_count() -> int:
    """GPUs visible to faiss (0 for faiss-cpu)."""
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


class ExactIndex:
    """A flat inner-product index filled batch by batch.

    Rows are added in any order; ``search`` returns positions in insertion order, which
    the caller maps back to its ids. With ``normalize`` every vector is L2-normalised,
    so scores are cosine similarities. Rows collect in a CPU ``IndexFlatIP``; with GPUs,
    the filled index is copied once to all of them, sharded, before searching (faiss's
    sharded GPU index accepts ``add`` only once, so it cannot be filled batch by batch).
    """

    def __init__(self, dim: int, *, normalize: bool = True, use_gpu: bool | None = None) -> None:
        self.dim = dim
        self.normalize = normalize
        ngpu = gpu_count()
        self.on_gpu = bool(ngpu) if use_gpu is None else (use_gpu and ngpu > 0)
        self.index = faiss.IndexFlatIP(dim)
        self._gpu_index = None

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    def _prepare(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.dim:
            raise ValueError(f"expected vectors of shape (n, {self.dim}), got {vectors.shape}")
        if self.normalize:
            vectors = vectors.copy()
            faiss.normalize_L2(vectors)
        return vectors

    def add(self, vectors: np.ndarray) -> None:
        """Append rows to the index."""
        self.index.add(self._prepare(vectors))
        self._gpu_index = None

    def _searcher(self):
        if not self.on_gpu:
            return self.index
        if self._gpu_index is None:
            options = faiss.GpuMultipleClonerOptions()
            options.shard = True
            self._gpu_index = faiss.index_cpu_to_all_gpus(self.index, co=options)
            logger.info("FAISS index (%d rows) sharded across %d GPUs", self.size, gpu_count())
        return self._gpu_index

    def score(self, query: np.ndarray, positions: list[int]) -> np.ndarray:
        """Inner products of one query with the rows at ``positions`` (as ``search`` would
        score them: normalised when the index normalises)."""
        rows = np.vstack([self.index.reconstruct(int(p)) for p in positions])
        return rows @ self._prepare(query[None, :])[0]

    def search(self, queries: np.ndarray, top_k: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``top_k``: ``(scores, positions)``, each ``(n_queries, k)``; -1 pads."""
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        k = min(top_k, self.size)
        if k == 0:
            raise ValueError("the index is empty")
        return self._searcher().search(self._prepare(queries), k)
