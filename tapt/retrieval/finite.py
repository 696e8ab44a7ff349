"""Refusing to score non-finite embeddings.

A model with a NaN weight embeds every text as NaN; FAISS then ranks arbitrarily and every
metric comes out 0, which reads like a bad model rather than a broken one. Every encoding
tapt scores is checked, and a non-finite one is an error that says how many texts and
which model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class NonFiniteEmbeddingsError(ValueError):
    """A model produced NaN or infinite embeddings.

    Attributes:
        model: The model's name.
        kind: ``queries`` or ``passages``.
        count: How many texts had a non-finite embedding.
        total: How many texts were encoded.
        examples: Ids of a few of them.
    """

    def __init__(self, model: str, kind: str, count: int, total: int,
                 examples: Sequence[str] = ()) -> None:
        self.model, self.kind, self.count, self.total = model, kind, count, total
        self.examples = list(examples)
        shown = f" (e.g. {', '.join(self.examples)})" if self.examples else ""
        super().__init__(
            f"model {model} produced non-finite embeddings (NaN or inf) for {count:,} of "
            f"{total:,} {kind}{shown}; refusing to score them. The weights may hold NaN/inf "
            "(a diverged training run), or activations overflow in half precision (try "
            "--dtype float32).")


def nonfinite_rows(embeddings: np.ndarray) -> np.ndarray:
    """Row indices of ``embeddings`` that hold a NaN or an infinity."""
    return np.flatnonzero(~np.isfinite(embeddings).all(axis=1))
