"""``tapt pseudo``: pseudo-queries sampled from the corpus, labelled by a teacher (BM25, a
model, or a model fused with BM25), for a recipe's ``data.pseudo_queries``
(:mod:`tapt.data.pseudo_queries`, :mod:`tapt.retrieval.pseudo_labels`). Reads the corpus
alone: no query and no qrels file of any split is opened."""

from __future__ import annotations

import argparse
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.inputs import opened_encoder, search_options
from tapt.cli.number_types import bm25_k1, count, fraction, positive_count, rrf_k, seed, top_k
from tapt.cli.options import (
    add_corpus_store_args,
    add_encoding_args,
    add_quiet_arg,
    check_outputs,
    data_inputs,
    model_inputs,
)
from tapt.cli.serving import add_backend_args, check_serving_args


def add_parsers(commands) -> None:
    """``tapt pseudo``."""
    pseudo = commands.add_parser(
        "pseudo", help="pseudo-queries sampled from the corpus passages, labelled by a teacher "
                       "(bm25, a model, or a model fused with BM25), for data.pseudo_queries")
    pseudo.add_argument("--data", required=True,
                        help="local BEIR folder, or a Hub dataset id such as vinven7/FormBench "
                             "(its corpus alone is read)")
    pseudo.add_argument("--config", default=None,
                        help="Hub config or subfolder: structured (C1), random (C0), sample")
    pseudo.add_argument("--revision", default=None, help="Hub dataset revision (tag/commit)")
    pseudo.add_argument("--lenient", action="store_true", help="accept empty passages")
    pseudo.add_argument("--no-title", action="store_true",
                        help="rank passages without their title (default: title + ' ' + text)")
    add_corpus_store_args(pseudo)
    pseudo.add_argument("--teacher", required=True,
                        help="bm25, or a model (Hub id, path, package:...) whose ranking labels "
                             "the queries; with --hybrid bm25, that model fused with BM25")
    pseudo.add_argument("--output", type=Path, required=True, help="the rows (JSONL)")
    pseudo.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    sampling = pseudo.add_argument_group("sampling the queries")
    sampling.add_argument("--queries", type=positive_count, default=None, metavar="N",
                          help="at most N pseudo-queries (default: --per-passage of every "
                               "passage), from passages in a seeded order")
    sampling.add_argument("--per-passage", type=top_k, default=1,
                          help="queries drawn from each passage (default 1)")
    sampling.add_argument("--span", choices=("sentence", "title"), default="sentence",
                          help="a sentence of the passage (SPAR; default) or its title")
    sampling.add_argument("--choice", choices=("early", "uniform"), default="early",
                          help="early (default): the i-th sentence drawn with weight 1/(i+1); "
                               "uniform: all alike")
    sampling.add_argument("--min-words", type=top_k, default=5,
                          help="shortest usable span in words (default 5)")
    labels = pseudo.add_argument_group("labels from the teacher's ranking")
    labels.add_argument("--depth", type=top_k, default=50, help="ranks read per query (50)")
    labels.add_argument("--positives", type=top_k, default=1,
                        help="top ranks recorded as positives; the first is the row's (1)")
    labels.add_argument("--negatives", type=count, default=3,
                        help="hard negatives per row, drawn from ranks --negatives-from to "
                             "--negatives-to (3)")
    labels.add_argument("--negatives-from", type=top_k, default=30, metavar="RANK",
                        help="the best rank a negative is drawn from (30)")
    labels.add_argument("--negatives-to", type=top_k, default=50, metavar="RANK",
                        help="the worst rank a negative is drawn from (50: with --negatives-from "
                             "30, the bottom of the teacher's top 50)")
    labels.add_argument("--source", choices=("keep", "drop"), default="keep",
                        help="keep (default) the query's own passage in its ranking, or drop "
                             "it (the query is labelled with other passages only)")
    labels.add_argument("--seed", type=seed, default=0,
                        help="seed of the passage order, the spans and the negatives")
    labels.add_argument("--chunk", type=top_k, default=100_000,
                        help="queries ranked at a time (memory: CHUNK x --depth scores)")
    teacher = pseudo.add_argument_group("the teacher")
    teacher.add_argument("--hybrid", choices=("bm25",), default=None,
                         help="fuse the model --teacher's ranking with BM25's (the untrained "
                              "hybrid as teacher)")
    teacher.add_argument("--fusion", choices=("rrf", "linear"), default="rrf",
                         help="reciprocal rank fusion (default) or min-max linear fusion")
    teacher.add_argument("--rrf-k", type=rrf_k, default=60.0, help="RRF constant (60)")
    teacher.add_argument("--alpha", type=fraction, default=0.5,
                         help="linear fusion: weight of the model's score (0.5)")
    teacher.add_argument("--k1", type=bm25_k1, default=1.5, help="BM25 k1 (1.5)")
    teacher.add_argument("--b", type=fraction, default=0.75, help="BM25 b (0.75)")
    add_encoding_args(pseudo)  # a model --teacher
    add_backend_args(pseudo)  # a tapt export folder as --teacher
    add_quiet_arg(pseudo)


def cmd_pseudo(args: argparse.Namespace) -> int:
    progress = terminal.show_progress(args)
    from tqdm.auto import tqdm

    from tapt.data.pseudo_queries import SamplingCounts, iter_pseudo_queries
    from tapt.data.sources import load_corpus
    from tapt.retrieval.pseudo_labels import (
        LabelCounts,
        LabelSettings,
        label_pseudo_queries,
        summary_table,
        write_pseudo_queries,
    )
    from tapt.retrieval.retriever_factory import HybridOptions, build_retriever, is_bm25

    check_outputs([("--output", args.output)], overwrite=args.overwrite,
                  inputs=data_inputs("--data", args.data, args.config)
                  + model_inputs("--teacher", args.teacher))
    check_serving_args(args)
    lexical = is_bm25(args.teacher)
    if lexical and args.hybrid:
        raise ValueError("--hybrid bm25 fuses a model --teacher with BM25; --teacher bm25 is "
                         "BM25 alone")
    settings = LabelSettings(depth=args.depth, positives=args.positives,
                             negative_ranks=(args.negatives_from, args.negatives_to),
                             negatives=args.negatives, source=args.source, seed=args.seed)
    settings.check()
    sampling = {"queries": args.queries, "per_passage": args.per_passage, "span": args.span,
                "choice": args.choice, "min_words": args.min_words, "seed": args.seed,
                "with_title": not args.no_title}
    with opened_encoder(args, args.teacher, progress=progress, lexical=lexical) as loader:
        dataset = load_corpus(args.data, args.config, revision=args.revision,
                              allow_empty=args.lenient, corpus_store=args.corpus_store,
                              corpus_cache=args.corpus_cache)
        if lexical:
            retriever = build_retriever("bm25", k1=args.k1, b=args.b, progress=False)
            retriever.keep_index = True  # one index for every chunk
        else:
            hybrid = None if args.hybrid is None else HybridOptions(
                fusion=args.fusion, rrf_k=args.rrf_k, alpha=args.alpha)
            retriever = build_retriever(loader(), batch_size=args.batch_size,
                                        progress=progress, hybrid=hybrid, k1=args.k1, b=args.b,
                                        search=search_options(args))
            if hybrid is not None:
                retriever.sparse.keep_index = True
                retriever.sparse.k1, retriever.sparse.b = args.k1, args.b  # checked flags
        sampled, counts = SamplingCounts(), LabelCounts()
        queries = iter_pseudo_queries(dataset.corpus, count=args.queries,
                                      per_passage=args.per_passage, span=args.span,
                                      choice=args.choice, min_words=args.min_words,
                                      seed=args.seed, counts=sampled)
        total = args.queries or len(dataset.corpus) * args.per_passage
        with tqdm(total=total, desc="pseudo-queries", unit="query",
                  disable=not progress) as bar:
            rows = label_pseudo_queries(retriever, dataset, queries, settings, counts,
                                        with_title=not args.no_title, chunk=args.chunk,
                                        done=bar.update)
            written = write_pseudo_queries(args.output, rows, dataset=dataset,
                                           teacher=retriever.name, settings=settings,
                                           sampling=sampling)
    terminal.console.print(summary_table(sampled, counts, settings, retriever.name))
    terminal.console.print(f"{written:,} rows written to {args.output}", highlight=False)
    return 0


COMMANDS = {"pseudo": cmd_pseudo}
