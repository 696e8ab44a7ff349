"""The encoder interface that tapt's evaluation accepts.

Add a new model by subclassing :class:`Encoder` and implementing ``encode_queries``,
``encode_corpus`` and ``embedding_dim``; see ``examples/custom_encoder.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class Encoder(ABC):
    """Turns queries and passages into float32 embedding matrices.

    Attributes:
        name: A label for reports (a model id or path).
        normalize: True when scores are cosine similarities (the evaluator L2-normalises
            the embeddings before inner-product search); False for raw inner product.

    Example::

        class Random(Encoder):
            name = "random"
            embedding_dim = 8
            def encode_queries(self, texts, batch_size=32):
                return np.random.rand(len(texts), 8).astype("float32")
            encode_corpus = encode_queries
    """

    name: str = "encoder"
    normalize: bool = True

    @property
    @abstractmethod
    def embedding_dim(self) -> int:
        """Width of the returned embeddings."""

    @abstractmethod
    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed queries (with any query instruction); shape ``(len(texts), embedding_dim)``."""

    @abstractmethod
    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed passages (with any document prompt); shape ``(len(texts), embedding_dim)``."""

    def text_length(self, text: str) -> int:
        """Length used to sort passages before batching (fewer pad tokens); characters by default."""
        return len(text)

    def count_tokens(self, texts: Sequence[str]) -> int | None:
        """Tokens the model will see for ``texts`` (after truncation), or None if unknown."""
        return None


class TruncatedEncoder(Encoder):
    """Keep the first ``dim`` columns of another encoder's embeddings (Matryoshka models)."""

    def __init__(self, encoder: Encoder, dim: int) -> None:
        if not 0 < dim <= encoder.embedding_dim:
            raise ValueError(f"truncate dim must be in 1..{encoder.embedding_dim}, got {dim}")
        self.inner = encoder
        self.dim = dim
        self.name = f"{encoder.name}@{dim}"
        self.normalize = encoder.normalize

    @property
    def embedding_dim(self) -> int:
        return self.dim

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return np.ascontiguousarray(self.inner.encode_queries(texts, batch_size)[:, :self.dim])

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return np.ascontiguousarray(self.inner.encode_corpus(texts, batch_size)[:, :self.dim])

    def text_length(self, text: str) -> int:
        return self.inner.text_length(text)

    def count_tokens(self, texts: Sequence[str]) -> int | None:
        return self.inner.count_tokens(texts)
