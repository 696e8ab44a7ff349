"""The DAPT recipe (``tapt dapt``): where its passages come from, the objective (MLM or
SimCSE), how passages become sequences, and its cross-field checks; the sections it shares
with a TAPT recipe are :class:`~tapt.recipe.schema.RunRecipe`'s."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import field_validator, model_validator

from tapt.recipe.base import Section, Seed, local_path
from tapt.recipe.schema import RunRecipe, TrainingSettings
from tapt.recipe.selection import check_tapt_only
from tapt.util import bounds


class DaptDataSettings(Section):
    """Where DAPT's passages come from: a BEIR corpus (local or Hub), plain files, or both.
    Only passages are read, never queries or judgments."""

    path: str | None = None
    """BEIR folder or Hub dataset id: its corpus passages are the text."""
    config: str | None = None
    """Hub config or subfolder of ``path``."""
    revision: str | None = None
    """Hub dataset revision: branch, tag or commit (None: the default branch)."""
    files: list[str] = []  # noqa: RUF012 (pydantic copies defaults)
    """Plain files: ``.jsonl`` (a ``text`` field, optional ``title``) or ``.txt`` (one
    passage per line)."""
    with_title: bool = True
    """Passages as title + text (else the text only)."""
    max_passages: Annotated[int, bounds.POSITIVE_COUNT] | None = None
    """Train on a seeded sample of at most this many passages."""
    held_out_fraction: Annotated[float, bounds.HELD_OUT] = 0.01
    """Fraction of the passages held out for the held-out loss."""
    held_out_max: Annotated[int, bounds.POSITIVE_COUNT] = 1000
    """Held-out passages (for the held-out loss): this fraction, at most this many."""
    seed: Seed = 0
    """Seed of the passage sample and the held-out split."""
    dev_data: str | None = None
    """BEIR folder for the zero-shot retrieval evaluation at each save (default: ``path``)."""
    dev_split: str | None = "dev"
    """Split of that BEIR data to evaluate; None: no retrieval evaluation."""
    dev_distractors: Annotated[int, bounds.COUNT] | None = 20000
    """Dev sub-corpus: every judged dev passage plus this many distractors (None: all)."""
    dev_seed: Seed = 0
    """Seed of the dev sub-corpus's distractor sample."""
    lenient: bool = False
    """Accept empty passages and dev queries without an anchor (non-FormBench BEIR sets)."""

    @field_validator("path", "dev_data")
    @classmethod
    def _check_folder(cls, path: str | None) -> str | None:
        return local_path(path, folder=True)

    @field_validator("files")
    @classmethod
    def _check_files(cls, files: list[str]) -> list[str]:
        for name in files:
            if Path(name).suffix.lower() not in (".jsonl", ".txt"):
                raise ValueError(f"{name}: expected a .jsonl or .txt file of passages")
        return [local_path(name, folder=False) for name in files]

    @model_validator(mode="after")
    def _check_source(self) -> DaptDataSettings:
        if not self.path and not self.files:
            raise ValueError("data needs a BEIR corpus (data.path) or plain files (data.files)")
        return self


class ObjectiveSettings(Section):
    """The DAPT objective."""

    name: Literal["mlm", "simcse"]
    """``mlm``: masked language modelling (encoder-only models: BERT, GTE, Nomic BERT).
    ``simcse``: unsupervised contrastive learning, each passage against itself under
    dropout noise, with in-batch negatives (any model, decoders such as Qwen3 too)."""
    mlm_probability: Annotated[float, bounds.OPEN_FRACTION] = 0.15
    """MLM: fraction of tokens masked."""
    whole_word_masking: bool = False
    """MLM: mask whole words rather than single tokens."""
    scale: Annotated[float, bounds.LOGIT_SCALE] = 20.0
    """SimCSE logit scale (20 = temperature 0.05)."""
    dropout: Annotated[float, bounds.DROPOUT] | None = 0.1
    """SimCSE: dropout probability set on every dropout of the model while training (the
    noise that makes two views of a passage differ; Qwen3 has none of its own). None keeps
    the model's own. The exported config keeps the model's original values."""


class ChunkingSettings(Section):
    """How passages become training sequences of at most ``max_length`` tokens."""

    mode: Literal["chunk", "pack"] = "chunk"
    """``chunk``: windows of each passage, ``overlap`` tokens apart; ``pack``: passages
    concatenated and cut into full-length blocks (``mlm`` only)."""
    overlap: Annotated[int, bounds.OVERLAP] | None = None
    """Tokens shared by consecutive windows (default: an eighth of ``max_length``)."""
    max_length: Annotated[int, bounds.CHUNK_LENGTH] | None = None
    """Tokens per sequence, special tokens included (default: the model's maximum
    length, at most 512)."""


class DaptRecipe(RunRecipe[DaptDataSettings]):
    """A DAPT recipe (``tapt dapt``): continued pretraining before TAPT."""

    objective: ObjectiveSettings
    chunking: ChunkingSettings = ChunkingSettings()
    training: TrainingSettings = TrainingSettings(epochs=1, learning_rate=5e-5)

    @model_validator(mode="after")
    def _check_objective(self) -> DaptRecipe:
        check_tapt_only(self)
        if self.objective.name == "simcse" and self.chunking.mode == "pack":
            raise ValueError("chunking.mode: pack mixes passages, which SimCSE cannot use "
                             "(a packed block is not one passage); use chunk")
        if self.chunking.overlap is not None and \
                self.chunking.overlap >= (self.chunking.max_length or 10**9):
            raise ValueError("chunking.overlap must be smaller than chunking.max_length")
        return self
