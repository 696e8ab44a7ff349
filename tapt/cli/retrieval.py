"""``tapt eval`` (dense, API or hybrid retrieval), ``tapt bm25`` and ``tapt mine`` (hard
negatives). Encoders, models and search are imported inside the handlers (they pull in
torch and transformers, which a parse error or a missing file should not wait for)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from rich.markup import escape

from tapt.cli import eval_extras, terminal
from tapt.cli.distributed import multiprocess
from tapt.cli.eval_views import (
    add_by_arg,
    add_view_args,
    check_view_args,
    read_labels,
    show_views,
)
from tapt.cli.inputs import opened_encoder, read_data, search_options
from tapt.cli.number_types import bm25_k1, fraction, margin_or_none, rrf_k, seed, skip_top, top_k
from tapt.cli.options import (
    add_corpus_store_args,
    add_data_args,
    add_decontaminate_arg,
    add_encoding_args,
    add_quiet_arg,
    add_source_args,
    check_outputs,
    data_inputs,
    model_inputs,
)
from tapt.cli.serving import (
    add_backend_args,
    add_precision_args,
    check_serving_args,
    show_index,
)
from tapt.util.process_group import is_main_process

logger = logging.getLogger("tapt")


def add_parsers(commands) -> None:
    """``tapt eval``, ``tapt bm25`` and ``tapt mine``."""
    evaluate = commands.add_parser("eval", help="exact FAISS retrieval evaluation of a model")
    evaluate.add_argument("--model", required=True,
                          help="Hub id, local path, package:NAME/sub/path, or an API model: "
                               "openai:MODEL, voyage:MODEL")
    add_encoding_args(evaluate)
    hybrid = evaluate.add_argument_group("hybrid retrieval")
    hybrid.add_argument("--hybrid", choices=("bm25",), default=None,
                        help="fuse the dense ranking with BM25's (bm25s, k1 1.5, b 0.75)")
    hybrid.add_argument("--fusion", choices=("rrf", "linear", "auto"), default="rrf",
                        help="reciprocal rank fusion (default) or a weighted sum of min-max "
                             "normalised scores; auto (with --tune-on): whichever of the two, "
                             "with its k or alpha, scores best on the tuning split")
    hybrid.add_argument("--rrf-k", type=rrf_k, default=60.0,
                        help="RRF constant: score = sum 1/(k + rank) (default 60)")
    hybrid.add_argument("--alpha", type=fraction, default=0.5,
                        help="linear fusion: weight of the dense score (default 0.5)")
    hybrid.add_argument("--fusion-depth", type=top_k, default=None,
                        help="passages each system contributes per query (default: --top-k); "
                             "a passage missing from one list gets no score from it")
    add_view_args(evaluate)
    add_backend_args(evaluate)  # --backend torch|onnx|openvino
    add_precision_args(evaluate)  # --embedding-precision, --rescore
    eval_extras.add_extra_args(evaluate)
    add_data_args(evaluate)

    bm25 = commands.add_parser("bm25", help="BM25 baseline (bm25s) with the same metrics")
    bm25.add_argument("--k1", type=bm25_k1, default=1.5,
                      help="term-frequency saturation (default 1.5; 0: term presence only)")
    bm25.add_argument("--b", type=fraction, default=0.75,
                      help="length normalisation in [0, 1] (default 0.75)")
    add_by_arg(bm25)
    eval_extras.add_extra_args(bm25)
    add_data_args(bm25)

    mine = commands.add_parser("mine", help="mine hard negatives from the corpus with BM25 "
                                            "or a model (a teacher), for data.mined_negatives")
    add_source_args(mine, split="train")
    add_corpus_store_args(mine)
    mine.add_argument("--retriever", required=True,
                      help="bm25, or a model: Hub id, path (e.g. runs/x/final), package:..., "
                           "openai:MODEL / voyage:MODEL")
    mine.add_argument("--output", type=Path, required=True, help="mined negatives (JSONL)")
    mine.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    mine.add_argument("--depth", type=top_k, default=100,
                      help="ranks considered per query (default 100)")
    mine.add_argument("--skip-top", type=skip_top, default=0,
                      help="ranks 1..N are never taken (likely unlabelled positives)")
    mine.add_argument("--margin", type=margin_or_none, default=0.05,
                      help="drop candidates scoring above (1 - MARGIN) x the query's best "
                           "anchor score (default 0.05; 'none' turns it off)")
    mine.add_argument("--per-query", type=top_k, default=3, help="negatives per query")
    mine.add_argument("--sampling", choices=("random", "top"), default="random",
                      help="random among the candidates left (default), or the top ones")
    mine.add_argument("--seed", type=seed, default=0, help="seed of the random sampling")
    add_decontaminate_arg(mine, trained="--split")  # as the recipe's data.decontaminate
    add_encoding_args(mine)  # for a model --retriever
    add_backend_args(mine)  # a tapt export folder as --retriever
    add_quiet_arg(mine)
    add_score_parser(commands)


def _check_outputs(args: argparse.Namespace) -> None:
    """tapt eval / bm25: --output and --run can be written, and neither they nor
    ``--format mteb``'s --mteb-dir lands on an input (the data, the model, the --queries
    files) (before anything loads; rank 0 only under torchrun: it alone writes)."""
    if is_main_process():
        inputs = (data_inputs("--data", args.data, args.config)
                  + model_inputs("--model", getattr(args, "model", None))
                  + eval_extras.query_set_inputs(args))
        check_outputs([("--output", args.output), ("--run", args.run),
                       ("--plot", getattr(args, "plot", None))], overwrite=args.overwrite,
                      inputs=inputs)
        if getattr(args, "format", "tapt") == "mteb":
            from tapt.util.outputs import check_apart

            check_apart([("--mteb-dir", args.mteb_dir)], inputs)


def _run_retrieval(args: argparse.Namespace, make_retriever) -> int:
    from tapt.data.fingerprint import remember_digests
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.retrieval.evaluate import metrics_table

    _check_outputs(args)
    eval_extras.check_extra_args(args)  # --queries, --save-run, --format mteb
    if args.top_k < 100:
        logger.warning("--top-k %d: recall@100 only counts the top %d passages", args.top_k,
                       args.top_k)
    tune_on = getattr(args, "tune_on", None)  # tapt eval --tune-on: that split too
    dataset = read_data(args, [args.split, *([tune_on] if tune_on else [])],
                        with_train=True)  # train_overlap: seen and novel queries
    labels = read_labels(args, dataset)  # tapt eval --by: before any encoding
    remember_digests(dataset, [args.split])  # what was read, before an hour of encoding
    query_sets = eval_extras.read_query_sets(args, dataset)  # --queries: before encoding
    corpus_ids = subcorpus_ids(dataset, args.split, distractors=args.distractors,
                               fraction=args.fraction, seed=args.seed)
    retriever = make_retriever()
    info = {"distractors": args.distractors, "fraction": args.fraction, "seed": args.seed,
            "top_k": args.top_k}
    report, retriever, widths, results = eval_extras.evaluate(  # evaluate_views, or --queries
        args, retriever, dataset, corpus_ids, info, query_sets)
    if report is None:  # a rank other than 0 under torchrun: rank 0 prints and writes
        return 0
    if dataset.carved:  # --dev-from-train: which queries the carved dev split holds
        report.info["dev_carve"] = dict(dataset.carved)
    # What a hybrid retriever fused and what an API encoder cost: evaluated.hybrid / .api
    for part in (retriever, getattr(retriever, "encoder", None)):
        if callable(getattr(part, "result_info", None)):
            report.info.update(part.result_info())
    title = (f"{args.split} metrics ({len(corpus_ids):,} passages, "
             f"{report.info['num_queries']:,} queries)")
    terminal.console.print(metrics_table({retriever.name: report.metrics}, title=title))
    terminal.console.print(terminal.figures_table(report.timings))
    show_index(report.info)  # --embedding-precision: the quantised index's bytes
    show_overlap(report.sections.get("train_overlap"))  # seen / novel queries
    show_views(args, report, widths, labels)  # --dims, --by, --tune-on
    eval_extras.finish_extras(args, report, results, dataset, corpus_ids)  # --queries ...
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
    if getattr(args, "format", "tapt") == "mteb":  # last: whatever fails here, --output and --run are written
        eval_extras.write_mteb(args, report, dataset, corpus_ids)
        if args.output:  # and then they say where MTEB's file is
            report.write_json(args.output)
    return 0


def show_overlap(section: dict | None) -> None:
    """The metrics on the seen and the novel queries (``train_overlap``), when recorded."""
    if not section:
        return
    from tapt.retrieval.evaluate import metrics_table

    against = section.get("decontaminated") or []
    rows = {f"{part} ({section[part]:,} queries)": section["metrics"][part]
            for part in ("seen", "novel") if part in section["metrics"]}
    terminal.console.print(metrics_table(
        rows, label="queries",
        title=(f"{section['split']} by train overlap: seen = a relevant passage is a "
               f"{section['train_split']} positive"
               + (f" (after decontamination against {', '.join(against)})" if against else ""))))


@multiprocess
def cmd_eval(args: argparse.Namespace) -> int:
    progress = terminal.show_progress(args)
    from tapt.encoders.api import APIError
    from tapt.retrieval.retriever_factory import HybridOptions, build_retriever
    from tapt.retrieval.search import require_search

    _check_outputs(args)
    check_view_args(args)  # --dims / --by / --tune-on combinations, before the model loads
    check_serving_args(args)  # --backend / --embedding-precision / --rescore combinations
    require_search(args.search_backend, args.embedding_precision)  # faiss, before the model
    hybrid = HybridOptions(fusion=args.fusion, rrf_k=args.rrf_k, alpha=args.alpha,
                           depth=args.fusion_depth) if args.hybrid else None
    with opened_encoder(args, args.model, progress=progress) as loader:
        search = search_options(args)
        try:
            return _run_retrieval(args, lambda: build_retriever(
                loader(), top_k=args.top_k, batch_size=args.batch_size, progress=progress,
                hybrid=hybrid, search=search))
        except APIError as err:
            terminal.console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False,
                                   soft_wrap=True)
            return 1


def cmd_bm25(args: argparse.Namespace) -> int:
    from tapt.retrieval.retriever_factory import BM25, build_retriever

    return _run_retrieval(args, lambda: build_retriever(
        BM25, top_k=args.top_k, k1=args.k1, b=args.b, progress=terminal.show_progress(args)))


@multiprocess
def cmd_mine(args: argparse.Namespace) -> int:
    progress = terminal.show_progress(args)
    from tapt.retrieval.mining import MiningSettings, mine, summary_table, write_mined
    from tapt.retrieval.retriever_factory import build_retriever, is_bm25
    from tapt.retrieval.search import require_search

    if is_main_process():
        check_outputs([("--output", args.output)], overwrite=args.overwrite,
                      inputs=data_inputs("--data", args.data, args.config)
                      + model_inputs("--retriever", args.retriever))
    check_serving_args(args)  # --threads without --backend
    if not is_bm25(args.retriever):
        require_search(args.search_backend)  # faiss, before the model loads
    settings = MiningSettings(per_query=args.per_query, depth=args.depth,
                              skip_top=args.skip_top, margin=args.margin,
                              sampling=args.sampling, seed=args.seed)
    settings.check()
    with opened_encoder(args, args.retriever, progress=progress,  # e.g. openai:MODEL too
                        lexical=is_bm25(args.retriever)) as loader:
        search = search_options(args)
        dataset = read_data(args, [args.split], train_split=args.split)  # --decontaminate
        retriever = build_retriever(args.retriever if loader is None else loader(),
                                    top_k=args.depth, batch_size=args.batch_size,
                                    progress=progress, search=search)
        records, summary = mine(retriever, dataset, args.split, settings,
                                with_title=not args.no_title, exclude=dataset.held_out)
    if not is_main_process():  # under torchrun rank 0 alone writes and prints
        return 0
    from tapt.data.content import made_from

    write_mined(args.output, records, retriever=retriever.name, settings=settings,
                data=dataset.source, split=args.split, made_from=made_from(dataset, args.split))
    terminal.console.print(summary_table(summary, settings,
                                         f"mined {args.split} negatives with {retriever.name}"))
    terminal.console.print(f"written to {args.output}")
    return 0


def add_score_parser(commands) -> None:
    """``tapt score``: teacher scores of the training rows' pairs, for distillation."""
    score = commands.add_parser(
        "score", help="score every (query, passage) of the training rows with a teacher "
                      "(BM25 or a model), for loss.teacher_scores")
    add_source_args(score, split="train")
    add_corpus_store_args(score)
    score.add_argument("--teacher", required=True,
                       help="bm25, or a model: Hub id, path (e.g. runs/x/final), "
                            "package:..., openai:MODEL / voyage:MODEL")
    score.add_argument("--mined", type=Path, default=None,
                       help="a tapt mine output: score its negatives too (give the file "
                            "the recipe's data.mined_negatives names)")
    score.add_argument("--output", type=Path, required=True, help="teacher scores (JSONL)")
    score.add_argument("--overwrite", action="store_true", help="replace an existing --output")
    add_decontaminate_arg(score, trained="--split")  # as the recipe's data.decontaminate
    score.add_argument("--k1", type=bm25_k1, default=1.5,
                       help="BM25 teacher: term-frequency saturation (default 1.5)")
    score.add_argument("--b", type=fraction, default=0.75,
                       help="BM25 teacher: length normalisation in [0, 1] (default 0.75)")
    score.add_argument("--fuse-bm25", type=fraction, default=None, metavar="ALPHA",
                       help="a model --teacher fused with BM25 (--k1, --b): ALPHA x the "
                            "model's score + (1 - ALPHA) x BM25's, each min-max normalised "
                            "over the query's scored passages (as tapt eval --hybrid bm25 "
                            "--fusion linear --alpha ALPHA fuses)")
    add_encoding_args(score)  # for a model --teacher
    add_backend_args(score)  # a tapt export folder as --teacher
    add_quiet_arg(score)


@multiprocess
def cmd_score(args: argparse.Namespace) -> int:
    progress = terminal.show_progress(args)
    from tapt.retrieval.retriever_factory import build_retriever, is_bm25
    from tapt.retrieval.teacher_scores import needed_pairs, score_pairs, write_teacher_scores

    if is_main_process():
        check_outputs([("--output", args.output)], overwrite=args.overwrite,
                      inputs=[*data_inputs("--data", args.data, args.config),
                              *model_inputs("--teacher", args.teacher), ("--mined", args.mined)])
    check_serving_args(args)  # --threads without --backend
    lexical = is_bm25(args.teacher)
    if lexical and args.fuse_bm25 is not None:
        raise ValueError("--fuse-bm25 fuses a model --teacher with BM25; --teacher bm25 is "
                         "BM25 alone")
    with opened_encoder(args, args.teacher, progress=progress, lexical=lexical) as loader:
        search = search_options(args)  # a model teacher's passages go through the cache
        dataset = read_data(args, [args.split], train_split=args.split)  # --decontaminate
        mined = None
        if args.mined is not None:
            from tapt.data.mined import read_mined

            mined = read_mined(args.mined, dataset, args.split, with_title=not args.no_title)
        pairs = needed_pairs(dataset, args.split, mined)
        retriever = build_retriever(args.teacher if lexical else loader(), top_k=1,
                                    batch_size=args.batch_size, progress=progress,
                                    k1=args.k1, b=args.b, search=search)
        # BM25's scores depend on the whole corpus (IDF, lengths); a model's do not.
        scores = score_pairs(retriever, dataset, pairs, with_title=not args.no_title,
                             corpus_ids=list(dataset.corpus) if lexical else None)
        teacher = retriever.name
        if args.fuse_bm25 is not None and is_main_process():
            from tapt.retrieval.teacher_scores import fused_scores

            bm25 = build_retriever("bm25", top_k=1, k1=args.k1, b=args.b, progress=progress)
            lexical_scores = score_pairs(bm25, dataset, pairs, with_title=not args.no_title,
                                         corpus_ids=list(dataset.corpus))
            scores = fused_scores(scores, lexical_scores, args.fuse_bm25)
            teacher = f"{retriever.name}+{bm25.name}-linear-alpha{args.fuse_bm25:g}"
    if not is_main_process():  # under torchrun rank 0 alone writes and prints
        return 0
    from tapt.data.content import made_from

    write_teacher_scores(args.output, scores, teacher=teacher, data=dataset.source,
                         split=args.split, mined=None if args.mined is None else str(args.mined),
                         made_from=made_from(dataset, args.split))
    count = sum(len(row) for row in scores.values())
    terminal.console.print(f"{count:,} teacher scores ({teacher}) for {len(scores):,} "
                           f"{args.split} queries written to {args.output}", highlight=False)
    return 0


COMMANDS = {"eval": cmd_eval, "bm25": cmd_bm25, "mine": cmd_mine, "score": cmd_score}
