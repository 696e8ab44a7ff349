"""Refuse a model whose tokenizer cannot be the one its weights were trained with.

transformers builds a tokenizer from whatever a folder holds: a BERT folder without
``tokenizer.json`` and ``vocab.txt`` still loads, with a vocabulary of its 5 special tokens,
and every word becomes ``[UNK]``. The model then encodes "[UNK] [UNK] ..." and retrieval
scores are wrong but plausible (all-MiniLM-L6-v2: nDCG@10 0.38 instead of 0.80). Two cheap
checks (no forward pass) catch it:

- **size**: every id of the tokenizer must index the input embedding matrix (largest id <
  rows, else an input can crash or read a row that was never trained), and the vocabulary
  must cover at least :data:`MIN_VOCAB_FRACTION` of the rows. Checkpoints pad their matrix
  (to a multiple of 64 or 128, or with reserved tokens: Qwen2 151,646 tokens for 151,936
  rows, gte/nomic 30,522 for 30,528), which never leaves half of it unreachable; a tokenizer
  that lost its vocabulary keeps a handful of special tokens.
- **sample**: a few ordinary English words must not all become the unknown token. A
  tokenizer without an unknown token (byte-level BPE) cannot fail this one.

Models without a Hugging Face tokenizer or an input embedding matrix (e.g. a custom first
module) skip the check that needs it. Tiny test vocabularies (a few hundred tokens for a
matrix of the same size) pass.
"""

from __future__ import annotations

from pathlib import Path

MIN_VOCAB_FRACTION = 0.5
"""A tokenizer reaching fewer of the embedding rows than this is not the model's own."""

SAMPLE_TEXT = "the water and the oil are mixed with a small amount of salt"
"""Ordinary words any real vocabulary of an English-capable model can spell."""

TOKENIZER_FILE = "tokenizer.json"


class TokenizerError(ValueError):
    """The model's tokenizer is missing or does not match its weights; the message names the
    model and what is missing (the CLI prints it and exits with code 2)."""


def check_tokenizer(model, name: str) -> None:
    """Raise :class:`TokenizerError` unless ``model`` (a loaded SentenceTransformer, labelled
    ``name`` in the message) has a tokenizer that fits its embedding matrix and spells
    :data:`SAMPLE_TEXT` with at least one known token."""
    tokenizer = hf_tokenizer(model)
    if tokenizer is None:
        return
    try:
        vocab = tokenizer.get_vocab()
    except (NotImplementedError, AttributeError):  # some custom tokenizers: no size check
        vocab = {}
    rows = embedding_rows(model)
    if rows is not None and vocab:
        size, largest = len(vocab), max(vocab.values())
        if largest >= rows:
            raise TokenizerError(f"model {name}: its tokenizer has ids up to {largest}, but the "
                                 f"embedding matrix has {rows} rows (ids 0-{rows - 1}): the "
                                 f"tokenizer belongs to another model{files_hint(tokenizer)}")
        if size < MIN_VOCAB_FRACTION * rows:
            raise TokenizerError(f"model {name}: its tokenizer has {size} tokens for an "
                                 f"embedding matrix of {rows} rows: the tokenizer's vocabulary "
                                 f"is missing{files_hint(tokenizer)}")
    ids = tokenizer(SAMPLE_TEXT, add_special_tokens=False)["input_ids"]
    unk = getattr(tokenizer, "unk_token_id", None)
    if not ids or (unk is not None and all(token == unk for token in ids)):
        what = "nothing" if not ids else f"only {tokenizer.unk_token}"
        raise TokenizerError(f"model {name}: its tokenizer turns ordinary words ({SAMPLE_TEXT!r})"
                             f" into {what}: the tokenizer's vocabulary is missing"
                             f"{files_hint(tokenizer)}")


def hf_tokenizer(model):
    """The Hugging Face tokenizer of ``model``'s first module (a processor's tokenizer), or
    None."""
    tokenizer = getattr(model, "tokenizer", None)
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps one
    if tokenizer is None or not hasattr(tokenizer, "get_vocab") or not callable(tokenizer):
        return None
    return tokenizer


def embedding_rows(model) -> int | None:
    """Rows of the transformer's input embedding matrix, or None when there is none."""
    transformer = getattr(model, "transformers_model", None)
    try:
        embeddings = transformer.get_input_embeddings() if transformer is not None else None
    except (AttributeError, NotImplementedError):
        embeddings = None
    rows = getattr(embeddings, "num_embeddings", None)
    return int(rows) if isinstance(rows, int) else None


def required_files(tokenizer) -> list[str]:
    """The files the tokenizer's class can be built from without ``tokenizer.json``
    (``vocab.txt``; ``vocab.json`` + ``merges.txt``; a SentencePiece model, ...)."""
    names = getattr(tokenizer, "vocab_files_names", None) or {}
    return sorted({file for file in names.values() if file != TOKENIZER_FILE})


def missing_files(folder: Path, tokenizer) -> list[str]:
    """What ``folder`` (a transformer module's folder) lacks for ``tokenizer``: nothing when
    it holds ``tokenizer.json`` or every file of :func:`required_files`."""
    if (folder / TOKENIZER_FILE).is_file():
        return []
    alternative = [file for file in required_files(tokenizer) if not (folder / file).is_file()]
    return [TOKENIZER_FILE, *alternative] if alternative or not required_files(tokenizer) \
        else []


def files_hint(tokenizer) -> str:
    """``"; FOLDER has no tokenizer.json or vocab.txt"`` for a tokenizer read from a local
    folder that lacks its files, else ``""``."""
    folder = Path(str(getattr(tokenizer, "name_or_path", "") or ""))
    if not str(folder) or not folder.is_dir():
        return ""
    missing = missing_files(folder, tokenizer)
    return f"; {folder} has no {' or '.join(missing)}" if missing else ""
