"""Passages for domain-adaptive pretraining: a BEIR corpus and/or plain files, validated,
sampled and split into training and held-out passages.

Plain files: ``.jsonl`` (one object per line with a ``text`` field and an optional
``title``) or ``.txt`` (one passage per non-empty line). A bad line is an error naming
the file, the line and the field, before any model is loaded.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from tapt.data.lines import DataError, decoded_lines, iter_jsonl, string_field
from tapt.data.sources import load_data


def read_passage_file(path: str | Path, with_title: bool = True) -> list[str]:
    """The passages of one ``.jsonl`` or ``.txt`` file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(path, "file not found")
    if path.suffix == ".jsonl":
        texts = []
        for line, record in iter_jsonl(path):
            text = string_field(path, line, record, "text")
            title = string_field(path, line, record, "title", required=False, allow_empty=True)
            texts.append(f"{title} {text}" if with_title and title.strip() else text)
        return texts
    if path.suffix == ".txt":
        return [text.strip() for _, text in decoded_lines(path) if text.strip()]
    raise DataError(path, "expected a .jsonl or .txt file of passages")


def collect_passages(settings, dataset=None) -> list[str]:
    """Every passage a DAPT recipe's ``data`` section names (BEIR corpus first, then files),
    sampled down to ``max_passages`` with ``seed``. ``dataset``: ``data.path`` already
    loaded (its corpus is used instead of loading it again)."""
    texts: list[str] = []
    if settings.path:
        if dataset is None:
            dataset = load_data(settings.path, settings.config, splits=[],
                                revision=settings.revision, allow_empty=settings.lenient)
        texts += [passage.as_text(settings.with_title) for passage in dataset.corpus.values()
                  if passage.text.strip()]
    for file in settings.files:
        texts += read_passage_file(file, settings.with_title)
    if not texts:
        raise DataError(settings.path or settings.files[0], "no passages to train on")
    if settings.max_passages and len(texts) > settings.max_passages:
        texts = random.Random(settings.seed).sample(texts, settings.max_passages)
    return texts


def split_held_out(texts: Sequence[str], fraction: float, maximum: int,
                   seed: int) -> tuple[list[str], list[str]]:
    """``(training, held_out)``: a seeded sample of ``fraction`` (at most ``maximum``, at
    least one) of the passages is held out; the two never share a passage."""
    if len(texts) < 2:
        raise ValueError("DAPT needs at least two passages (one is held out)")
    count = min(maximum, max(1, round(len(texts) * fraction)), len(texts) - 1)
    held = set(random.Random(seed).sample(range(len(texts)), count))
    return ([text for i, text in enumerate(texts) if i not in held],
            [text for i, text in enumerate(texts) if i in held])
