"""Search over quantised passage embeddings, optionally rescored with the float32 query
(``tapt eval --embedding-precision int8|uint8|binary|ubinary [--rescore K]``).

The rows are quantised by sentence-transformers' ``quantize_embeddings`` and held in a FAISS
index that stores them at their own width:

- ``binary`` / ``ubinary``: one bit per dimension, ``faiss.IndexBinaryFlat`` (Hamming
  distance), as ``semantic_search_faiss(corpus_precision="ubinary")``. Both hold the same
  bits (sentence-transformers' ``binary`` is ``ubinary - 128`` as int8; FAISS takes the
  unsigned bytes) and rank alike. A score is ``1 - 2 x hamming / dim``, the inner product
  of the +-1 sign vectors over the dimension (higher is better, as everywhere in tapt).
- ``uint8`` / ``int8``: one byte per dimension, ``faiss.IndexScalarQuantizer`` with the
  direct 8-bit codes (``QT_8bit_direct`` / ``QT_8bit_direct_signed``: the codes are the
  quantised values themselves), scored by the inner product of the quantised query and
  rows, as ``semantic_search_faiss`` scores uint8 and ``semantic_search_usearch`` int8
  (``semantic_search_faiss`` keeps uint8 rows in an ``IndexFlatIP``, four bytes each).
  The scalar ranges (minimum and maximum per dimension) come from calibration embeddings
  as sentence-transformers documents: the first ``calibration_rows`` passage rows added
  (all of them for a corpus up to that size); later rows are quantised with those ranges
  (values outside are clipped). A larger corpus is streamed with a seeded sample of
  ``calibration_rows`` passages first (:func:`calibration_first`), so the ranges do not
  depend on which passages an embedding cache happened to hold; the index records the
  sample (``calibration``).

With ``rescore_multiplier`` M the quantised search keeps ``top_k x M`` candidates per query,
which are rescored by the float32 query against their quantised rows (uint8 / int8
dequantised to their bucket, binary unpacked to 0/1) and cut to ``top_k``: the rescoring
of ``semantic_search_faiss`` / ``semantic_search_usearch`` (``rescore_multiplier``).

Hand-written rather than calling ``semantic_search_faiss``: that takes only float32, uint8
and ubinary, returns Hamming distances as scores, keeps uint8 rows in float32, and rescores
every query at once in an int64 array (10k queries x 400 candidates x 1,024 dimensions:
33 GB); here queries are rescored in batches of :data:`RESCORE_QUERY_BATCH`.
:class:`QuantizedIndex` has the interface of :class:`tapt.retrieval.search.ExactIndex`
(``add`` batch by batch, ``search``, ``score``, ``size``).
"""

from __future__ import annotations

import numpy as np

from tapt.retrieval.faiss_extra import faiss, prepare_vectors
from tapt.util.bounds import POSITIVE_INT, RESCORE, check_optional

PRECISIONS: tuple[str, ...] = ("float32", "int8", "uint8", "binary", "ubinary")
QUANTIZED = PRECISIONS[1:]
DEFAULT_CALIBRATION_ROWS = 65536
"""Passage rows the int8 / uint8 ranges are computed from (256 MiB at 1,024 float32 dims)."""
CALIBRATION_SEED = 0
"""Seed of the calibration sample of a corpus larger than ``calibration_rows``."""
RESCORE_QUERY_BATCH = 64
"""Queries rescored at once, at most (see :data:`RESCORE_BYTES`)."""
RESCORE_BYTES = 256 << 20
"""The ``batch x candidates x dim`` float32 array of a rescoring batch stays under this:
deep rescoring (``top_k x multiplier`` candidates) takes fewer queries at once."""


def calibration_first(passages: int, rows: int, seed: int = CALIBRATION_SEED) -> np.ndarray:
    """An order of ``passages`` positions with a seeded sample of ``rows`` of them first
    (sorted), then the rest in order: streamed so, the first ``rows`` rows an index
    calibrates on are the same whatever order the rows would otherwise come in."""
    if passages <= rows:
        return np.arange(passages, dtype=np.int64)
    sample = np.sort(np.random.default_rng(seed).choice(passages, rows, replace=False))
    rest = np.setdiff1d(np.arange(passages, dtype=np.int64), sample, assume_unique=True)
    return np.concatenate([sample, rest]).astype(np.int64)


def rescore_batch(depth: int, dim: int) -> int:
    """Queries per rescoring batch: :data:`RESCORE_QUERY_BATCH`, fewer when ``depth``
    candidates of ``dim`` float32 values each would pass :data:`RESCORE_BYTES`."""
    return max(1, min(RESCORE_QUERY_BATCH, RESCORE_BYTES // max(1, depth * dim * 4)))


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"embedding precision must be one of {', '.join(PRECISIONS)}, "
                         f"got {precision!r}")
    return precision


def dequantize(codes: np.ndarray, precision: str, ranges: np.ndarray) -> np.ndarray:
    """int8 / uint8 codes back to floats at their bucket's lower edge, as
    ``semantic_search_faiss`` rescores them (its ``_dequantize_embeddings`` is private)."""
    ranges = ranges.astype(np.float32, copy=False)
    steps = (ranges[1] - ranges[0]) / 255
    steps = np.where(steps == 0, 1, steps)
    values = codes.astype(np.float32)
    if precision == "int8":
        values += 128
    return values * steps + ranges[0]


def projected_bytes(precision: str, passages: int, dim: int) -> int:
    """Index bytes of ``passages`` rows of ``dim`` dimensions at ``precision``."""
    per_row = {"float32": 4 * dim, "int8": dim, "uint8": dim}.get(check_precision(precision),
                                                                  (dim + 7) // 8)
    return passages * per_row


class QuantizedIndex:
    """Quantised rows in a FAISS index, filled batch by batch (see the module docstring).

    ``dim``: the float dimension; ``normalize``: L2-normalise rows and queries first (as
    :class:`~tapt.retrieval.search.ExactIndex`, so a cosine model's scores are cosines
    before quantisation); ``rescore_multiplier``: None (rank by the quantised scores) or M.
    """

    backend = "faiss"
    on_gpu = False

    def __init__(self, dim: int, precision: str, *, normalize: bool = True,
                 rescore_multiplier: int | None = None,
                 calibration_rows: int = DEFAULT_CALIBRATION_ROWS) -> None:
        self.dim = POSITIVE_INT.check(dim, "dim")
        self.precision = check_precision(precision)
        if precision == "float32":
            raise ValueError("a float32 index is tapt.retrieval.search.make_index's")
        self.normalize = normalize
        self.rescore_multiplier = check_optional(RESCORE, rescore_multiplier,
                                                 "rescore_multiplier")
        self.calibration_rows = POSITIVE_INT.check(calibration_rows, "calibration_rows")
        self.binary = precision.endswith("binary")
        if self.binary:
            self.index = faiss.IndexBinaryFlat(8 * ((dim + 7) // 8))
        else:
            kind = (faiss.ScalarQuantizer.QT_8bit_direct_signed if precision == "int8"
                    else faiss.ScalarQuantizer.QT_8bit_direct)
            self.index = faiss.IndexScalarQuantizer(dim, kind, faiss.METRIC_INNER_PRODUCT)
        self.ranges: np.ndarray | None = None
        self.calibrated_on = 0
        self.calibration: dict | None = None
        """How the calibration rows were chosen (set by the caller that streams them)."""
        self._pending: list[np.ndarray] = []  # float rows waiting for the calibration
        self._pending_rows = 0

    @property
    def size(self) -> int:
        return int(self.index.ntotal) + self._pending_rows

    @property
    def nbytes(self) -> int:
        """Bytes of the stored codes (what the index holds per row, times the rows)."""
        self._calibrate()
        return int(self.index.code_size) * int(self.index.ntotal)

    def info(self) -> dict:
        """``evaluated.search``'s record of the index."""
        return {"embedding_precision": self.precision, "index_bytes": self.nbytes,
                "index_rows": int(self.index.ntotal), "dim": self.dim,
                "rescore_multiplier": self.rescore_multiplier,
                "calibration_rows": None if self.binary else self.calibrated_on,
                **({"calibration": self.calibration}
                   if self.calibration and not self.binary else {})}

    def _quantize(self, vectors: np.ndarray) -> np.ndarray:
        """Prepared float rows as the index's codes (uint8 bytes for the binary index,
        float32 code values for the scalar one)."""
        from sentence_transformers.util.quantization import quantize_embeddings

        if self.binary:  # the same bits for binary and ubinary; FAISS wants unsigned bytes
            return quantize_embeddings(vectors, precision="ubinary")
        codes = quantize_embeddings(vectors, precision=self.precision, ranges=self.ranges)
        return codes.astype(np.float32)

    def add(self, vectors: np.ndarray) -> None:
        """Append rows (quantised now, or once the calibration rows are in)."""
        vectors = prepare_vectors(vectors, self.dim, self.normalize)
        if self.binary or self.ranges is not None:
            self.index.add(self._quantize(vectors))
            return
        self._pending.append(vectors)
        self._pending_rows += len(vectors)
        if self._pending_rows >= self.calibration_rows:
            self._calibrate()

    def _calibrate(self) -> None:
        """Ranges from the pending rows (at most ``calibration_rows`` of them), then every
        pending row into the index."""
        if not self._pending:
            return
        rows = np.concatenate(self._pending)
        self._pending, self._pending_rows = [], 0
        if self.ranges is None:
            sample = rows[:self.calibration_rows]
            self.ranges = np.vstack((sample.min(axis=0), sample.max(axis=0)))
            self.calibrated_on = len(sample)
        self.index.add(self._quantize(rows))

    def _codes(self, positions: np.ndarray) -> np.ndarray:
        """Stored rows at ``positions`` (``-1``: a zero row) as floats ready for rescoring:
        0/1 bits for binary, dequantised values for int8 / uint8."""
        safe = np.where(positions < 0, 0, positions).astype(np.int64)
        if self.binary:
            stored = faiss.rev_swig_ptr(self.index.xb.data(),  # a view, no copy
                                        self.index.ntotal * self.index.code_size)
            packed = stored.reshape(-1, self.index.code_size)[safe]
            rows = np.unpackbits(packed, axis=-1)[..., :self.dim].astype(np.float32)
        else:
            codes = self.index.reconstruct_batch(safe.ravel()).reshape(*safe.shape, self.dim)
            rows = dequantize(codes, self.precision, self.ranges)
        rows[positions < 0] = 0.0
        return rows

    def _quantized_search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        scores, positions = self.index.search(self._quantize(queries), k)
        if self.binary:
            scores = 1.0 - 2.0 * scores.astype(np.float64) / self.dim
        return scores.astype(np.float64), positions.astype(np.int64)

    def search(self, queries: np.ndarray, top_k: int = 100) -> tuple[np.ndarray, np.ndarray]:
        """Top-``top_k``: ``(scores, positions)``, each ``(n_queries, k)``; -1 pads."""
        self._calibrate()
        k = min(POSITIVE_INT.check(top_k, "top_k"), self.size)
        if k == 0:
            raise ValueError("the index is empty")
        queries = prepare_vectors(queries, self.dim, self.normalize)
        if self.rescore_multiplier is None:
            return self._quantized_search(queries, k)
        depth = min(k * self.rescore_multiplier, self.size)
        all_scores = np.empty((len(queries), k), dtype=np.float64)
        all_positions = np.empty((len(queries), k), dtype=np.int64)
        step = rescore_batch(depth, self.dim)
        for start in range(0, len(queries), step):
            batch = queries[start:start + step]
            _, candidates = self._quantized_search(batch, depth)
            rescored = np.einsum("ij,ikj->ik", batch, self._codes(candidates)).astype(np.float64)
            rescored[candidates < 0] = -np.inf
            order = np.argsort(-rescored, axis=1, kind="stable")[:, :k]
            rows = np.arange(len(batch))[:, None]
            all_scores[start:start + len(batch)] = rescored[rows, order]
            all_positions[start:start + len(batch)] = candidates[rows, order]
        return all_scores, all_positions

    def score(self, query: np.ndarray, positions: list[int]) -> np.ndarray:
        """Scores of one query with the rows at ``positions``, as ``search`` ranks them
        (rescored when it rescores)."""
        self._calibrate()
        query = prepare_vectors(query[None, :], self.dim, self.normalize)
        where = np.asarray(positions, dtype=np.int64)
        if self.rescore_multiplier is not None:
            return self._codes(where[None, :])[0] @ query[0]
        coded = self._quantize(query)
        if self.binary:
            stored = faiss.rev_swig_ptr(self.index.xb.data(),
                                        self.index.ntotal * self.index.code_size)
            rows = stored.reshape(-1, self.index.code_size)[where]
            hamming = np.unpackbits(rows ^ coded[0], axis=-1)[:, :self.dim].sum(axis=1)
            return 1.0 - 2.0 * hamming / self.dim
        return self.index.reconstruct_batch(where) @ coded[0]
