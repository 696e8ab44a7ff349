"""Turning passages into training sequences of at most ``max_length`` tokens.

FormBench passages run to thousands of tokens; DAPT trains on windows of them
(``chunk``: each passage cut into windows ``overlap`` tokens apart, so no sentence is only
ever seen cut at a window edge) or on full blocks (``pack``: passages concatenated with a
separator and cut into equal blocks, no padding; masked-LM only, as in transformers'
``run_mlm.py``).
"""

from __future__ import annotations

from collections.abc import Sequence


def windows(length: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """``(start, end)`` token spans of width ``size`` covering ``range(length)``, each
    starting ``size - overlap`` after the previous one; the last one ends at ``length``."""
    if size <= overlap:
        raise ValueError(f"window size ({size}) must exceed the overlap ({overlap})")
    spans, start = [], 0
    while True:
        end = min(start + size, length)
        spans.append((start, end))
        if end >= length:
            return spans
        start = end - overlap


def pack(sequences: Sequence[Sequence[int]], size: int, separator: int | None
         ) -> list[list[int]]:
    """Concatenate ``sequences`` (``separator`` between them) and cut blocks of ``size``;
    the last block may be shorter."""
    stream: list[int] = []
    for sequence in sequences:
        if stream and separator is not None:
            stream.append(separator)
        stream.extend(sequence)
    return [stream[start:start + size] for start in range(0, len(stream), size)]


def special_wrapping(tokenizer) -> tuple[list[int], list[int]]:
    """The special tokens the tokenizer puts before and after one sequence (e.g. ``[CLS]`` /
    ``[SEP]``), read off a probe: transformers 5 tokenizers have no
    ``build_inputs_with_special_tokens``."""
    probe = "chunk"
    core = tokenizer(probe, add_special_tokens=False)["input_ids"]
    full = tokenizer(probe, add_special_tokens=True)["input_ids"]
    for start in range(len(full) - len(core) + 1):
        if full[start:start + len(core)] == core:
            return full[:start], full[start + len(core):]
    raise ValueError("cannot tell where the tokenizer puts its special tokens")


def content_length(tokenizer, max_length: int) -> int:
    """Tokens of text per sequence once the tokenizer's special tokens are added."""
    size = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if size < 1:
        raise ValueError(f"max_length {max_length} leaves no room for text")
    return size


def mlm_sequences(tokenizer, texts: Sequence[str], *, max_length: int, mode: str,
                  overlap: int, with_offsets: bool = False) -> list[dict]:
    """Token sequences (special tokens added) for masked-LM training; with ``with_offsets``
    each carries ``offset_mapping`` (whole-word masking reads word boundaries from it)."""
    size = content_length(tokenizer, max_length)
    encoded = tokenizer(list(texts), add_special_tokens=False,
                        return_offsets_mapping=with_offsets, verbose=False)
    if mode == "pack":
        separator = tokenizer.sep_token_id if tokenizer.sep_token_id is not None \
            else tokenizer.eos_token_id
        pieces = [(block, None) for block in pack(encoded["input_ids"], size, separator)]
    else:
        pieces = []
        for index, ids in enumerate(encoded["input_ids"]):
            if not ids:
                continue
            offsets = encoded["offset_mapping"][index] if with_offsets else None
            for start, end in windows(len(ids), size, overlap):
                pieces.append((ids[start:end], offsets[start:end] if offsets else None))
    before, after = special_wrapping(tokenizer)
    sequences = []
    for ids, offsets in pieces:
        example = {"input_ids": [*before, *ids, *after]}
        if with_offsets:
            inner = list(offsets) if offsets else [(0, 0)] * len(ids)
            example["offset_mapping"] = [(0, 0)] * len(before) + inner + [(0, 0)] * len(after)
        sequences.append(example)
    return sequences


def text_windows(tokenizer, texts: Sequence[str], *, max_length: int, overlap: int
                 ) -> list[str]:
    """The passages cut into windows of at most ``max_length`` tokens, as text (exact
    character spans of the original): what SimCSE encodes."""
    size = content_length(tokenizer, max_length)
    encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True,
                        verbose=False)
    pieces = []
    for text, offsets in zip(texts, encoded["offset_mapping"]):
        if len(offsets) <= size:
            pieces.append(text)
            continue
        for start, end in windows(len(offsets), size, overlap):
            pieces.append(text[offsets[start][0]:offsets[end - 1][1]])
    return [piece for piece in pieces if piece.strip()]
