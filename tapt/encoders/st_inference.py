"""Fast batched inference for SentenceTransformer text models.

What ``SentenceTransformer.encode`` does per batch (tokenize, pad, copy, forward, copy
back and wait) is split here so an accelerator never waits for the host:

1. :func:`tokenize_once` runs the model's own ``preprocess`` (same prompt, truncation and
   special tokens as ``encode``) over the texts without padding, a block of up to
   :data:`BLOCK_TOKENS` tokens at a time (one block for all but large corpora); on an
   accelerator the next block is tokenized on a thread while the current one is encoded
   (:func:`_one_ahead`, :data:`TOKENIZE_AHEAD`), so it does not wait for the tokenizer;
2. batches are cut by a token budget within the block, longest first
   (:func:`~tapt.encoders.token_batches.token_budget_batches`);
3. a background thread pads the next batches (numpy, pinned memory on CUDA) while the
   current one runs;
4. results are copied back asynchronously and collected a few batches later, so there is
   no host synchronisation per batch.

Models this path cannot serve exactly (chat-template or multimodal inputs, Routers,
FlashAttention unpadding, ColBERT-style query expansion) fall back to ``encode``.
"""

from __future__ import annotations

import collections
import inspect
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm.auto import tqdm

from tapt.encoders.base import EncodedBatch, TextKind
from tapt.encoders.collective import is_sharded, padding_forwards
from tapt.encoders.precision import compute_context
from tapt.encoders.token_batches import TokenizedTexts, pad_rows, token_budget_batches

# torch and sentence-transformers are imported by the functions that encode: importing
# tapt must not import them.

TOKENIZE_CHUNK = 4096
"""Texts per tokenizer call (the Rust tokenizer parallelises within a call)."""

PREFETCH = 3
"""Padded batches prepared ahead of the one running."""

LAG = 2
"""Batches in flight on the device before the oldest result is collected."""

TOKENIZE_CHARS = 2**22
"""Characters per tokenizer call in :func:`tokenized_blocks` (~1M tokens): the ids of a
call come back as Python lists (~180 bytes a token), so 4,096 FormBench passages in one
call would take ~1 GB for a moment."""

BLOCK_TOKENS = 2**26
"""Token ids of one block (~67M tokens, 256 MB of int32; about 50k FormBench passages):
texts are tokenized and encoded block by block, so a 1M-passage corpus (~1.3 billion
tokens) never holds all its ids: at most two blocks (the one encoded, the next one
tokenized: :data:`TOKENIZE_AHEAD`) are alive."""


TOKENIZE_AHEAD: bool | None = None
"""Tokenize the next block while one is encoded: None (default) on accelerators only. On
a CPU the tokenizer and the model share the cores, and 100k FormBench-length passages on
2 cores gained nothing measurable (300 s overlapped; 262 s and 302 s in order, one run
each: benchmarks/README.md, "Scale") for one more block of token ids held."""


def supports_token_batching(model) -> bool:
    """Whether :func:`encode_texts` gives what ``model.encode`` gives for plain text."""
    from sentence_transformers.base.modules import Router, Transformer

    if getattr(model, "backend", "torch") != "torch":
        return False  # ONNX / OpenVINO graphs run through sentence-transformers' encode
    first = model[0] if len(model) else None
    if not isinstance(first, Transformer) or any(isinstance(m, Router) for m in model):
        return False
    if "processing_kwargs" not in inspect.signature(first.preprocess).parameters:
        return False  # an older sentence-transformers: tokenize per batch as encode does
    modalities = getattr(first, "modality_config", {}) or {}
    tokenizer = getattr(model, "tokenizer", None)
    return ("text" in modalities and "message" not in modalities
            and not getattr(first, "can_flatten_inputs", False)
            and getattr(first, "query_expansion", None) is None
            and tokenizer is not None and tokenizer.pad_token_id is not None)


def stored_prompt(model, kind: TextKind) -> str | None:
    """The prompt ``encode_query`` / ``encode_document`` would prepend for ``kind``."""
    names = ("query",) if kind == "query" else ("document", "passage", "corpus")
    for name in names:
        if name in model.prompts:
            return model.prompts[name] or None
    default = getattr(model, "default_prompt_name", None)
    return (model.prompts.get(default) or None) if default else None


def tokenize_once(model, texts: Sequence[str], *, prompt: str | None, task: TextKind,
                  progress: bool = False) -> TokenizedTexts:
    """Token ids of every text (prompt included, truncated to the model's maximum length)."""
    kwargs = {"common": {"return_tensors": None},
              "text": {"padding": False, "return_attention_mask": False,
                       "return_token_type_ids": False}}
    parts = []
    for start in tqdm(range(0, len(texts), TOKENIZE_CHUNK), desc="tokenize", unit="chunk",
                      disable=True if not progress or len(texts) <= TOKENIZE_CHUNK else None):
        chunk = list(texts[start:start + TOKENIZE_CHUNK])
        features = model.preprocess(chunk, prompt=prompt or None, task=task,
                                    processing_kwargs=kwargs)
        parts.append(TokenizedTexts.from_lists(features["input_ids"],
                                               features.get("prompt_length")))
    return TokenizedTexts.concatenate(parts)


def _batch_features(model, tokenized: TokenizedTexts, positions: np.ndarray,
                    pin: bool) -> dict:
    import torch

    tokenizer = model.tokenizer
    input_ids, mask = pad_rows(tokenized, positions, tokenizer.pad_token_id,
                               left=tokenizer.padding_side == "left")
    features = {"input_ids": torch.from_numpy(input_ids),
                "attention_mask": torch.from_numpy(mask)}
    if "token_type_ids" in getattr(tokenizer, "model_input_names", ()):
        features["token_type_ids"] = torch.zeros_like(features["input_ids"])
    if pin:
        features = {key: value.pin_memory() for key, value in features.items()}
    features["modality"] = "text"
    if tokenized.prompt_length is not None:
        features["prompt_length"] = tokenized.prompt_length
    return features


def _prefetched(make, items: list) -> Iterator:
    """``make(item)`` for each item, computed ``PREFETCH`` items ahead on a thread."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="tapt-pad") as pool:
        pending = collections.deque(pool.submit(make, item) for item in items[:PREFETCH])
        next_item = len(pending)
        while pending:
            result = pending.popleft().result()
            if next_item < len(items):
                pending.append(pool.submit(make, items[next_item]))
                next_item += 1
            yield result


def _one_ahead(items: Iterator, stop: threading.Event) -> Iterator:
    """The items of ``items``, the next one computed on a thread while the caller uses the
    current one (at most two alive); an error raised making an item is raised here. A
    caller that stops early sets ``stop`` (``items`` checks it and ends) and does not wait."""
    done = object()
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tapt-tokenize")
    try:
        pending = pool.submit(next, items, done)
        while (item := pending.result()) is not done:
            pending = pool.submit(next, items, done)
            yield item
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


def tokenized_blocks(model, texts: Sequence[str], *, prompt: str | None, task: TextKind,
                     block_tokens: int, stop: threading.Event | None = None
                     ) -> Iterator[tuple[int, TokenizedTexts]]:
    """``(first position, token ids)`` of consecutive blocks of ``texts``: whole
    tokenizer calls of about :data:`TOKENIZE_CHARS` characters (at most
    :data:`TOKENIZE_CHUNK` texts), cut once a block reaches ``block_tokens`` tokens (so a
    block may exceed it by one call). Ends early once ``stop`` is set."""
    parts: list[TokenizedTexts] = []
    start = tokens = position = 0
    step = min(TOKENIZE_CHUNK, 256)
    while position < len(texts):
        if stop is not None and stop.is_set():
            return
        chunk = texts[position:position + step]
        parts.append(part := tokenize_once(model, chunk, prompt=prompt, task=task))
        position += len(chunk)
        chars = max(sum(map(len, chunk)), 1)
        step = max(1, min(TOKENIZE_CHUNK, TOKENIZE_CHARS * len(chunk) // chars))
        tokens += part.total_tokens
        if tokens >= block_tokens:
            block = TokenizedTexts.concatenate(parts)
            parts, tokens = [], 0
            yield start, block
            start += len(block)
    if parts:
        yield start, TokenizedTexts.concatenate(parts)


def encode_texts(model, texts: Sequence[str], *, kind: TextKind, max_tokens: int,
                 max_rows: int | None = None, dtype: str | None = None,
                 progress: bool = False, block_tokens: int | None = None
                 ) -> Iterator[EncodedBatch]:
    """Stream the embeddings of ``texts`` (see the module docstring); positions index
    ``texts``. The embeddings do not depend on the blocks (only which texts share a batch).

    Args:
        model: A SentenceTransformer for which :func:`supports_token_batching` holds.
        kind: ``query`` or ``document``: picks the stored prompt and the task.
        max_tokens: Padded tokens per batch.
        max_rows: At most this many texts per batch.
        dtype: Compute dtype name; autocast is used when the weights differ (training).
        block_tokens: Tokens per block (default :data:`BLOCK_TOKENS`). A sharded (FSDP)
            model takes one block: its ranks must agree on every forward count.
    """
    prompt = stored_prompt(model, kind)
    block_tokens = block_tokens or BLOCK_TOKENS
    if len(texts) <= TOKENIZE_CHUNK or is_sharded(model):  # one block: as it always was
        tokenized = tokenize_once(model, texts, prompt=prompt, task=kind, progress=progress)
        yield from encode_tokenized(model, tokenized, kind=kind, max_tokens=max_tokens,
                                    max_rows=max_rows, dtype=dtype, progress=progress)
        return
    bar = tqdm(total=len(texts), desc=f"tokenize+encode {kind}s", unit="text",
               disable=None if progress else True)  # one bar over every block
    try:
        stop = threading.Event()
        blocks = tokenized_blocks(model, texts, prompt=prompt, task=kind,
                                  block_tokens=block_tokens, stop=stop)
        ahead = model.device.type != "cpu" if TOKENIZE_AHEAD is None else TOKENIZE_AHEAD
        for start, tokenized in _one_ahead(blocks, stop) if ahead else blocks:
            for batch in encode_tokenized(model, tokenized, kind=kind, max_tokens=max_tokens,
                                          max_rows=max_rows, dtype=dtype, bar=bar):
                batch.positions = batch.positions + start
                yield batch
    finally:
        bar.close()


def encode_tokenized(model, tokenized: TokenizedTexts, *, kind: TextKind, max_tokens: int,
                     max_rows: int | None = None, dtype: str | None = None,
                     progress: bool = False, bar=None) -> Iterator[EncodedBatch]:
    """:func:`encode_texts` of texts already tokenized (prompt and special tokens in the
    ids, as :func:`tokenize_once` gives them); ``positions`` index ``tokenized``'s rows.
    The long-passage windows (:mod:`tapt.encoders.long_passages`) come this way. ``bar``:
    a caller's progress bar, advanced by texts (else one of its own, by tokens)."""
    import torch

    batches = token_budget_batches(tokenized.lengths, max_tokens, max_rows)
    extra = padding_forwards(model, len(batches))  # FSDP: every rank forwards as often
    device = model.device
    on_cuda = device.type == "cuda"
    was_training = model.training
    model.eval()
    own_bar = bar is None
    if own_bar:
        bar = tqdm(total=tokenized.total_tokens, desc=f"encode {kind}s", unit="tok",
                   unit_scale=True, disable=None if progress else True)  # None: tty only
    in_flight: collections.deque = collections.deque()

    def collect() -> EncodedBatch:
        positions, host, event, tokens = in_flight.popleft()
        if event is not None:
            event.synchronize()
        bar.update(tokens if own_bar else len(positions))
        return EncodedBatch(positions=positions, embeddings=host.numpy(), tokens=tokens)

    try:
        for positions, features in _prefetched(
                lambda p: (p, _batch_features(model, tokenized, p, pin=on_cuda)), batches):
            tokens = int(tokenized.lengths[positions].sum())
            with torch.inference_mode(), compute_context(model, dtype):
                features = {key: value.to(device, non_blocking=True)
                            if isinstance(value, torch.Tensor) else value
                            for key, value in features.items()}
                output = model(features, task=kind)["sentence_embedding"].float()
                if on_cuda:
                    host = torch.empty(output.shape, dtype=torch.float32, pin_memory=True)
                    host.copy_(output, non_blocking=True)
                    event = torch.cuda.Event()
                    event.record()
                else:
                    host, event = output, None
            in_flight.append((positions, host, event, tokens))
            if len(in_flight) > LAG:
                yield collect()
        for _ in range(extra):  # discarded forwards of one text (tapt.encoders.collective)
            features = _batch_features(model, tokenized, batches[0][:1], pin=False)
            with torch.inference_mode(), compute_context(model, dtype):
                model({key: value.to(device) if isinstance(value, torch.Tensor) else value
                       for key, value in features.items()}, task=kind)
        while in_flight:
            yield collect()
    finally:
        if own_bar:
            bar.close()
        model.train(was_training)
