"""faiss, an optional extra (``tapt[cpu]``: faiss-cpu, ``tapt[gpu]``: faiss-gpu-cu12): the
module, or a stand-in that raises :class:`FaissMissingError` when a search uses it; the
GPUs it sees; and :func:`prepare_vectors`, the rows every index takes (the faiss, torch
and quantised indexes alike), so all of them score the same numbers.
"""

from __future__ import annotations

import numpy as np


class FaissMissingError(ImportError, ValueError):
    """faiss is not installed: it comes with an extra (an ImportError; also a ValueError,
    so the CLI prints it as one ``error:`` line)."""

    def __init__(self) -> None:
        super().__init__('faiss is not installed; the search needs it: pip install "tapt[cpu]" '
                         '(faiss-cpu) or "tapt[gpu]" (faiss-gpu-cu12), one of the two',
                         name="faiss")


class _NoFaiss:
    """Stands in for the faiss module when it is missing: tapt imports, a search raises."""

    def __getattr__(self, name: str):
        raise FaissMissingError()


try:
    import faiss
except ImportError:  # faiss is an extra (tapt[cpu] or tapt[gpu])
    faiss = _NoFaiss()


def faiss_installed() -> bool:
    """Whether faiss imported (it is an extra: tapt[cpu] or tapt[gpu])."""
    return not isinstance(faiss, _NoFaiss)


def gpu_count() -> int:
    """GPUs visible to faiss (0 for faiss-cpu, or without faiss)."""
    if not faiss_installed():
        return 0
    get = getattr(faiss, "get_num_gpus", None)
    return int(get()) if get is not None else 0


def prepare_vectors(vectors: np.ndarray, dim: int, normalize: bool) -> np.ndarray:
    """Contiguous float32 ``(n, dim)`` rows, L2-normalised by faiss's ``normalize_L2`` when
    asked (without faiss, for torch's search, the same division by numpy; zero rows stay
    zero; a copy: the caller's array is not changed).

    Raises:
        ValueError: ``vectors`` is not two-dimensional with ``dim`` columns.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != dim:
        raise ValueError(f"expected vectors of shape (n, {dim}), got {vectors.shape}")
    if normalize:
        vectors = vectors.copy()
        if faiss_installed():
            faiss.normalize_L2(vectors)
        else:  # torch's search runs without faiss: the same division, by numpy
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors
