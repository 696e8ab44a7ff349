"""Finiteness, checked in one place: numbers read from files and embeddings to be scored.

* :func:`finite_number`: a real int or float that is not NaN or infinite (not a bool, a
  string or None; an int too large for any float is not finite) - for values read from
  JSON result files and mined-negative scores.
* :func:`nonfinite_rows`: the rows of an embedding matrix that hold a NaN or an infinity.
* :class:`NonFiniteEmbeddingsError`: the refusal to score such embeddings.

A model with a NaN weight embeds every text as NaN; FAISS then ranks arbitrarily and every
metric comes out 0, which reads like a bad model rather than a broken one. Every encoding
tapt scores is checked, and a non-finite one is an error that says how many texts and
which model. (Parameter ranges, finite floats included, are :mod:`tapt.util.bounds`' job; the
training loop's checks of losses and gradients are torch's, in :mod:`tapt.training`.)

Example::

    finite_number(0.5), finite_number(float("nan")), finite_number(True)  # True False False
    nonfinite_rows(np.array([[0.0, 1.0], [np.nan, 0.0]]))                 # array([1])
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def finite_number(value) -> bool:
    """A real, finite int or float (not a bool, None, NaN, inf or a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer too large for any float
        return False


def metric_value(value) -> bool:
    """A retrieval metric as tapt records it: a finite number in [0, 1] (not a bool)."""
    return finite_number(value) and 0 <= value <= 1


def nonfinite_rows(embeddings: np.ndarray) -> np.ndarray:
    """Row indices of ``embeddings`` that hold a NaN or an infinity."""
    return np.flatnonzero(~np.isfinite(embeddings).all(axis=1))


def all_finite(values) -> bool:
    """Whether every value of an array (or nested sequence of numbers) is finite."""
    return bool(np.isfinite(np.asarray(values, dtype=np.float64)).all())


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
