"""Exact inner-product search: FAISS ``IndexFlatIP`` (on all GPUs when faiss has any), or
torch on GPUs when faiss has no GPU build (:mod:`tapt.retrieval.torch_search`).

``make_index(dim, backend="auto")`` picks: faiss on GPUs when faiss sees any; else torch
when CUDA is available (faiss-cpu beside a GPU); else faiss on the CPU.
"""

from __future__ import annotations

import logging

import numpy as np

from tapt.retrieval.faiss_extra import (
    FaissMissingError,
    faiss,
    faiss_installed,
    gpu_count,
    prepare_vectors,
)
from tapt.util.bounds import POSITIVE_INT

# torch (and tapt.retrieval.torch_search, which imports it) waits until a torch index is
# chosen: importing tapt, or searching with faiss, must not import torch.

logger = logging.getLogger(__name__)

SEARCH_BACKENDS = ("auto", "faiss", "torch")


class ExactIndex:
    """A flat inner-product index filled batch by batch.

    Rows are added in any order; ``search`` returns positions in insertion order, which
    the caller maps back to its ids. With ``normalize`` every vector is L2-normalised,
    so scores are cosine similarities. Rows collect in a CPU ``IndexFlatIP``; with GPUs,
    the filled index is copied once to all of them, sharded, before searching (faiss's
    sharded GPU index accepts ``add`` only once, so it cannot be filled batch by batch).
    """

    backend = "faiss"

    def __init__(self, dim: int, *, normalize: bool = True, use_gpu: bool | None = None) -> None:
        self.dim = POSITIVE_INT.check(dim, "dim")
        self.normalize = normalize
        ngpu = gpu_count()
        self.on_gpu = bool(ngpu) if use_gpu is None else (use_gpu and ngpu > 0)
        self.index = faiss.IndexFlatIP(dim)
        self._gpu_index = None

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored rows (float32: 4 per dimension)."""
        return int(self.index.code_size) * int(self.index.ntotal)

    def add(self, vectors: np.ndarray) -> None:
        """Append rows to the index."""
        self.index.add(prepare_vectors(vectors, self.dim, self.normalize))
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
        return rows @ prepare_vectors(query[None, :], self.dim, self.normalize)[0]

    def search(self, queries: np.ndarray, top_k: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``top_k``: ``(scores, positions)``, each ``(n_queries, k)``; -1 pads."""
        k = min(POSITIVE_INT.check(top_k, "top_k"), self.size)
        if k == 0:
            raise ValueError("the index is empty")
        return self._searcher().search(prepare_vectors(queries, self.dim, self.normalize), k)


def choose_backend(requested: str = "auto") -> str:
    """The search backend ``make_index`` uses for ``requested`` (auto, faiss or torch)."""
    if requested not in SEARCH_BACKENDS:
        raise ValueError(f"search backend must be one of {SEARCH_BACKENDS}, got {requested!r}")
    if requested != "auto":
        return requested
    if gpu_count() > 0:
        return "faiss"
    import torch  # only asked when faiss has no GPU: torch is then already loaded by encoders

    return "torch" if torch.cuda.is_available() else "faiss"


def require_search(requested: str = "auto", precision: str = "float32") -> None:
    """:class:`FaissMissingError` now, before a command loads its model, when the search it
    asks for needs faiss and faiss is not installed: a quantised index (``precision`` not
    float32) always, an exact one unless torch's search is chosen (``requested`` auto on a
    CPU, or faiss)."""
    if not faiss_installed() and (precision != "float32" or
                                  choose_backend(requested) == "faiss"):
        raise FaissMissingError()


def make_index(dim: int, *, normalize: bool = True, backend: str = "auto",
               use_gpu: bool | None = None, storage_dtype: str = "float32"):
    """An exact index of the chosen backend (``ExactIndex`` or ``TorchExactIndex``: same
    ``add`` / ``search`` / ``score`` / ``size`` / ``on_gpu`` / ``backend``). ``use_gpu=False``
    keeps either on the CPU; ``storage_dtype`` (float32, float16) applies to torch only."""
    chosen = choose_backend(backend)
    if chosen == "faiss":
        return ExactIndex(dim, normalize=normalize, use_gpu=use_gpu)
    import torch

    from tapt.retrieval.torch_search import TorchExactIndex, default_devices

    dtypes = {"float32": torch.float32, "float16": torch.float16}
    if storage_dtype not in dtypes:
        raise ValueError(f"storage_dtype must be float32 or float16, got {storage_dtype!r}")
    devices = [torch.device("cpu")] if use_gpu is False else default_devices()
    return TorchExactIndex(dim, normalize=normalize, devices=devices,
                           storage_dtype=dtypes[storage_dtype])
