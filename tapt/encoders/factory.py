"""The one place where a model name (or a loaded model) becomes an
:class:`~tapt.encoders.base.Encoder`.

Names: ``openai:MODEL`` / ``voyage:MODEL`` (:func:`tapt.encoders.api.load_api_encoder`,
with :class:`APIOptions`), anything else a SentenceTransformer (a local path, a Hub id,
``package:NAME/sub/path``) loaded with its family preset and :class:`ModelOptions`.
``ModelOptions.truncate_dim`` is the API's ``dimensions`` for an API model and a
:class:`~tapt.encoders.base.TruncatedEncoder` for a local one. Every encoder is a context
manager: ``with open_encoder(name) as encoder: ...`` closes an API encoder's HTTP client
and cache. The retrievers built on an encoder are :mod:`tapt.retrieval.retriever_factory`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tapt.encoders.api import is_api_model, load_api_encoder
from tapt.encoders.backends import check_backend_name, require_backend
from tapt.encoders.base import Encoder, TruncatedEncoder
from tapt.encoders.export_manifest import read_manifest
from tapt.encoders.exported import ExportedEncoder, check_export_options
from tapt.encoders.loading import ModelSpec, load_sentence_transformer
from tapt.encoders.long_passages import LongPassageError, LongPassages
from tapt.encoders.sentence import SentenceTransformerEncoder
from tapt.util.bounds import (
    BATCH_SIZE,
    CONCURRENCY,
    RATE,
    SEQUENCE_LENGTH,
    THREADS,
    TOKENS_PER_BATCH,
    WIDTH,
    check_optional,
)

__all__ = ["APIOptions", "EncoderLoader", "ModelOptions", "is_api_model", "load_model",
           "open_encoder", "wrap_model"]


@dataclass(frozen=True)
class ModelOptions:
    """How a model is loaded and encodes (``tapt.cli.options.add_encoding_args``).

    ``dtype`` is the load and compute dtype (None for :func:`wrap_model`: the weights'
    own); ``truncate_dim`` keeps the first N embedding
    dimensions (Matryoshka; an API model is asked for N dimensions); ``batch_size`` is
    the texts per encoding batch of the retriever or analysis that uses the encoder;
    ``long_passages`` how passages longer than the maximum length are encoded (local
    models only: :mod:`tapt.encoders.long_passages`); ``backend`` torch, or onnx /
    openvino for a ``tapt export`` folder (:class:`~tapt.encoders.exported.ExportedEncoder`,
    run with ``threads`` intra-op threads; None: the runtime's default).
    """

    family: str = "auto"
    max_seq_length: int | None = None
    trust_remote_code: bool = False
    device: str | None = None
    dtype: str | None = "auto"
    max_tokens_per_batch: int | None = None
    batch_size: int = 32
    progress: bool = False
    truncate_dim: int | None = None
    long_passages: LongPassages = field(default_factory=LongPassages)
    backend: str = "torch"
    threads: int | None = None

    def __post_init__(self) -> None:
        check_backend_name(self.backend)
        check_optional(THREADS, self.threads, "threads")
        check_optional(SEQUENCE_LENGTH, self.max_seq_length, "max_seq_length")
        check_optional(TOKENS_PER_BATCH, self.max_tokens_per_batch, "max_tokens_per_batch")
        BATCH_SIZE.check(self.batch_size, "batch_size")
        check_optional(WIDTH, self.truncate_dim, "truncate_dim")

    def spec(self, name: str) -> ModelSpec:
        """The :class:`~tapt.encoders.loading.ModelSpec` of ``name`` under these options."""
        return ModelSpec(str(name), family=self.family, max_seq_length=self.max_seq_length,
                         trust_remote_code=self.trust_remote_code, device=self.device,
                         dtype=self.dtype or "float32", backend=self.backend)


@dataclass(frozen=True)
class APIOptions:
    """How an API model (``openai:`` / ``voyage:``) is called: endpoint, embedding cache
    and client-side limits (None: the provider's defaults; 0 rpm/tpm: no limit)."""

    base_url: str | None = None
    cache_dir: Path | None = None
    cache: bool = True
    concurrency: int = 4
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def __post_init__(self) -> None:
        CONCURRENCY.check(self.concurrency, "concurrency")
        check_optional(RATE, self.requests_per_minute, "requests_per_minute")
        check_optional(RATE, self.tokens_per_minute, "tokens_per_minute")


def _api_encoder(name: str, model: ModelOptions, api: APIOptions) -> Encoder:
    return load_api_encoder(name, dimensions=model.truncate_dim, base_url=api.base_url,
                            cache_dir=api.cache_dir, cache=api.cache,
                            concurrency=api.concurrency,
                            requests_per_minute=api.requests_per_minute,
                            tokens_per_minute=api.tokens_per_minute)


def _truncated(encoder: Encoder, truncate_dim: int | None) -> Encoder:
    return encoder if truncate_dim is None else TruncatedEncoder(encoder, truncate_dim)


class EncoderLoader:
    """An encoder named by ``name``, checked now and loaded on the first call.

    What fails without loading weights fails at construction: an API model is built at
    once (a missing key or an unknown model), a local model's family is resolved. Call it
    (any number of times) for the encoder; :meth:`close` (or ``with``) closes whatever was
    built. Analyses take loaders so that one model at a time sits in memory.
    """

    def __init__(self, name: str, model: ModelOptions | None = None,
                 api: APIOptions | None = None) -> None:
        self.name = str(name)
        self.model = model or ModelOptions()
        self.api = api or APIOptions()
        self._encoder: Encoder | None = None
        if is_api_model(self.name):
            if self.model.long_passages.chunked:
                raise LongPassageError(f"--long-passages {self.model.long_passages.mode}: "
                                       f"{self.name} is an API model, which tapt cannot "
                                       "split into windows; use --long-passages truncate")
            if self.model.backend != "torch":
                raise ValueError(f"--backend {self.model.backend}: {self.name} is an API "
                                 "model; the backend applies to local models")
            self._encoder = _api_encoder(self.name, self.model, self.api)
        elif self.model.backend != "torch":
            require_backend(self.model.backend)  # a missing tapt[onnx] / [openvino]
            self._manifest = read_manifest(self.name, self.model.backend)  # before any work
            if self.model.long_passages.chunked:
                raise LongPassageError(
                    f"--long-passages {self.model.long_passages.mode}: --backend "
                    f"{self.model.backend} encodes truncated passages only (this export "
                    f"keeps the first {self._manifest.preset.max_seq_length} tokens of a "
                    "text); use --long-passages truncate, or the torch model to split long "
                    "passages into windows")
            check_export_options(self._manifest, self.model)  # --max-seq-length, --family, ...
        else:
            self._spec = self.model.spec(self.name)
            self._spec.preset()  # an unknown family fails before anything loads

    @property
    def is_api(self) -> bool:
        return is_api_model(self.name)

    def __call__(self) -> Encoder:
        if self._encoder is None and self.model.backend != "torch":
            encoder = ExportedEncoder(self.name, self.model.backend,
                                      threads=self.model.threads,
                                      max_tokens_per_batch=self.model.max_tokens_per_batch,
                                      show_progress=self.model.progress,
                                      manifest=self._manifest)  # hashed once, at __init__
            self._encoder = _truncated(encoder, self.model.truncate_dim)
        if self._encoder is None:
            encoder = SentenceTransformerEncoder.load(
                self._spec, show_progress=self.model.progress,
                max_tokens_per_batch=self.model.max_tokens_per_batch,
                long_passages=self.model.long_passages)
            self._encoder = _truncated(encoder, self.model.truncate_dim)
        return self._encoder

    def close(self) -> None:
        if self._encoder is not None:
            self._encoder.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_encoder(name: str, model: ModelOptions | None = None,
                 api: APIOptions | None = None) -> Encoder:
    """``name`` as a loaded :class:`~tapt.encoders.base.Encoder` (a context manager that
    closes it). Raises ``ValueError`` for an unknown family, an API name without a model
    or a missing API key; :class:`~tapt.encoders.loading.ModelSourceError` (and the
    loader's other errors) for a model that cannot be found or read."""
    return EncoderLoader(name, model, api)()


def wrap_model(model, options: ModelOptions | None = None, *, name: str | None = None
               ) -> Encoder:
    """An already-loaded SentenceTransformer (one training or merging) as an encoder that
    computes in ``options.dtype`` (under autocast: its weights stay as they are)."""
    options = options or ModelOptions()
    encoder = SentenceTransformerEncoder(model, name=name, show_progress=options.progress,
                                         dtype=options.dtype,
                                         max_tokens_per_batch=options.max_tokens_per_batch,
                                         long_passages=options.long_passages)
    return _truncated(encoder, options.truncate_dim)


def load_model(name: str, options: ModelOptions | None = None):
    """``(SentenceTransformer, ModelSpec)`` of ``name`` for code that changes the weights
    (merging): the bare model, not an encoder."""
    spec = (options or ModelOptions()).spec(name)  # an API name: refused by the loader
    return load_sentence_transformer(spec), spec
