"""``tapt eval`` (dense, API or hybrid retrieval), ``tapt bm25`` and ``tapt mine`` (hard
negatives). Encoders, models and search are imported inside the handlers (they pull in
torch and transformers, which a parse error or a missing file should not wait for)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rich.markup import escape

from tapt.cli import terminal
from tapt.cli.options import (
    add_data_args,
    add_encoding_args,
    add_quiet_arg,
    add_source_args,
    check_folder,
    check_outputs,
    fraction,
    margin_or_none,
    non_negative_float,
    non_negative_int,
    positive_int,
    seed,
)

logger = logging.getLogger("tapt")


def add_parsers(commands) -> None:
    """``tapt eval``, ``tapt bm25`` and ``tapt mine``."""
    evaluate = commands.add_parser("eval", help="exact FAISS retrieval evaluation of a model")
    evaluate.add_argument("--model", required=True,
                          help="Hub id, local path, package:NAME/sub/path, or an API model: "
                               "openai:MODEL, voyage:MODEL")
    evaluate.add_argument("--truncate-dim", type=positive_int, default=None,
                          help="evaluate the first N embedding dimensions (Matryoshka)")
    add_encoding_args(evaluate)
    api = evaluate.add_argument_group(
        "API models (--model openai:MODEL or voyage:MODEL; key from OPENAI_API_KEY or "
        "VOYAGE_API_KEY; --truncate-dim is sent as the API's dimensions)")
    api.add_argument("--api-base-url", default=None,
                     help="endpoint base URL (default: OPENAI_BASE_URL / VOYAGE_BASE_URL, "
                          "else the provider's)")
    api.add_argument("--cache-dir", type=Path, default=None,
                     help="embedding cache folder (default: ~/.cache/tapt/embeddings)")
    api.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    api.add_argument("--api-concurrency", type=positive_int, default=4,
                     help="requests in flight at once (default 4)")
    api.add_argument("--api-rpm", type=non_negative_float, default=None,
                     help="client-side requests per minute (default: the provider's tier-1 "
                          "limit for the model; 0: none)")
    api.add_argument("--api-tpm", type=non_negative_float, default=None,
                     help="client-side tokens per minute (default: tier-1 limit; 0: none)")
    hybrid = evaluate.add_argument_group("hybrid retrieval")
    hybrid.add_argument("--hybrid", choices=("bm25",), default=None,
                        help="fuse the dense ranking with BM25's (bm25s, k1 1.5, b 0.75)")
    hybrid.add_argument("--fusion", choices=("rrf", "linear"), default="rrf",
                        help="reciprocal rank fusion (default) or a weighted sum of min-max "
                             "normalised scores")
    hybrid.add_argument("--rrf-k", type=non_negative_float, default=60.0,
                        help="RRF constant: score = sum 1/(k + rank) (default 60)")
    hybrid.add_argument("--alpha", type=fraction, default=0.5,
                        help="linear fusion: weight of the dense score (default 0.5)")
    hybrid.add_argument("--fusion-depth", type=positive_int, default=None,
                        help="passages each system contributes per query (default: --top-k); "
                             "a passage missing from one list gets no score from it")
    add_data_args(evaluate)

    bm25 = commands.add_parser("bm25", help="BM25 baseline (bm25s) with the same metrics")
    bm25.add_argument("--k1", type=non_negative_float, default=1.5,
                      help="term-frequency saturation (default 1.5; 0: term presence only)")
    bm25.add_argument("--b", type=fraction, default=0.75,
                      help="length normalisation in [0, 1] (default 0.75)")
    add_data_args(bm25)

    mine = commands.add_parser("mine", help="mine hard negatives from the corpus with BM25 "
                                            "or a model (a teacher), for data.mined_negatives")
    add_source_args(mine, split="train")
    mine.add_argument("--retriever", required=True,
                      help="bm25, or a model: Hub id, path (e.g. runs/x/final), package:..., "
                           "openai:MODEL / voyage:MODEL")
    mine.add_argument("--output", type=Path, required=True, help="mined negatives (JSONL)")
    mine.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    mine.add_argument("--depth", type=positive_int, default=100,
                      help="ranks considered per query (default 100)")
    mine.add_argument("--skip-top", type=non_negative_int, default=0,
                      help="ranks 1..N are never taken (likely unlabelled positives)")
    mine.add_argument("--margin", type=margin_or_none, default=0.05,
                      help="drop candidates scoring above (1 - MARGIN) x the query's best "
                           "anchor score (default 0.05; 'none' turns it off)")
    mine.add_argument("--per-query", type=positive_int, default=3, help="negatives per query")
    mine.add_argument("--sampling", choices=("random", "top"), default="random",
                      help="random among the candidates left (default), or the top ones")
    mine.add_argument("--seed", type=seed, default=0, help="seed of the random sampling")
    add_encoding_args(mine, device=False)  # a model --retriever; tapt mine has no --device
    add_quiet_arg(mine)


def _check_outputs(args: argparse.Namespace) -> None:
    """tapt eval / bm25: --output and --run can be written (before anything loads)."""
    check_outputs([("--output", args.output), ("--run", args.run)], overwrite=args.overwrite)


def _run_retrieval(args: argparse.Namespace, make_retriever) -> int:
    from tapt.data.sources import load_data
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.retrieval.evaluate import evaluate, metrics_table

    _check_outputs(args)
    if args.top_k < 100:
        logger.warning("--top-k %d: recall@100 only counts the top %d passages", args.top_k,
                       args.top_k)
    dataset = load_data(args.data, args.config, [args.split], revision=args.revision,
                        require_anchor=not args.lenient, allow_empty=args.lenient,
                        relevant_from=args.relevant_from)
    corpus_ids = subcorpus_ids(dataset, args.split, distractors=args.distractors,
                               fraction=args.fraction, seed=args.seed)
    retriever = make_retriever()
    info = {"distractors": args.distractors, "fraction": args.fraction, "seed": args.seed,
            "top_k": args.top_k}
    report = evaluate(retriever, dataset, args.split, corpus_ids=corpus_ids,
                      with_title=not args.no_title, info=info)
    # What a hybrid retriever fused and what an API encoder cost: evaluated.hybrid / .api
    for part in (retriever, getattr(retriever, "encoder", None)):
        if callable(getattr(part, "result_info", None)):
            report.info.update(part.result_info())
    title = (f"{args.split} metrics ({len(corpus_ids):,} passages, "
             f"{report.info['num_queries']:,} queries)")
    terminal.console.print(metrics_table({retriever.name: report.metrics}, title=title))
    terminal.console.print(terminal.figures_table(report.timings))
    if "api" in report.info:
        api = report.info["api"]
        cost = "unknown price" if api["cost_usd"] is None else f"${api['cost_usd']:.4f}"
        terminal.console.print(f"{api['provider']}:{api['model']}: {api['tokens']:,} tokens "
                               f"billed ({cost}) in {api['requests']:,} requests, "
                               f"{api['retries']} retries; "
                               f"{api['cache_hits']:,} of {api['texts']:,} texts from the cache",
                               highlight=False)
    if args.output:
        report.write_json(args.output)
        terminal.console.print(f"metrics written to {args.output}")
    if args.run:
        report.write_trec_run(args.run, tag=Path(retriever.name).name or "tapt")
        terminal.console.print(f"run written to {args.run}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    progress = terminal.show_progress(args)
    from tapt.encoders.api import APIError, is_api_model, load_api_encoder
    from tapt.encoders.base import TruncatedEncoder
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.dense import DenseRetriever

    _check_outputs(args)
    if args.cache_dir is not None and is_api_model(args.model) and not args.no_cache:
        check_folder("--cache-dir", args.cache_dir)
    depth = (args.fusion_depth or args.top_k) if args.hybrid else args.top_k
    api_encoder = None
    if is_api_model(args.model):  # built now: a missing key fails before the data loads
        api_encoder = load_api_encoder(
            args.model, dimensions=args.truncate_dim, base_url=args.api_base_url,
            cache_dir=args.cache_dir, cache=not args.no_cache,
            concurrency=args.api_concurrency, requests_per_minute=args.api_rpm,
            tokens_per_minute=args.api_tpm)
    else:
        spec = ModelSpec(args.model, family=args.family, max_seq_length=args.max_seq_length,
                         trust_remote_code=args.trust_remote_code, device=args.device,
                         dtype=args.dtype)
        spec.preset()  # an unknown family fails before the data loads

    def make():
        if api_encoder is not None:
            encoder = api_encoder
        else:
            encoder = SentenceTransformerEncoder.load(
                spec, show_progress=progress, max_tokens_per_batch=args.max_tokens_per_batch)
            if args.truncate_dim:
                encoder = TruncatedEncoder(encoder, args.truncate_dim)
        dense = DenseRetriever(encoder, batch_size=args.batch_size, top_k=depth,
                               progress=progress)
        if not args.hybrid:
            return dense
        from tapt.retrieval.bm25 import BM25Retriever
        from tapt.retrieval.hybrid import HybridRetriever

        return HybridRetriever(dense, BM25Retriever(top_k=depth, progress=progress),
                               fusion=args.fusion, rrf_k=args.rrf_k, alpha=args.alpha,
                               top_k=args.top_k)
    try:
        return _run_retrieval(args, make)
    except APIError as err:
        terminal.console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False,
                               soft_wrap=True)
        return 1
    finally:
        if api_encoder is not None:
            api_encoder.close()


def cmd_bm25(args: argparse.Namespace) -> int:
    from tapt.retrieval.bm25 import BM25Retriever

    return _run_retrieval(args, lambda: BM25Retriever(top_k=args.top_k, k1=args.k1, b=args.b,
                                                      progress=terminal.show_progress(args)))


def cmd_mine(args: argparse.Namespace) -> int:
    progress = terminal.show_progress(args)
    from tapt.data.sources import load_data
    from tapt.retrieval.mining import MiningSettings, mine, summary_table, write_mined

    check_outputs([("--output", args.output)], overwrite=args.overwrite)
    settings = MiningSettings(per_query=args.per_query, depth=args.depth,
                              skip_top=args.skip_top, margin=args.margin,
                              sampling=args.sampling, seed=args.seed)
    settings.check()
    dataset = load_data(args.data, args.config, [args.split], revision=args.revision,
                        require_anchor=not args.lenient, allow_empty=args.lenient,
                        relevant_from=args.relevant_from)
    if args.retriever == "bm25":
        from tapt.retrieval.bm25 import BM25Retriever

        retriever = BM25Retriever(top_k=args.depth, progress=progress)
    else:
        from tapt.encoders.api import is_api_model, load_api_encoder
        from tapt.encoders.loading import ModelSpec
        from tapt.encoders.sentence import SentenceTransformerEncoder
        from tapt.retrieval.dense import DenseRetriever

        if is_api_model(args.retriever):  # e.g. openai:text-embedding-3-large as teacher
            encoder = load_api_encoder(args.retriever)
        else:
            spec = ModelSpec(args.retriever, family=args.family,
                             max_seq_length=args.max_seq_length,
                             trust_remote_code=args.trust_remote_code, dtype=args.dtype)
            encoder = SentenceTransformerEncoder.load(
                spec, show_progress=progress, max_tokens_per_batch=args.max_tokens_per_batch)
        retriever = DenseRetriever(encoder, batch_size=args.batch_size, top_k=args.depth,
                                   progress=progress)
    records, summary = mine(retriever, dataset, args.split, settings,
                            with_title=not args.no_title)
    write_mined(args.output, records, retriever=retriever.name, settings=settings,
                data=dataset.source, split=args.split)
    terminal.console.print(summary_table(summary, settings,
                                         f"mined {args.split} negatives with {retriever.name}"))
    terminal.console.print(f"written to {args.output}")
    return 0


COMMANDS = {"eval": cmd_eval, "bm25": cmd_bm25, "mine": cmd_mine}
