"""Passages longer than the model's maximum length: truncate, or split into token windows.

``--long-passages`` (:class:`LongPassages`):

- ``truncate`` (default): the model reads the first ``max_seq_length`` tokens, as
  sentence-transformers does.
- ``chunk-mean``: a passage whose content is longer than one window is split into windows
  of ``chunk_tokens`` content tokens, ``chunk_stride`` apart; every window is encoded and
  the passage gets the mean of its window embeddings (chunk-and-pool, as the paper's
  patent encoders do). The mean is taken over the model's outputs (already unit length
  when the model ends in ``Normalize``) and, for such a model, scaled back to unit length.
  A passage that fits in one window keeps its plain ids, so its embedding is exactly the
  plain one.
- ``chunk-max``: the same windows, each kept as its own row of the index; the retriever
  scores a passage by its best window (MaxSim over windows,
  :class:`~tapt.retrieval.dense.DenseRetriever`). Commands that need one vector per passage
  refuse it.

Windows are cut from the content tokens (the passage tokenized without special tokens,
truncation off); each window then gets what a single passage gets: the document prompt's
tokens and the tokenizer's special tokens (CLS/SEP, BOS/EOS), found by tokenizing a probe
with and without them. ``chunk_tokens`` defaults to the model's maximum length minus those
tokens; ``chunk_stride`` to ``chunk_tokens`` (no overlap). Queries are never split.
Only tapt's token path (:mod:`tapt.encoders.st_inference`) can encode windows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from tapt.encoders.base import EncodedBatch
from tapt.encoders.st_inference import (
    TOKENIZE_CHUNK,
    encode_tokenized,
    stored_prompt,
    tokenize_once,
)
from tapt.encoders.token_batches import TokenizedTexts
from tapt.util.bounds import POSITIVE_INT, check_optional

MODES = ("truncate", "chunk-mean", "chunk-max")
"""The ``--long-passages`` values."""
ONE_VECTOR_MODES = ("truncate", "chunk-mean")
"""The modes that give one vector per passage."""
PROBE = "a b"
"""Text tokenized with and without special tokens to find the tokenizer's template."""


class LongPassageError(ValueError):
    """A long-passage setting that cannot be used (names the flag)."""


@dataclass(frozen=True)
class LongPassages:
    """How passages longer than the model's maximum length are encoded (module docstring).

    Raises :class:`LongPassageError` for an unknown mode, a window size or stride that is
    not a positive integer, a stride larger than the window (tokens would be skipped), or
    a window size or stride given with ``truncate``.
    """

    mode: str = "truncate"
    chunk_tokens: int | None = None
    chunk_stride: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise LongPassageError(f"--long-passages {self.mode!r}: choose one of "
                                   f"{', '.join(MODES)}")
        try:
            check_optional(POSITIVE_INT, self.chunk_tokens, "--chunk-tokens")
            check_optional(POSITIVE_INT, self.chunk_stride, "--chunk-stride")
        except ValueError as err:
            raise LongPassageError(str(err)) from None
        if self.mode == "truncate" and (self.chunk_tokens or self.chunk_stride):
            raise LongPassageError("--chunk-tokens / --chunk-stride need --long-passages "
                                   "chunk-mean or chunk-max")
        if (self.chunk_tokens and self.chunk_stride
                and self.chunk_stride > self.chunk_tokens):
            raise LongPassageError(f"--chunk-stride {self.chunk_stride} is larger than "
                                   f"--chunk-tokens {self.chunk_tokens}: tokens between "
                                   "windows would never be read")

    @property
    def chunked(self) -> bool:
        return self.mode != "truncate"

    @property
    def one_vector(self) -> bool:
        """Whether each passage gets one vector (not chunk-max)."""
        return self.mode in ONE_VECTOR_MODES


@dataclass
class WindowStats:
    """What splitting saw, summed over the passages encoded so far."""

    chunk_tokens: int | None = None
    chunk_stride: int | None = None
    passages: int = 0
    split: int = 0
    windows_of_split: int = 0
    max_windows: int = 1


@dataclass
class WindowPlan:
    """The rows to encode: one per unsplit passage, one per window of a split one.

    Attributes:
        tokenized: The rows' token ids (prompt and special tokens included).
        owner: The passage (input position) of each row.
        windows: Rows per passage.
        stats: The window size and stride used, and what was split.
    """

    tokenized: TokenizedTexts
    owner: np.ndarray
    windows: np.ndarray
    stats: WindowStats = field(default_factory=WindowStats)


def special_template(tokenizer) -> tuple[list[int], list[int]]:
    """The ids the tokenizer adds before and after a single text (e.g. ``[CLS]`` and
    ``[SEP]``, or a trailing EOS)."""
    plain = list(tokenizer(PROBE, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(PROBE)["input_ids"])
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start], full[start + len(plain):]
    raise LongPassageError("--long-passages: cannot find where the tokenizer puts its "
                           "special tokens around a text; use --long-passages truncate")


def window_starts(length: int, size: int, stride: int) -> list[int]:
    """Starts of windows of ``size`` tokens, ``stride`` apart, that cover ``length`` tokens
    (the last window ends at or after the end)."""
    starts = [0]
    while starts[-1] + size < length:
        starts.append(starts[-1] + stride)
    return starts


def plan_windows(model, texts: Sequence[str], options: LongPassages) -> WindowPlan:
    """Tokenize ``texts`` as documents and split those longer than one window.

    Raises :class:`LongPassageError` when ``chunk_tokens`` plus the prompt and special
    tokens exceed the model's maximum length.
    """
    prompt = stored_prompt(model, "document")
    plain = tokenize_once(model, texts, prompt=prompt, task="document")
    tokenizer = model.tokenizer
    prefix, suffix = special_template(tokenizer)
    prompt_ids = list(tokenizer(prompt, add_special_tokens=False)["input_ids"]) if prompt else []
    head = prefix + prompt_ids
    overhead = len(head) + len(suffix)
    max_length = int(model.max_seq_length or tokenizer.model_max_length)
    room = max_length - overhead
    size = options.chunk_tokens or room
    if size > room or room < 1:
        raise LongPassageError(
            f"--chunk-tokens {size}: a window plus {overhead} prompt and special tokens "
            f"exceeds the model's maximum length {max_length}; give at most {max(room, 0)} "
            "(or a larger --max-seq-length)")
    stride = options.chunk_stride or size
    if stride > size:
        raise LongPassageError(f"--chunk-stride {stride} is larger than the window "
                               f"({size} tokens): tokens between windows would never be read")
    lengths = plain.lengths
    # a plain row at the maximum length may have been truncated: tokenize it in full
    candidates = np.flatnonzero((lengths - overhead > size) | (lengths >= max_length))
    content: dict[int, list[int]] = {}
    for start in range(0, len(candidates), TOKENIZE_CHUNK):
        chunk = candidates[start:start + TOKENIZE_CHUNK].tolist()
        full = tokenizer([(prompt or "") + texts[i] for i in chunk],
                         add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
        for position, ids in zip(chunk, full):
            ids = list(ids)
            if ids[:len(prompt_ids)] == prompt_ids:
                ids = ids[len(prompt_ids):]
            else:  # the prompt merged with the text's first token: tokenize the text alone
                ids = list(tokenizer(texts[position], add_special_tokens=False,
                                     truncation=False, verbose=False)["input_ids"])
            if len(ids) > size:
                content[position] = ids
    if not content:  # nothing to split: the plain rows as they are
        return WindowPlan(tokenized=plain, owner=np.arange(len(texts), dtype=np.int64),
                          windows=np.ones(len(texts), dtype=np.int64),
                          stats=WindowStats(chunk_tokens=size, chunk_stride=stride,
                                            passages=len(texts)))
    rows: list[np.ndarray] = []
    owner: list[int] = []
    windows = np.ones(len(texts), dtype=np.int64)
    for position in range(len(texts)):
        ids = content.get(position)
        if ids is None:
            rows.append(plain.ids[plain.offsets[position]:plain.offsets[position + 1]])
            owner.append(position)
            continue
        starts = window_starts(len(ids), size, stride)
        windows[position] = len(starts)
        for start in starts:
            rows.append(np.asarray(head + ids[start:start + size] + suffix, dtype=np.int32))
            owner.append(position)
    split = windows > 1
    stats = WindowStats(chunk_tokens=size, chunk_stride=stride, passages=len(texts),
                        split=int(split.sum()), windows_of_split=int(windows[split].sum()),
                        max_windows=int(windows.max(initial=1)))
    return WindowPlan(tokenized=TokenizedTexts.from_lists(rows, plain.prompt_length),
                      owner=np.asarray(owner, dtype=np.int64), windows=windows, stats=stats)


def ends_normalized(model) -> bool:
    """Whether the model's last module is ``Normalize`` (unit-length outputs)."""
    from sentence_transformers.base.modules import Normalize

    return len(model) > 0 and isinstance(model[-1], Normalize)


def mean_of_windows(rows: np.ndarray, normalize: bool) -> np.ndarray:
    """One passage's vector from its window embeddings: their mean, at unit length when
    ``normalize``."""
    mean = rows.astype(np.float64).mean(axis=0)
    if normalize:
        norm = np.linalg.norm(mean)
        mean = mean / norm if norm > 0 else mean
    return mean.astype(np.float32)


def encode_windows(model, texts: Sequence[str], options: LongPassages, *, max_tokens: int,
                   dtype: str | None = None, progress: bool = False,
                   stats: WindowStats | None = None) -> Iterator[EncodedBatch]:
    """Encode ``texts`` as documents under ``options`` (chunk-mean or chunk-max).

    chunk-mean yields one row per passage; chunk-max one row per window, its ``positions``
    naming the passage (a passage's position repeats). ``stats`` is increased by what the
    split saw. chunk-mean keeps a running sum per split passage until its last window is
    encoded: at worst one more vector per split passage in memory.
    """
    plan = plan_windows(model, texts, options)
    if stats is not None:
        stats.chunk_tokens, stats.chunk_stride = plan.stats.chunk_tokens, plan.stats.chunk_stride
        stats.passages += plan.stats.passages
        stats.split += plan.stats.split
        stats.windows_of_split += plan.stats.windows_of_split
        stats.max_windows = max(stats.max_windows, plan.stats.max_windows)
    batches = encode_tokenized(model, plan.tokenized, kind="document", max_tokens=max_tokens,
                               dtype=dtype, progress=progress)
    if options.mode == "chunk-max":
        for batch in batches:
            batch.positions = plan.owner[batch.positions]
            yield batch
        return
    normalize = ends_normalized(model)
    # running sums of the passages whose windows are not all back yet: batches go longest
    # first, so at worst one vector per split passage (as much again as the index holds)
    partial: dict[int, tuple[np.ndarray, int]] = {}
    tokens: int | None = 0  # of batches that completed no passage, carried to the next
    for batch in batches:
        tokens = None if tokens is None or batch.tokens is None else tokens + batch.tokens
        owners = plan.owner[batch.positions]
        single = plan.windows[owners] == 1
        done_positions, done_rows = [owners[single]], [batch.embeddings[single]]
        for row, passage in zip(batch.embeddings[~single], owners[~single].tolist()):
            total, seen = partial.get(passage, (0.0, 0))
            total, seen = total + row.astype(np.float64), seen + 1
            if seen < plan.windows[passage]:
                partial[passage] = (total, seen)
                continue
            partial.pop(passage, None)
            done_positions.append(np.asarray([passage], dtype=np.int64))
            done_rows.append(mean_of_windows(total[None] / seen, normalize)[None])
        positions = np.concatenate(done_positions)
        if len(positions):  # every passage completes by the last batch
            yield EncodedBatch(positions=positions, embeddings=np.concatenate(done_rows),
                               tokens=tokens)
            tokens = 0


def info(options: LongPassages, stats: WindowStats) -> dict:
    """What a result JSON records: the mode, the window size and stride used, and how many
    of the passages encoded were split into how many windows (``truncate``: the mode)."""
    return {"mode": options.mode, **(asdict(stats) if options.chunked else {})}
