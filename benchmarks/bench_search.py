"""Exact search latency by backend: faiss ``IndexFlatIP`` vs tapt's torch search (float32 and
float16 rows), over random unit vectors, through :func:`tapt.retrieval.search.make_index`
(what ``tapt eval --search-backend faiss|torch --search-storage float32|float16`` builds).

For each corpus size the same random rows and queries go to every backend; the table gives
the time to fill the index, batched search (all queries at once) and one-query search
latency (p50/p95 ms), the rows' device, and the top-10 overlap with faiss (ties and float16
rounding may reorder near-equal scores). faiss runs where its build runs (faiss-cpu: the
CPU); torch on every visible GPU, else the CPU.

Example::

    python benchmarks/bench_search.py --sizes 100000 1000000 --dim 1024 --json search.json

This is a script, not a test: nothing is asserted, figures are printed (and written as JSON
with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_retrieval import search_latency  # the latency protocol of the sweep

BACKENDS = {"faiss": ("faiss", "float32"), "torch": ("torch", "float32"),
            "torch-fp16": ("torch", "float16")}
FILL_ROWS = 50_000
console = Console()


def random_rows(count: int, dim: int, seed: int) -> np.ndarray:
    """``(count, dim)`` float32 standard-normal rows, generated in bounded blocks."""
    rng = np.random.default_rng(seed)
    out = np.empty((count, dim), dtype=np.float32)
    for begin in range(0, count, FILL_ROWS):
        end = min(begin + FILL_ROWS, count)
        out[begin:end] = rng.standard_normal((end - begin, dim), dtype=np.float32)
    return out


def overlap_at(reference: np.ndarray, other: np.ndarray, k: int = 10) -> float:
    """Mean share of each query's top-``k`` positions that ``other`` also has."""
    shared = [len(set(a[:k]) & set(b[:k])) / k for a, b in zip(reference, other)]
    return float(np.mean(shared))


def bench(sizes: list[int], dim: int, backends: list[str], queries: int, top_k: int,
          repeats: int, single: int) -> list[dict]:
    from tapt.retrieval.search import make_index

    query_rows = random_rows(queries, dim, seed=1)
    rows = []
    for size in sizes:
        corpus = random_rows(size, dim, seed=0)
        reference = None
        for name in backends:
            backend, storage = BACKENDS[name]
            index = make_index(dim, normalize=True, backend=backend, storage_dtype=storage)
            start = time.perf_counter()
            for begin in range(0, size, FILL_ROWS):
                index.add(corpus[begin:begin + FILL_ROWS])
            add_s = time.perf_counter() - start
            latency = search_latency(index, query_rows, top_k, repeats, single)
            _, positions = index.search(query_rows, top_k)
            if reference is None:
                reference = positions
            rows.append({"backend": name, "storage": storage, "corpus_size": size, "dim": dim,
                         "on_gpu": bool(index.on_gpu), "add_s": add_s,
                         "top10_overlap_with_first": overlap_at(reference, positions),
                         **latency})
            del index
        del corpus
    return rows


def print_rows(rows: list[dict], top_k: int, queries: int) -> None:
    table = Table(title=f"Exact search by backend, top-{top_k}, {queries} queries "
                        "(random unit vectors)")
    for column in ("backend", "corpus", "dim", "GPU", "add s", "batch ms/q p50",
                   "single ms p50", "single ms p95", "top10 same"):
        table.add_column(column, justify="left" if column == "backend" else "right",
                         no_wrap=column == "backend")
    for row in rows:
        table.add_row(row["backend"], f"{row['corpus_size']:,}", str(row["dim"]),
                      "yes" if row["on_gpu"] else "no", f"{row['add_s']:.2f}",
                      f"{row['batch_ms_per_query_p50']:.3f}",
                      f"{row['single_query_ms_p50']:.3f}", f"{row['single_query_ms_p95']:.3f}",
                      f"{row['top10_overlap_with_first']:.3f}")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--dim", type=int, default=1024)
    parser.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS),
                        help="the first is the reference of the top-10 overlap")
    parser.add_argument("--queries", type=int, default=64, help="queries per batched search")
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5, help="repeated batched searches")
    parser.add_argument("--single-queries", type=int, default=20,
                        help="one-query searches timed")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    rows = bench(args.sizes, args.dim, args.backends, args.queries, args.top_k, args.repeats,
                 args.single_queries)
    print_rows(rows, args.top_k, args.queries)
    if args.json:
        args.json.write_text(json.dumps({"search": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
