"""Tokenize once, sort by token length, batch by a token budget, pad with numpy.

sentence-transformers' ``encode`` sorts by characters, batches a fixed number of texts and
tokenizes each batch on the critical path. For a ~1M-passage corpus tapt instead tokenizes
everything once (the counts for tokens/s come from this same pass), stores the ids flat so
a billion tokens fit in a few GB, and cuts batches by padded tokens, so short passages go
in large batches and long ones in small ones while memory stays bounded.
No library offers this for SentenceTransformer models, hence this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class TokenizedTexts:
    """Token ids of many texts back to back: text ``i`` is ``ids[offsets[i]:offsets[i+1]]``.

    Attributes:
        prompt_length: Tokens of the prompt prefix (for pooling that excludes it), if any.
    """

    ids: np.ndarray
    offsets: np.ndarray
    prompt_length: int | None = None

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def total_tokens(self) -> int:
        return int(self.offsets[-1])

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], prompt_length: int | None = None
                   ) -> TokenizedTexts:
        lengths = np.fromiter((len(row) for row in rows), dtype=np.int64, count=len(rows))
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = (np.concatenate([np.asarray(row, dtype=np.int32) for row in rows])
               if len(rows) else np.zeros(0, dtype=np.int32))
        return cls(ids=ids, offsets=offsets, prompt_length=prompt_length)

    @classmethod
    def concatenate(cls, parts: Sequence[TokenizedTexts]) -> TokenizedTexts:
        if not parts:
            return cls(ids=np.zeros(0, dtype=np.int32), offsets=np.zeros(1, dtype=np.int64))
        shifts = np.cumsum([0] + [part.total_tokens for part in parts[:-1]])
        offsets = np.concatenate([parts[0].offsets[:1]]
                                 + [part.offsets[1:] + shift for part, shift in zip(parts, shifts)])
        return cls(ids=np.concatenate([part.ids for part in parts]), offsets=offsets,
                   prompt_length=parts[0].prompt_length)


def token_budget_batches(lengths: np.ndarray, max_tokens: int,
                         max_rows: int | None = None) -> list[np.ndarray]:
    """Positions longest first, cut so that ``rows x longest row <= max_tokens``.

    A text longer than the budget gets a batch of its own. ``max_rows`` caps the rows of a
    batch (very short texts would otherwise make batches of thousands).
    """
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    order = np.argsort(-np.asarray(lengths), kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    while start < len(order):
        longest = max(int(lengths[order[start]]), 1)
        rows = max(1, max_tokens // longest)
        if max_rows:
            rows = min(rows, max_rows)
        batches.append(order[start:start + rows])
        start += rows
    return batches


def pad_rows(tokenized: TokenizedTexts, positions: np.ndarray, pad_id: int,
             left: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask)`` of ``positions``, padded to the longest, as int64."""
    lengths = tokenized.lengths[positions]
    rows, width = len(positions), int(lengths.max(initial=0))
    input_ids = np.full((rows, width), pad_id, dtype=np.int64)
    mask = np.zeros((rows, width), dtype=np.int64)
    total = int(lengths.sum())
    row_index = np.repeat(np.arange(rows), lengths)
    within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    columns = within + np.repeat(width - lengths, lengths) if left else within
    source = np.repeat(tokenized.offsets[positions], lengths) + within
    input_ids[row_index, columns] = tokenized.ids[source]
    mask[row_index, columns] = 1
    return input_ids, mask
