"""The ``tapt`` command line: thin wrappers that parse, call the library and print."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from rich.markup import escape

from tapt.cli_options import (
    check_folder,
    check_outputs,
    fraction,
    margin_or_none,
    non_negative_float,
    non_negative_int,
    open_fraction,
    positive_int,
    relevant_from,
    seed,
)
from tapt.data.beir import SPLITS, DataError
from tapt.encoders.precision import DTYPE_NAMES
from tapt.encoders.presets import registered_families
from tapt.redaction import RedactingConsole

console = RedactingConsole()  # every printed line is redacted (tapt.redaction)
logger = logging.getLogger("tapt")


def _family_help() -> str:
    """``--family``'s help: the families registered when the parser is built."""
    return (f"preset: {', '.join(registered_families())} (tapt.register_family adds one), "
            "or auto (default: the preset a tapt export records, else from the model name)")



def _add_relevance_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--relevant-from", type=relevant_from, default="auto",
                        metavar="auto|N",
                        help="lowest grade that counts as relevant (binary metrics, training "
                             "anchors): auto (default) is 3 when the qrels hold a grade >= 3 "
                             "(FormBench: 3 anchor, 2 hard, 1 soft negative), else 1 (BEIR: "
                             "grade >= 1 relevant)")


def _add_data_args(parser: argparse.ArgumentParser, split_default: str = "test") -> None:
    parser.add_argument("--data", required=True,
                        help="local BEIR folder, or a Hub dataset id such as vinven7/FormBench")
    parser.add_argument("--config", default=None,
                        help="Hub config or subfolder: structured (C1), random (C0), sample")
    parser.add_argument("--revision", default=None, help="Hub dataset revision (tag/commit)")
    parser.add_argument("--split", default=split_default, choices=SPLITS)
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty passages and queries without a relevant passage "
                             "(public BEIR sets such as Cranfield); FormBench passes the "
                             "strict checks")
    _add_relevance_arg(parser)
    parser.add_argument("--no-title", action="store_true",
                        help="encode passages without their title (default: title + ' ' + text)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--distractors", type=non_negative_int, default=None,
                       help="sub-corpus: every judged passage of the split plus N distractors")
    group.add_argument("--fraction", type=fraction, default=None,
                       help="sub-corpus: judged passages plus this fraction of distractors")
    parser.add_argument("--seed", type=seed, default=0, help="seed of the sub-corpus sample")
    parser.add_argument("--top-k", type=positive_int, default=100,
                        help="passages retrieved per query (recall@100 needs at least 100)")
    parser.add_argument("--output", type=Path, default=None, help="write metrics as JSON")
    parser.add_argument("--run", type=Path, default=None, help="write the TREC run file")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing --output/--run files")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tapt", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser("data", help="validate, describe or generate BEIR datasets")
    data_commands = data.add_subparsers(dest="data_command", required=True)
    validate = data_commands.add_parser("validate", help="check a BEIR folder")
    validate.add_argument("folder", type=Path)
    validate.add_argument("--splits", nargs="+", default=list(SPLITS))
    validate.add_argument("--lenient", action="store_true",
                          help="accept empty passages and queries without an anchor")
    _add_relevance_arg(validate)
    stats = data_commands.add_parser("stats", help="counts per split and tier, passage lengths")
    stats.add_argument("folder", type=Path)
    stats.add_argument("--splits", nargs="+", default=list(SPLITS))
    stats.add_argument("--lenient", action="store_true",
                       help="accept empty passages and queries without an anchor")
    _add_relevance_arg(stats)
    stats.add_argument("--tokenizer", default=None,
                       help="model whose tokenizer counts tokens (default: whitespace words)")
    synth = data_commands.add_parser("synth", help="generate a FormBench-like BEIR dataset")
    synth.add_argument("out", type=Path)
    synth.add_argument("--queries", type=positive_int, default=600)
    synth.add_argument("--distractors", type=non_negative_int, default=2000)
    synth.add_argument("--variant", choices=("random", "structured"), default="structured")
    synth.add_argument("--seed", type=seed, default=0)

    evaluate = commands.add_parser("eval", help="exact FAISS retrieval evaluation of a model")
    evaluate.add_argument("--model", required=True,
                          help="Hub id, local path, package:NAME/sub/path, or an API model: "
                               "openai:MODEL, voyage:MODEL")
    evaluate.add_argument("--family", default="auto", help=_family_help())
    evaluate.add_argument("--max-seq-length", type=positive_int, default=None)
    evaluate.add_argument("--batch-size", type=positive_int, default=32)
    evaluate.add_argument("--truncate-dim", type=positive_int, default=None,
                          help="evaluate the first N embedding dimensions (Matryoshka)")
    evaluate.add_argument("--trust-remote-code", action="store_true",
                          help="allow the model's own code from the Hub (off by default)")
    evaluate.add_argument("--device", default=None)
    evaluate.add_argument("--dtype", choices=DTYPE_NAMES, default="auto",
                          help="load and encode in this precision; auto: bfloat16 on a CUDA "
                               "GPU that supports it, float32 elsewhere")
    evaluate.add_argument("--max-tokens-per-batch", type=positive_int, default=None,
                          help="padded tokens per encoding batch (default: batch size x "
                               "maximum sequence length)")
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
    _add_data_args(evaluate)

    bm25 = commands.add_parser("bm25", help="BM25 baseline (bm25s) with the same metrics")
    bm25.add_argument("--k1", type=non_negative_float, default=1.5,
                      help="term-frequency saturation (default 1.5; 0: term presence only)")
    bm25.add_argument("--b", type=fraction, default=0.75,
                      help="length normalisation in [0, 1] (default 0.75)")
    _add_data_args(bm25)
    train = commands.add_parser("train", help="TAPT: train on a recipe, keep the best dev "
                                              "checkpoint, export it")
    train.add_argument("recipe", type=Path)
    train.add_argument("overrides", nargs="*", metavar="key=value",
                       help="dotted overrides, e.g. training.learning_rate=1e-5")
    train.add_argument("--test", action="store_true",
                       help="evaluate zero-shot and trained models on the test split")
    train.add_argument("--overwrite", action="store_true",
                       help="output_dir holds another or a finished run: move it aside "
                            "(OUTPUT.old-TIMESTAMP) and start anew; nothing is deleted")

    dapt = commands.add_parser("dapt", help="DAPT: continued pretraining (mlm or simcse) on "
                                            "corpus passages, exported for tapt train")
    dapt.add_argument("recipe", type=Path)
    dapt.add_argument("overrides", nargs="*", metavar="key=value",
                      help="dotted overrides, e.g. objective.name=simcse")
    dapt.add_argument("--overwrite", action="store_true",
                      help="move a folder holding another or a finished run aside")

    push = commands.add_parser("push", help="publish an export to the HuggingFace Hub (token "
                                            "from HF_TOKEN or `hf auth login`)")
    push.add_argument("folder", type=Path, help="a tapt export, e.g. runs/NAME/final")
    push.add_argument("--repo-id", required=True, help="ORG/NAME, created if missing")
    push.add_argument("--private", action="store_const", const=True, default=None,
                      help="create the repository private (default: the Hub's default)")
    push.add_argument("--revision", default=None,
                      help="branch to push to, created if missing (default: main)")
    push.add_argument("--commit-message", default=None)
    push.add_argument("--license", default="apache-2.0",
                      help="license the model card must declare (default: apache-2.0)")
    push.add_argument("--trust-remote-code", action="store_const", const=True, default=None,
                      help="let the load check run the model's own code (default: as the "
                           "export's tapt_preset.json records)")
    push.add_argument("--dry-run", action="store_true",
                      help="check, list the files and print the card; no network call")
    _add_merge_parser(commands)

    mine = commands.add_parser("mine", help="mine hard negatives from the corpus with BM25 "
                                            "or a model (a teacher), for data.mined_negatives")
    mine.add_argument("--data", required=True, help="local BEIR folder or Hub dataset id")
    mine.add_argument("--config", default=None)
    mine.add_argument("--revision", default=None)
    mine.add_argument("--split", default="train", choices=SPLITS)
    mine.add_argument("--lenient", action="store_true")
    _add_relevance_arg(mine)
    mine.add_argument("--no-title", action="store_true")
    mine.add_argument("--retriever", required=True,
                      help="bm25, or a model: Hub id, path (e.g. runs/x/final), package:..., "
                           "openai:MODEL / voyage:MODEL")
    mine.add_argument("--output", type=Path, required=True, help="mined negatives (JSONL)")
    mine.add_argument("--overwrite", action="store_true")
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
    mine.add_argument("--seed", type=seed, default=0)
    mine.add_argument("--family", default="auto", help=_family_help())
    mine.add_argument("--max-seq-length", type=positive_int, default=None)
    mine.add_argument("--batch-size", type=positive_int, default=32)
    mine.add_argument("--max-tokens-per-batch", type=positive_int, default=None)
    mine.add_argument("--dtype", choices=DTYPE_NAMES, default="auto")
    mine.add_argument("--trust-remote-code", action="store_true")
    mine.add_argument("--quiet", action="store_true")

    _add_analysis_parsers(commands)

    check = commands.add_parser("validate", help="check recipes without loading models")
    check.add_argument("recipes", type=Path, nargs="+")
    return parser


def _check_outputs(args: argparse.Namespace) -> None:
    """tapt eval / bm25: --output and --run can be written (before anything loads)."""
    check_outputs([("--output", args.output), ("--run", args.run)], overwrite=args.overwrite)


def _run_retrieval(args: argparse.Namespace, make_retriever) -> int:
    from tapt.data.sources import load_data
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.retrieval.evaluate import evaluate, metrics_table, timings_table

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
    console.print(metrics_table({retriever.name: report.metrics},
                                title=f"{args.split} metrics ({len(corpus_ids):,} passages, "
                                      f"{report.info['num_queries']:,} queries)"))
    console.print(timings_table(report.timings))
    if "api" in report.info:
        api = report.info["api"]
        cost = "unknown price" if api["cost_usd"] is None else f"${api['cost_usd']:.4f}"
        console.print(f"{api['provider']}:{api['model']}: {api['tokens']:,} tokens billed "
                      f"({cost}) in {api['requests']:,} requests, {api['retries']} retries; "
                      f"{api['cache_hits']:,} of {api['texts']:,} texts from the cache",
                      highlight=False)
    if args.output:
        report.write_json(args.output)
        console.print(f"metrics written to {args.output}")
    if args.run:
        report.write_trec_run(args.run, tag=Path(retriever.name).name or "tapt")
        console.print(f"run written to {args.run}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
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
                spec, show_progress=not args.quiet,
                max_tokens_per_batch=args.max_tokens_per_batch)
            if args.truncate_dim:
                encoder = TruncatedEncoder(encoder, args.truncate_dim)
        dense = DenseRetriever(encoder, batch_size=args.batch_size, top_k=depth,
                               progress=not args.quiet)
        if not args.hybrid:
            return dense
        from tapt.encoders.bm25 import BM25Retriever
        from tapt.retrieval.hybrid import HybridRetriever

        return HybridRetriever(dense, BM25Retriever(top_k=depth, progress=not args.quiet),
                               fusion=args.fusion, rrf_k=args.rrf_k, alpha=args.alpha,
                               top_k=args.top_k)
    try:
        return _run_retrieval(args, make)
    except APIError as err:
        console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False, soft_wrap=True)
        return 1
    finally:
        if api_encoder is not None:
            api_encoder.close()


def cmd_bm25(args: argparse.Namespace) -> int:
    from tapt.encoders.bm25 import BM25Retriever

    return _run_retrieval(args, lambda: BM25Retriever(top_k=args.top_k, k1=args.k1, b=args.b,
                                                      progress=not args.quiet))


def cmd_data(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.data.beir import load_beir_folder

    if args.data_command == "synth":
        from tapt.data.synth import synthesize

        check_folder("OUT", args.out)
        summary = synthesize(args.out, queries=args.queries, distractors=args.distractors,
                             variant=args.variant, seed=args.seed)
        table = Table(title=f"wrote {args.out} ({summary.variant}, seed {summary.seed})")
        table.add_column("what")
        table.add_column("value", justify="right")
        for label, counts in (("queries per split", summary.queries_per_split),
                              ("queries per mode", summary.queries_per_mode),
                              ("passages per kind", summary.passages_per_kind)):
            table.add_row(label, ", ".join(f"{k} {v:,}" for k, v in counts.items()))
        table.add_row("corpus size", f"{summary.corpus_size:,}")
        table.add_row("mean Jaccard: hard / soft negative",
                      f"{summary.mean_hard_jaccard:.3f} / {summary.mean_soft_jaccard:.3f}")
        table.add_row("hard negatives reusing a chemical in another role",
                      f"{summary.role_swap_share:.1%}")
        console.print(table)
        return 0
    dataset = load_beir_folder(args.folder, args.splits, require_anchor=not args.lenient,
                               allow_empty=args.lenient, relevant_from=args.relevant_from)
    if args.data_command == "validate":
        console.print(f"[green]ok[/green] {args.folder}: {len(dataset.corpus):,} passages, "
                      f"{len(dataset.queries):,} queries, splits "
                      + ", ".join(f"{s} ({len(q):,})" for s, q in dataset.qrels.items())
                      + f"; relevance rule {dataset.rule.describe()}")
        return 0
    from tapt.data.stats import (
        length_percentiles,
        tier_counts,
        tokenizer_counter,
        whitespace_counter,
    )

    counts = tier_counts(dataset)
    columns = sorted({key for row in counts.values() for key in row}, key=_column_order)
    table = Table(title=f"{args.folder}: judgments per split and tier")
    table.add_column("split")
    for column in columns:
        table.add_column(column, justify="right")
    for split, row in counts.items():
        table.add_row(split, *(f"{row.get(column, 0):,}" for column in columns))
    console.print(table)
    if args.tokenizer:
        from transformers import AutoTokenizer

        from tapt.encoders.loading import resolve_model_path

        counter, unit = tokenizer_counter(AutoTokenizer.from_pretrained(
            resolve_model_path(args.tokenizer))), f"tokens ({args.tokenizer})"
    else:
        counter, unit = whitespace_counter, "whitespace words"
    texts = [passage.as_text() for passage in dataset.corpus.values()]
    lengths = length_percentiles(texts, counter)
    table = Table(title=f"passage length in {unit}, {len(texts):,} passages")
    for key in lengths:
        table.add_column(key, justify="right")
    table.add_row(*(f"{value:,.0f}" for value in lengths.values()))
    console.print(table)
    return 0


def _column_order(name: str) -> tuple[int, str]:
    order = ["queries", "judgments", "anchor", "hard negative", "soft negative"]
    if name.startswith("relevant"):  # the BEIR rule's "relevant (grade N)"
        return (order.index("anchor"), name)
    return (order.index(name) if name in order else len(order), name)


def cmd_train(args: argparse.Namespace) -> int:
    from tapt.recipe import load_recipe
    from tapt.retrieval.evaluate import metrics_table
    from tapt.training.tapt import train

    recipe = load_recipe(args.recipe, args.overrides)
    result = train(recipe, run_test=args.test, overwrite=args.overwrite)
    if result.final_dir is None:  # not the main process
        return 0
    console.print(metrics_table(result.summary, title=f"{args.recipe.name}: TAPT results"))
    console.print(f"model exported to {result.final_dir}")
    return 0


def cmd_dapt(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.recipe import load_recipe
    from tapt.retrieval.metrics import METRIC_KEYS
    from tapt.training.dapt import dapt

    recipe = load_recipe(args.recipe, args.overrides, kind="dapt")
    result = dapt(recipe, overwrite=args.overwrite)
    if result.final_dir is None:  # not the main process
        return 0
    table = Table(title=f"{args.recipe.name}: DAPT ({recipe.objective.name}), held-out loss "
                        "and zero-shot dev retrieval at each save")
    columns = ["step", "held-out loss"] + (["perplexity"] if recipe.objective.name == "mlm"
                                           else []) + list(METRIC_KEYS)
    for column in columns:
        table.add_column(column, justify="right")
    keys = ["heldout_loss"] + (["perplexity"] if recipe.objective.name == "mlm" else []) \
        + list(METRIC_KEYS)
    for entry in result.history:
        table.add_row(str(entry["step"]), *(f"{entry[key]:.4f}" if isinstance(
            entry.get(key), float) else "-" for key in keys))
    console.print(table)
    console.print(f"model exported to {result.final_dir}; start TAPT from it with "
                  f"model.name: {result.final_dir}")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from tapt.hub import PushFailed, push_export
    from tapt.hub.report import files_table

    try:
        result = push_export(args.folder, args.repo_id, private=args.private,
                             revision=args.revision, commit_message=args.commit_message,
                             license=args.license, dry_run=args.dry_run,
                             trust_remote_code=args.trust_remote_code)
    except PushFailed as err:  # refusals (PushRefused) exit 2 through main()
        console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False, soft_wrap=True)
        return 1
    target = f"{result.url}" + (f" (branch {args.revision})" if args.revision else "")
    if not args.dry_run:
        console.print(files_table(result.plan, f"pushed to {target}"))
        console.print(f"commit: {result.commit_url}", highlight=False, soft_wrap=True)
        return 0
    console.print(files_table(result.plan, f"dry run: would push {args.folder} to {target}"))
    console.rule("README.md (model card)")
    console.out(result.plan.card, highlight=False)
    console.rule()
    console.print("dry run: nothing was uploaded", highlight=False)
    return 0


def _add_merge_parser(commands) -> None:
    from tapt.retrieval.metrics import METRIC_KEYS

    merge = commands.add_parser(
        "merge", help="average the weights of models of one architecture into a new export "
                      "(e.g. a fine-tuned model with its base, against forgetting)")
    merge.add_argument("models", nargs="+", metavar="MODEL",
                       help="two or more: Hub id, folder (e.g. runs/x/final) or "
                            "package:NAME/sub/path; tokenizer, pooling and prompts are the "
                            "first one's")
    merge.add_argument("--output", type=Path, required=True,
                       help="folder of the merged model (must not exist)")
    merge.add_argument("--weights", type=fraction, nargs="+", default=None, metavar="W",
                       help="one weight per model, in order, summing to 1 (default: equal)")
    merge.add_argument("--overwrite", action="store_true",
                       help="replace --output when it is a tapt export")
    merge.add_argument("--family", default="auto", help=_family_help())
    merge.add_argument("--trust-remote-code", action="store_true",
                       help="allow the models' own code from the Hub (off by default)")
    merge.add_argument("--export-dtype", choices=("float32", "bfloat16", "float16"),
                       default="float32", help="dtype of the saved weights (default float32)")
    pick = merge.add_argument_group(
        "picking the weight on dev (two models: put the fine-tuned one first)")
    pick.add_argument("--pick-on-dev", default=None, metavar="DATA",
                      help="BEIR folder or Hub dataset id: evaluate each --grid weight on its "
                           "dev split as tapt eval does and keep the best")
    pick.add_argument("--grid", type=fraction, nargs="+", default=None, metavar="W",
                      help="weights of the first model to try (the second gets 1 - W; "
                           "default: 0 0.25 0.5 0.75 1)")
    pick.add_argument("--metric", choices=METRIC_KEYS, default="binary_ndcg@10",
                      help="dev metric that picks (ties: the larger weight on the first model)")
    pick.add_argument("--config", default=None, help="Hub config or subfolder")
    pick.add_argument("--revision", default=None, help="Hub dataset revision")
    pick.add_argument("--lenient", action="store_true",
                      help="accept empty passages and queries without a relevant passage")
    _add_relevance_arg(pick)
    pick.add_argument("--no-title", action="store_true", help="encode passages without title")
    group = pick.add_mutually_exclusive_group()
    group.add_argument("--distractors", type=non_negative_int, default=None,
                       help="dev sub-corpus: every judged passage plus N distractors")
    group.add_argument("--fraction", type=fraction, default=None,
                       help="dev sub-corpus: judged passages plus this fraction of distractors")
    pick.add_argument("--seed", type=seed, default=0, help="seed of the sub-corpus sample")
    pick.add_argument("--batch-size", type=positive_int, default=32)
    pick.add_argument("--max-tokens-per-batch", type=positive_int, default=None)
    pick.add_argument("--dtype", choices=DTYPE_NAMES, default="auto",
                      help="encoding precision (auto: bfloat16 on a CUDA GPU, else float32)")
    pick.add_argument("--device", default=None)
    pick.add_argument("--quiet", action="store_true", help="no progress bars")


def cmd_merge(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.retrieval.metrics import METRIC_KEYS
    from tapt.training.merge import DEFAULT_GRID, DevSettings, MergeError, check_request, merge
    from tapt.training.merge_export import check_merge_output

    if args.grid is not None and args.pick_on_dev is None:
        raise MergeError("--grid needs --pick-on-dev")
    grid = (args.grid or list(DEFAULT_GRID)) if args.pick_on_dev else None
    check_request(len(args.models), args.weights, grid)
    check_merge_output(args.output, args.models, overwrite=args.overwrite)
    check_folder("--output", args.output.parent, shown=args.output)
    dev = None
    if args.pick_on_dev:
        from tapt.data.sources import load_data
        from tapt.data.subcorpus import subcorpus_ids

        dataset = load_data(args.pick_on_dev, args.config, ["dev"], revision=args.revision,
                            require_anchor=not args.lenient, allow_empty=args.lenient,
                            relevant_from=args.relevant_from)
        dev = DevSettings(dataset, grid=grid, metric=args.metric,
                          corpus_ids=subcorpus_ids(dataset, "dev", distractors=args.distractors,
                                                   fraction=args.fraction, seed=args.seed),
                          with_title=not args.no_title, batch_size=args.batch_size,
                          max_tokens_per_batch=args.max_tokens_per_batch, dtype=args.dtype,
                          device=args.device, progress=not args.quiet)
    result = merge(args.models, args.output, weights=args.weights, dev=dev, family=args.family,
                   trust_remote_code=args.trust_remote_code, overwrite=args.overwrite,
                   export_dtype=args.export_dtype)
    if result.selection is not None:
        selection = result.selection
        table = Table(title=f"dev metrics by weight of {args.models[0]} ({args.models[1]} gets "
                            f"1 - w); picked on {selection.metric}")
        table.add_column("weight", justify="right")
        for key in METRIC_KEYS:
            table.add_column(key, justify="right")
        table.add_column("")
        for point in selection.points:
            table.add_row(f"{point.weight:g}", *(f"{point.metrics[k]:.4f}" for k in METRIC_KEYS),
                          "picked" if point.weight == selection.picked else "")
        console.print(table)
    shown = ", ".join(f"{weight:g}" for weight in result.weights)
    console.print(f"merged model (weights {shown}) written to {result.output}", highlight=False,
                  soft_wrap=True)
    return 0


def cmd_mine(args: argparse.Namespace) -> int:
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
        from tapt.encoders.bm25 import BM25Retriever

        retriever = BM25Retriever(top_k=args.depth, progress=not args.quiet)
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
                spec, show_progress=not args.quiet,
                max_tokens_per_batch=args.max_tokens_per_batch)
        retriever = DenseRetriever(encoder, batch_size=args.batch_size, top_k=args.depth,
                                   progress=not args.quiet)
    records, summary = mine(retriever, dataset, args.split, settings,
                            with_title=not args.no_title)
    write_mined(args.output, records, retriever=retriever.name, settings=settings,
                data=dataset.source, split=args.split)
    console.print(summary_table(summary, settings,
                                f"mined {args.split} negatives with {retriever.name}"))
    console.print(f"written to {args.output}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from tapt.recipe import DaptRecipe, RecipeError, load_recipe
    from tapt.training.tapt import check_recipe

    failed = 0
    for path in args.recipes:
        try:
            recipe = load_recipe(path, kind="auto")
            if not isinstance(recipe, DaptRecipe):
                check_recipe(recipe)
            console.print(f"[green]ok[/green] {path}")
        except RecipeError as err:
            console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False)
            failed += 1
    return 2 if failed else 0


def _add_model_options(parser: argparse.ArgumentParser, *, several: bool,
                       bm25: bool = False) -> None:
    parser.add_argument("--model", required=True, action="append" if several else "store",
                        metavar="[NAME=]MODEL",
                        help="Hub id, local path, package:NAME/sub/path or openai:/voyage:"
                             "MODEL, optionally labelled NAME=MODEL"
                             + (" (repeat for several)" if several else "")
                             + ("; bm25 for the lexical baseline" if bm25 else ""))
    parser.add_argument("--family", default="auto", help=_family_help())
    parser.add_argument("--max-seq-length", type=positive_int, default=None)
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--max-tokens-per-batch", type=positive_int, default=None)
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="auto")
    parser.add_argument("--trust-remote-code", action="store_true")
    parser.add_argument("--device", default=None)


def _add_analysis_data(parser: argparse.ArgumentParser, *, split: bool = True,
                       output: str = "results.json") -> None:
    parser.add_argument("--data", required=True,
                        help="local BEIR folder, or a Hub dataset id such as vinven7/FormBench")
    parser.add_argument("--config", default=None,
                        help="Hub config or subfolder: structured (C1), random (C0), sample")
    parser.add_argument("--revision", default=None, help="Hub dataset revision (tag/commit)")
    if split:
        parser.add_argument("--split", default="test", choices=SPLITS)
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty passages and queries without an anchor")
    parser.add_argument("--no-title", action="store_true",
                        help="encode passages without their title")
    parser.add_argument("--seed", type=seed, default=0, help="seed of every sample")
    _add_analysis_outputs(parser, required=True, example=output)
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_analysis_outputs(parser: argparse.ArgumentParser, *, required: bool,
                          example: str) -> None:
    parser.add_argument("--output", type=Path, required=required, metavar=example.upper(),
                        help=f"write the results as JSON (e.g. {example})")
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG path (default: --output with .png)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing --output/--plot files")


def _add_analysis_parsers(commands) -> None:
    from tapt.analysis.ablation import DEFAULT_FRACTIONS
    from tapt.retrieval.metrics import METRIC_KEYS

    compare = commands.add_parser(
        "compare", help="systems x corpora (C0, C1) x metrics from tapt eval/bm25 result "
                        "files, C1/C0 retention, latency-vs-nDCG@10 frontier")
    compare.add_argument("results", nargs="+", metavar="RESULT.json|NAME=RESULT.json")
    compare.add_argument("--kind", action="append", default=[], metavar="NAME=KIND",
                         help="mark a system as bm25, base, dapt, tapt, hybrid or api "
                              "(default: inferred from the result file)")
    compare.add_argument("--corpus", action="append", default=[], metavar="DATA=LABEL",
                         help="label a result's data (its evaluated.data or folder name) "
                              "(default: C1 for structured, C0 for random, else the folder)")
    compare.add_argument("--metric", choices=METRIC_KEYS, default="binary_ndcg@10",
                         help="metric of the retention column, the frontier plot and the "
                              "tests against --baseline")
    compare.add_argument("--latency", choices=("search", "query"), default="search",
                         help="search: FAISS search per query (the paper's frontier); "
                              "query: query encoding + search")
    compare.add_argument("--markdown", type=Path, default=None,
                         help="also write the table as Markdown")
    compare.add_argument("--baseline", default=None, metavar="NAME",
                         help="test every system against this one on per-query values: "
                              "mean difference, 95%% bootstrap CI, paired randomization "
                              "test p, Holm-corrected across systems")
    compare.add_argument("--resamples", type=positive_int, default=10_000,
                         help="bootstrap and randomization resamples (default 10000)")
    compare.add_argument("--seed", type=seed, default=0,
                         help="seed of the resamplings (default 0)")
    _add_analysis_outputs(compare, required=False, example="compare.json")

    ablate = commands.add_parser("ablate", help="ablations: corpus-size")
    ablations = ablate.add_subparsers(dest="ablation", required=True)
    size = ablations.add_parser(
        "corpus-size", help="metrics at distractor fractions; every judged passage kept, "
                            "each model's corpus encoded once")
    _add_model_options(size, several=True, bm25=True)
    size.add_argument("--fractions", type=fraction, nargs="+", default=list(DEFAULT_FRACTIONS),
                      help="distractor fractions (default: %(default)s)")
    size.add_argument("--top-k", type=positive_int, default=100)
    _add_analysis_data(size, output="ablation.json")

    analyze = commands.add_parser("analyze", help="embedding analyses: geometry")
    analyses = analyze.add_subparsers(dest="analysis", required=True)
    geometry = analyses.add_parser(
        "geometry", help="cosine tiers (anchor, hard, soft, random), Delta, anchor rank-1 "
                         "rate, similarity band, anisotropy")
    _add_model_options(geometry, several=False)
    group = geometry.add_mutually_exclusive_group()
    group.add_argument("--distractors", type=non_negative_int, default=None,
                       help="corpus: every judged passage plus N distractors (default 1000)")
    group.add_argument("--fraction", type=fraction, default=None,
                       help="corpus: every judged passage plus this fraction of distractors")
    geometry.add_argument("--random-per-query", type=positive_int, default=100,
                          help="random distractors compared with each query (default 100)")
    geometry.add_argument("--pairs", type=positive_int, default=2000,
                          help="random passage pairs for the anisotropy (default 2000)")
    _add_analysis_data(geometry, output="geometry.json")

    probe = commands.add_parser(
        "probe", help="classification (logistic regression) and clustering (k-means) on "
                      "frozen passage embeddings, per label field of the corpus")
    _add_model_options(probe, several=True)
    probe.add_argument("--label", action="append", default=None, metavar="FIELD",
                       help="label field of corpus.jsonl (default: domain and class, as tapt "
                            "data synth writes them)")
    probe.add_argument("--test-size", type=open_fraction, default=0.3,
                       help="held-out share of the classification split (default 0.3)")
    probe.add_argument("--max-passages", type=positive_int, default=None,
                       help="probe a seeded sample of this many labelled passages")
    _add_analysis_data(probe, split=False, output="probes.json")

    report = commands.add_parser(
        "report", help="Markdown report of a tapt train run: dev curve with zero-shot and "
                       "BM25 references, best checkpoint, test metrics, plots")
    report.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    reference = report.add_mutually_exclusive_group()
    reference.add_argument("--bm25", type=Path, default=None, metavar="RESULT.json",
                           help="BM25 reference from a tapt bm25 --output file (default: "
                                "computed on the run's dev sub-corpus)")
    reference.add_argument("--no-bm25", action="store_true", help="no BM25 reference")
    report.add_argument("--plot", type=Path, action="append", default=[],
                        help="a PNG to link (repeat); PNGs in the run folder are found")
    report.add_argument("--output", type=Path, default=None,
                        help="Markdown file (default: RUN_DIR/report.md)")


def _analysis_files(args: argparse.Namespace) -> tuple[Path | None, Path | None]:
    """``--output`` and the PNG path, checked writable; existing files are refused without
    ``--overwrite``."""
    output = args.output
    plot = args.plot or (output.with_suffix(".png") if output is not None else None)
    check_outputs([("--output", output), ("--plot", plot),
                   ("--markdown", getattr(args, "markdown", None))], overwrite=args.overwrite)
    return output, plot


def _write_json(path: Path, data: dict) -> None:
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def _analysis_data(args: argparse.Namespace, splits: list[str]):
    from tapt.data.sources import load_data

    return load_data(args.data, args.config, splits, revision=args.revision,
                     require_anchor=not args.lenient, allow_empty=args.lenient)


def _model_options(args: argparse.Namespace):
    from tapt.analysis.embed import ModelOptions

    return ModelOptions(family=args.family, max_seq_length=args.max_seq_length,
                        trust_remote_code=args.trust_remote_code, device=args.device,
                        dtype=args.dtype, max_tokens_per_batch=args.max_tokens_per_batch,
                        batch_size=args.batch_size, progress=not args.quiet)


def cmd_compare(args: argparse.Namespace) -> int:
    from tapt.analysis import plots
    from tapt.analysis.compare import (
        compare_results,
        comparison_table,
        frontier_figure,
        markdown_table,
        parse_assignments,
    )

    output, plot = _analysis_files(args)
    comparison = compare_results(args.results, kinds=parse_assignments(args.kind, "--kind"),
                                 corpus_labels=parse_assignments(args.corpus, "--corpus"),
                                 latency=args.latency, baseline=args.baseline,
                                 test_metric=args.metric, n_resamples=args.resamples,
                                 seed=args.seed)
    console.print(comparison_table(comparison, args.metric))
    if output is not None:
        _write_json(output, comparison.to_dict(args.metric))
        console.print(f"comparison written to {output}")
    if plot is not None:
        plots.save(frontier_figure(comparison, args.metric), plot)
        console.print(f"frontier plot written to {plot}")
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(markdown_table(comparison, args.metric), encoding="utf-8")
        console.print(f"Markdown table written to {args.markdown}")
    return 0


def _named_models(values: list[str]) -> dict[str, str]:
    """``--model [NAME=]MODEL`` values as {name: model}; names must differ."""
    from tapt.analysis.embed import labelled

    models = dict(map(labelled, values))
    if len(models) != len(values):
        raise ValueError(f"--model names must differ: {values}")
    return models


def _show_and_save(table, data: dict, output: Path, figure, plot: Path, what: str) -> None:
    """Print an analysis table, write its JSON and its figure, say where."""
    from tapt.analysis import plots

    console.print(table)
    _write_json(output, data)
    plots.save(figure, plot)
    console.print(f"{what} written to {output}, plot to {plot}")


def cmd_ablate(args: argparse.Namespace) -> int:
    from functools import partial

    from tapt.analysis.ablation import ablation_figure, ablation_table, corpus_size_ablation
    from tapt.analysis.embed import load_model

    output, plot = _analysis_files(args)
    models = _named_models(args.model)
    options = _model_options(args)
    dataset = _analysis_data(args, [args.split])
    result = corpus_size_ablation(
        [partial(load_model, model, options, top_k=args.top_k) for model in models.values()],
        dataset, args.split, fractions=args.fractions, seed=args.seed,
        batch_size=args.batch_size, top_k=args.top_k, with_title=not args.no_title,
        names=list(models), on_model=lambda name: console.print(f"[bold]{name}[/bold]"))
    _show_and_save(ablation_table(result), result.to_dict(), output,
                   ablation_figure(result), plot, "ablation")
    return 0


def cmd_analyze(args: argparse.Namespace) -> int:
    from tapt.analysis.embed import labelled, load_encoder
    from tapt.analysis.geometry import analyze_geometry, geometry_figure, geometry_table

    output, plot = _analysis_files(args)
    dataset = _analysis_data(args, [args.split])
    name, model = labelled(args.model)
    encoder = load_encoder(model, _model_options(args))
    distractors = None if args.fraction is not None else (
        1000 if args.distractors is None else args.distractors)
    geometry = analyze_geometry(encoder, dataset, args.split, distractors=distractors,
                                fraction=args.fraction, seed=args.seed,
                                random_per_query=args.random_per_query, pairs=args.pairs,
                                batch_size=args.batch_size, with_title=not args.no_title,
                                name=name)
    _show_and_save(geometry_table(geometry), geometry.to_dict(), output,
                   geometry_figure(geometry), plot, "geometry")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from functools import partial

    from tapt.analysis.embed import load_encoder
    from tapt.analysis.probes import probe_figure, probe_table, read_labels, run_probes
    from tapt.data.sources import config_name

    output, plot = _analysis_files(args)
    models = _named_models(args.model)
    dataset = _analysis_data(args, [])
    folder = Path(args.data)
    config = config_name(args.config)
    if config and (folder / config).is_dir():
        folder = folder / config
    labels = read_labels(folder, args.label or ["domain", "class"])
    options = _model_options(args)
    result = run_probes({name: partial(load_encoder, model, options)
                         for name, model in models.items()},
                        dataset, labels, test_size=args.test_size, seed=args.seed,
                        max_passages=args.max_passages, batch_size=args.batch_size,
                        with_title=not args.no_title,
                        on_model=lambda name: console.print(f"[bold]{name}[/bold]"))
    _show_and_save(probe_table(result), result.to_dict(), output, probe_figure(result), plot,
                   "probes")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tapt.analysis.report import build_report, history_table, write_report

    output = args.output or args.run_dir / "report.md"
    check_outputs([("--output", output)])  # replaced, as are the curve and data beside it
    bm25 = None if args.no_bm25 else (args.bm25 or "compute")
    report = build_report(args.run_dir, bm25=bm25, plots=args.plot)
    console.print(history_table(report))
    markdown, curve, data = write_report(report, output)
    console.print(f"report written to {markdown} (dev curve {curve}, data {data})")
    return 0


COMMANDS = {"data": cmd_data, "eval": cmd_eval, "bm25": cmd_bm25, "train": cmd_train,
            "dapt": cmd_dapt, "mine": cmd_mine,
            "push": cmd_push, "merge": cmd_merge, "validate": cmd_validate,
            "compare": cmd_compare, "ablate": cmd_ablate, "analyze": cmd_analyze,
            "probe": cmd_probe, "report": cmd_report}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # argparse stops filling the overrides at the first option; accept key=value after it.
    if extra and args.command in ("train", "dapt") and all("=" in e and not e.startswith("-")
                                                 for e in extra):
        args.overrides += extra
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    from rich.logging import RichHandler

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(message)s", handlers=[RichHandler(show_path=False, level=logging.DEBUG if args.verbose
                                                     else logging.INFO)])
    logger.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    from tapt.redaction import install_log_redaction, redact

    install_log_redaction()
    from tapt.hub.errors import PushFailed
    from tapt.training.errors import NonFiniteTrainingError

    try:
        return COMMANDS[args.command](args)
    except (DataError, OSError, ValueError) as err:
        console.print(f"[red]error:[/red] {escape(redact(str(err)))}", highlight=False,
                      soft_wrap=True)  # paths in messages stay whole for copy and paste
        return 2
    except NonFiniteTrainingError as err:
        console.print(f"[red]training stopped:[/red] {escape(redact(str(err)))}",
                      highlight=False, soft_wrap=True)
        return 3
    except PushFailed as err:  # the end-of-run push of a recipe's hub section
        console.print(f"[red]push failed:[/red] {escape(redact(str(err)))} (the export is kept; "
                      "push it again with tapt push)", highlight=False, soft_wrap=True)
        return 1
    except KeyboardInterrupt as err:  # Ctrl-C: one line, no traceback, exit 130 (128 + SIGINT)
        import shlex

        command = "tapt " + shlex.join(sys.argv[1:] if argv is None else argv)
        line = err.message(command) if hasattr(err, "message") else "interrupted"
        console.print(escape(redact(line)), highlight=False, soft_wrap=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
