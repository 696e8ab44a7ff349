"""Exact search over random unit vectors, by backend: faiss ``IndexFlatIP`` and tapt's torch
index (float32 and float16 rows), through :func:`tapt.retrieval.search.make_index` (what
``tapt eval --search-backend faiss|torch --search-storage float32|float16`` builds).

For each width and corpus size the same seeded random rows (added in blocks of 50k, so only
the index holds them) and queries go to every backend. Per row of the table:

- the time spent in ``add`` (the rows' generation is not counted);
- batched search (all ``--queries`` at once, ``--repeats`` times) and one-query latency
  (p50/p95 ms);
- the top-10 overlap with the first backend (ties and float16 rounding may reorder
  near-equal scores);
- the memory the index holds (resident-set growth while filling) and the extra memory
  during the searches (sampled peak above that);
- on the CPU, the FLOP bound: 2 x N x d x queries at this machine's peak float32 matmul
  rate (a torch 4,096^3 matmul, measured first), and the share of it the search reached.

faiss runs where its build runs (faiss-cpu: the CPU); torch on every visible GPU, else the
CPU (``--cpu``: every backend on the CPU).

Examples::

    python benchmarks/bench_search.py --sizes 100000 1000000 --dims 1024 --json search.json
    python benchmarks/bench_search.py --cpu --sizes 10000 100000 1000000 --dims 1024 \\
        --queries 1000 --backends faiss torch --repeats 2 --single-queries 5

This is a script, not a test: nothing is asserted, figures are printed (and written as JSON
with ``--json``).
"""

from __future__ import annotations

import argparse
import gc
import json
import threading
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

BACKENDS = {"faiss": ("faiss", "float32"), "torch": ("torch", "float32"),
            "torch-fp16": ("torch", "float16")}
BLOCK_ROWS = 50_000
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
    alone_stats = percentiles_ms(alone) if alone else {"p50_ms": float("nan"),
                                                       "p95_ms": float("nan")}
    return {"batch_ms_per_query_p50": batch_stats["p50_ms"],
            "batch_ms_per_query_p95": batch_stats["p95_ms"],
            "single_query_ms_p50": alone_stats["p50_ms"],
            "single_query_ms_p95": alone_stats["p95_ms"]}


def peak_sgemm_flops(size: int = 4096, repeats: int = 5) -> float:
    """Best float32 matmul FLOP/s of this machine's CPU (torch, ``size`` x ``size``)."""
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


def overlap_at(reference: np.ndarray, other: np.ndarray, k: int = 10) -> float:
    """Mean share of each query's top-``k`` positions that ``other`` also has."""
    shared = [len(set(a[:k]) & set(b[:k])) / k for a, b in zip(reference, other)]
    return float(np.mean(shared))


def filled_index(name: str, size: int, dim: int, *, use_gpu: bool | None):
    """A ``name`` index holding ``size`` seeded standard-normal rows (seed 0, generated and
    added in blocks); returns it and the seconds spent in ``add``."""
    from tapt.retrieval.search import make_index

    backend, storage = BACKENDS[name]
    index = make_index(dim, normalize=True, backend=backend, storage_dtype=storage,
                       use_gpu=use_gpu)
    rng = np.random.default_rng(0)
    add_s = 0.0
    for begin in range(0, size, BLOCK_ROWS):
        block = rng.standard_normal((min(BLOCK_ROWS, size - begin), dim), dtype=np.float32)
        start = time.perf_counter()
        index.add(block)
        add_s += time.perf_counter() - start
    return index, add_s


def bench(args) -> list[dict]:
    """Every (width, size, backend): fill, search, compare with the first backend."""
    peak = peak_sgemm_flops()
    console.print(f"peak float32 matmul on the CPU (torch, 4096^3): {peak / 1e9:,.1f} GFLOP/s")
    rows = []
    for dim in args.dims:
        queries = np.random.default_rng(1).standard_normal((args.queries, dim),
                                                           dtype=np.float32)
        for size in args.sizes:
            reference = None
            for name in args.backends:
                gc.collect()
                before = rss_mib()
                index, add_s = filled_index(name, size, dim,
                                            use_gpu=False if args.cpu else None)
                gc.collect()
                held = rss_mib()
                with PeakRss() as searching:
                    latency = search_latency(index, queries, args.top_k, args.repeats,
                                             args.single_queries)
                _, positions = index.search(queries, args.top_k)
                reference = positions if reference is None else reference
                on_gpu = bool(getattr(index, "on_gpu", False))
                bound_s = None if on_gpu else 2 * size * dim * len(queries) / peak
                batch_s = latency["batch_ms_per_query_p50"] * len(queries) / 1000
                rows.append({"backend": name, "storage": BACKENDS[name][1],
                             "corpus_size": size, "dim": dim, "on_gpu": on_gpu,
                             "index_mib": size * dim * 4 / 2**20, "rss_index_mib": held - before,
                             "search_extra_mib": searching.peak - held, "add_s": add_s,
                             "batch_s": batch_s, "flop_bound_s": bound_s,
                             "of_flop_bound": None if bound_s is None else bound_s / batch_s,
                             "peak_gflops": peak / 1e9,
                             "top10_overlap_with_first": overlap_at(reference, positions),
                             **latency})
                del index
    return rows


def print_rows(rows: list[dict], top_k: int, queries: int) -> None:
    table = Table(title=f"Exact search by backend, top-{top_k}, {queries} queries at once "
                        "(random unit vectors; FLOP bound on the CPU: 2 x N x d x queries at "
                        f"the measured peak, {rows[0]['peak_gflops']:,.0f} GFLOP/s)")
    for column in ("backend", "corpus", "dim", "GPU", "RSS index MiB", "search extra MiB",
                   "add s", "batch s", "of bound", "batch ms/q p50", "single ms p50",
                   "single ms p95", "top10 same"):
        table.add_column(column, justify="left" if column == "backend" else "right",
                         no_wrap=column == "backend")
    for row in rows:
        bound = "-" if row["of_flop_bound"] is None else f"{row['of_flop_bound']:.0%}"
        table.add_row(row["backend"], f"{row['corpus_size']:,}", str(row["dim"]),
                      "yes" if row["on_gpu"] else "no", f"{row['rss_index_mib']:,.0f}",
                      f"{row['search_extra_mib']:,.0f}", f"{row['add_s']:.2f}",
                      f"{row['batch_s']:.2f}", bound, f"{row['batch_ms_per_query_p50']:.3f}",
                      f"{row['single_query_ms_p50']:.3f}", f"{row['single_query_ms_p95']:.3f}",
                      f"{row['top10_overlap_with_first']:.3f}")
    Console(width=max(console.width, 170)).print(table)  # 13 columns, also in a log file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[1024])
    parser.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS),
                        help="the first is the reference of the top-10 overlap")
    parser.add_argument("--cpu", action="store_true",
                        help="every backend on the CPU (default: torch on a GPU when there is "
                             "one)")
    parser.add_argument("--queries", type=int, default=64, help="queries per batched search")
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5, help="repeated batched searches")
    parser.add_argument("--single-queries", type=int, default=20,
                        help="one-query searches timed")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rows = bench(args)
    print_rows(rows, args.top_k, args.queries)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"search": rows}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
