"""Encoders for the analysis tests: cheap, deterministic, and countable."""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Sequence

import numpy as np

import tapt
from tapt.encoders.base import EncodedBatch

WORD = re.compile(r"\w+")


class WordHashEncoder(tapt.Encoder):
    """Bag of words hashed into ``dim`` buckets (crc32, so the same on every run)."""

    def __init__(self, dim: int = 512, name: str = "word-hash") -> None:
        self.dim = dim
        self.name = name

    @property
    def embedding_dim(self) -> int:
        return self.dim

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                out[row, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out

    encode_corpus = encode_queries


class CountingEncoder(tapt.Encoder):
    """Wraps an encoder and counts what it was asked to encode."""

    def __init__(self, inner: tapt.Encoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.normalize = inner.normalize
        self.streams: Counter[str] = Counter()
        self.texts: Counter[str] = Counter()

    @property
    def embedding_dim(self) -> int:
        return self.inner.embedding_dim

    def encode_queries(self, texts, batch_size=32):  # pragma: no cover - streams are used
        raise AssertionError("the analyses must encode through encode_stream")

    encode_corpus = encode_queries

    def encode_stream(self, texts, kind="document", batch_size=32):
        self.streams[kind] += 1
        self.texts[kind] += len(texts)
        yield from self.inner.encode_stream(texts, kind, batch_size)


class LookupEncoder(tapt.Encoder):
    """Fixed vectors: ``vectors[text]`` (queries and passages alike)."""

    def __init__(self, vectors: dict[str, Sequence[float]], name: str = "lookup",
                 normalize: bool = True) -> None:
        self.vectors = {t: np.asarray(v, dtype=np.float32) for t, v in vectors.items()}
        self.name = name
        self.normalize = normalize
        self.dim = len(next(iter(self.vectors.values())))

    @property
    def embedding_dim(self) -> int:
        return self.dim

    def encode_queries(self, texts, batch_size=32):
        return np.stack([self.vectors[t] for t in texts])

    encode_corpus = encode_queries

    def encode_stream(self, texts, kind="document", batch_size=32):
        yield EncodedBatch(positions=np.arange(len(texts)),
                           embeddings=self.encode_queries(texts))
