"""``tapt compare``, ``tapt ablate``, ``tapt analyze``, ``tapt probe`` and ``tapt report``:
tables, JSON and plots from result files or frozen embeddings. Models, matplotlib and
scikit-learn are imported inside the handlers."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from tapt.cli import maps, terminal
from tapt.cli.distributed import multiprocess
from tapt.cli.inputs import api_options, model_options, read_data, search_options
from tapt.cli.number_types import (
    fraction,
    open_fraction,
    positive_count,
    resamples,
    sample_size,
    seed,
    top_k,
)
from tapt.cli.options import (
    add_analysis_data,
    add_analysis_outputs,
    add_model_options,
    add_subcorpus_args,
    check_outputs,
    data_inputs,
    model_inputs,
)
from tapt.util.figures import save
from tapt.util.files import atomic_write_json, atomic_write_text
from tapt.util.process_group import is_main_process


def add_parsers(commands) -> None:
    """``tapt compare``, ``ablate``, ``analyze``, ``probe`` and ``report``."""
    from tapt.analysis.ablation import DEFAULT_FRACTIONS
    from tapt.analysis.pairing import ALLOWABLE
    from tapt.retrieval.metrics import METRIC_KEYS

    compare = commands.add_parser(
        "compare", help="systems x corpora (C0, C1) x metrics from tapt eval/bm25 result "
                        "files, C1/C0 retention, latency-vs-nDCG@10 frontier")
    compare.add_argument("results", nargs="+", metavar="RESULT.json|NAME=RESULT.json",
                         help="tapt eval / tapt bm25 --output files, optionally named NAME=")
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
                              "test p, Holm-corrected across systems; again on the novel "
                              "queries (no relevant passage trained on) when the result "
                              "files record train_overlap")
    compare.add_argument("--allow-different", action="append", default=[],
                         choices=ALLOWABLE, metavar="|".join(ALLOWABLE),
                         help="pair results that differ in this (repeat for several): "
                              "corpus (and sub-corpus), e.g. C0 against C1 on the same "
                              "queries and qrels; by default results of one corpus column "
                              "must share corpus, queries, qrels, split, relevance rule, "
                              "sub-corpus and top-k (tapt.analysis.pairing)")
    compare.add_argument("--resamples", type=resamples, default=10_000,
                         help="bootstrap and randomization resamples (default 10000)")
    compare.add_argument("--seed", type=seed, default=0,
                         help="seed of the resamplings (default 0)")
    add_analysis_outputs(compare, required=False, example="compare.json")

    ablate = commands.add_parser("ablate", help="ablations: corpus-size")
    ablations = ablate.add_subparsers(dest="ablation", required=True, metavar="ABLATION",
                                      help="the ablation to run")
    size = ablations.add_parser(
        "corpus-size", help="metrics at distractor fractions; every judged passage kept, "
                            "each model's corpus encoded once")
    add_model_options(size, several=True, bm25=True, one_vector=True)
    size.add_argument("--fractions", type=fraction, nargs="+", default=list(DEFAULT_FRACTIONS),
                      help="distractor fractions (default: %(default)s)")
    size.add_argument("--top-k", type=top_k, default=100,
                      help="passages retrieved per query")
    add_analysis_data(size, output="ablation.json")

    analyze = commands.add_parser("analyze", help="embedding analyses: geometry, map")
    analyses = analyze.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS",
                                      help="the analysis to run")
    geometry = analyses.add_parser(
        "geometry", help="cosine tiers (anchor, hard, soft, random), Delta, anchor rank-1 "
                         "rate, similarity band, anisotropy")
    add_model_options(geometry, several=False, one_vector=True)
    add_subcorpus_args(geometry, "corpus", seed_flag=False, distractors_default=" (default 1000)")
    geometry.add_argument("--random-per-query", type=sample_size, default=100,
                          help="random distractors compared with each query (default 100)")
    geometry.add_argument("--pairs", type=sample_size, default=2000,
                          help="random passage pairs for the anisotropy (default 2000)")
    add_analysis_data(geometry, output="geometry.json")
    maps.add_map_parser(analyses)  # tapt analyze map

    probe = commands.add_parser(
        "probe", help="classification (logistic regression) and clustering (k-means) on "
                      "frozen passage embeddings, per label field of the corpus")
    add_model_options(probe, several=True, one_vector=True)
    probe.add_argument("--label", action="append", default=None, metavar="FIELD",
                       help="label field of corpus.jsonl (default: domain and class, as tapt "
                            "data synth writes them)")
    probe.add_argument("--test-size", type=open_fraction, default=0.3,
                       help="held-out share of the classification split (default 0.3)")
    probe.add_argument("--max-passages", type=positive_count, default=None,
                       help="probe a seeded sample of this many labelled passages")
    add_analysis_data(probe, split=False, output="probes.json")

    report = commands.add_parser(
        "report", help="Markdown report of a tapt train run: dev curve with zero-shot and "
                       "BM25 references, best checkpoint, test metrics, plots")
    report.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="output_dir of a tapt train run")
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
    ``--overwrite`` (checked on rank 0 only under torchrun: it alone writes)."""
    output = args.output
    plot = args.plot or (output.with_suffix(".png") if output is not None else None)
    if is_main_process():
        check_outputs([("--output", output), ("--plot", plot),
                       ("--markdown", getattr(args, "markdown", None))],
                      overwrite=args.overwrite, inputs=_inputs(args))
    return output, plot


def _inputs(args: argparse.Namespace) -> list[tuple[str, str | Path]]:
    """What an analysis command reads: ``tapt compare``'s result files, or the data and the
    ``--model`` folders (outputs must not land on them)."""
    from tapt.analysis.result_files import split_spec

    results = [("RESULT", split_spec(spec)[1]) for spec in getattr(args, "results", [])]
    return (results + data_inputs("--data", getattr(args, "data", None),
                                  getattr(args, "config", None))
            + model_inputs("--model", getattr(args, "model", None)))



def _loaders(args: argparse.Namespace, models: dict[str, str], *, top_k: int | None = None):
    """{name: zero-argument loader} of the ``--model`` values, with the shared model and
    API options; ``top_k``: ``bm25`` is accepted (as a retriever of that depth)."""
    from tapt.analysis.embed import load_encoder, load_model

    options = model_options(args, progress=terminal.show_progress(args))
    api = api_options(args, models.values())
    if top_k is None:
        return {name: partial(load_encoder, model, options, api)
                for name, model in models.items()}
    return {name: partial(load_model, model, options, top_k=top_k, api=api)
            for name, model in models.items()}


def cmd_compare(args: argparse.Namespace) -> int:
    from tapt.analysis.compare import compare_results, parse_assignments
    from tapt.analysis.compare_render import comparison_table, frontier_figure, markdown_table

    output, plot = _analysis_files(args)
    comparison = compare_results(args.results, kinds=parse_assignments(args.kind, "--kind"),
                                 corpus_labels=parse_assignments(args.corpus, "--corpus"),
                                 latency=args.latency, baseline=args.baseline,
                                 test_metric=args.metric, n_resamples=args.resamples,
                                 seed=args.seed, allow_different=args.allow_different)
    terminal.console.print(comparison_table(comparison, args.metric))
    if output is not None:
        atomic_write_json(output, comparison.to_dict(args.metric))
        terminal.console.print(f"comparison written to {output}")
    if plot is not None:
        save(frontier_figure(comparison, args.metric), plot)
        terminal.console.print(f"frontier plot written to {plot}")
    if args.markdown is not None:
        atomic_write_text(args.markdown, markdown_table(comparison, args.metric))
        terminal.console.print(f"Markdown table written to {args.markdown}")
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
    terminal.console.print(table)
    atomic_write_json(output, data)
    save(figure, plot)
    terminal.console.print(f"{what} written to {output}, plot to {plot}")


@multiprocess
def cmd_ablate(args: argparse.Namespace) -> int:
    from tapt.analysis.ablation import ablation_figure, ablation_table, corpus_size_ablation

    output, plot = _analysis_files(args)
    loaders = _loaders(args, _named_models(args.model), top_k=args.top_k)
    cache_dir = search_options(args).cache_dir
    dataset = read_data(args, [args.split])
    result = corpus_size_ablation(
        list(loaders.values()), dataset, args.split, fractions=args.fractions, seed=args.seed,
        batch_size=args.batch_size, top_k=args.top_k, with_title=not args.no_title,
        names=list(loaders), on_model=lambda name: terminal.console.print(f"[bold]{name}[/bold]"),
        cache_dir=cache_dir)
    if not is_main_process():  # under torchrun rank 0 alone prints and writes
        return 0
    _show_and_save(ablation_table(result), result.to_dict(), output,
                   ablation_figure(result), plot, "ablation")
    return 0


@multiprocess
def cmd_analyze(args: argparse.Namespace) -> int:
    from tapt.analysis.embed import labelled, materialized
    from tapt.analysis.geometry import analyze_geometry, geometry_figure, geometry_table

    output, plot = _analysis_files(args)
    cache_dir = search_options(args).cache_dir
    if args.analysis == "map":
        return maps.run_map(args, _loaders(args, _named_models(args.model)),
                            lambda: read_data(args, []), output, plot, cache_dir,
                            main=is_main_process())
    dataset = read_data(args, [args.split])
    name, model = labelled(args.model)
    distractors = None if args.fraction is not None else (
        1000 if args.distractors is None else args.distractors)
    with materialized(_loaders(args, {name: model})[name]) as encoder:
        geometry = analyze_geometry(encoder, dataset, args.split, distractors=distractors,
                                    fraction=args.fraction, seed=args.seed,
                                    random_per_query=args.random_per_query, pairs=args.pairs,
                                    batch_size=args.batch_size, with_title=not args.no_title,
                                    name=name, cache_dir=cache_dir)
    if not is_main_process():  # under torchrun rank 0 alone prints and writes
        return 0
    _show_and_save(geometry_table(geometry), geometry.to_dict(), output,
                   geometry_figure(geometry), plot, "geometry")
    return 0


@multiprocess
def cmd_probe(args: argparse.Namespace) -> int:
    from tapt.analysis.probes import probe_figure, probe_table, read_labels, run_probes
    from tapt.data.sources import config_name

    output, plot = _analysis_files(args)
    models = _named_models(args.model)
    cache_dir = search_options(args).cache_dir
    dataset = read_data(args, [])
    folder = Path(args.data)
    config = config_name(args.config)
    if config and (folder / config).is_dir():
        folder = folder / config
    labels = read_labels(folder, args.label or ["domain", "class"])
    result = run_probes(_loaders(args, models), dataset, labels, test_size=args.test_size, seed=args.seed,
                        max_passages=args.max_passages, batch_size=args.batch_size,
                        with_title=not args.no_title, cache_dir=cache_dir,
                        on_model=lambda name: terminal.console.print(f"[bold]{name}[/bold]"))
    if not is_main_process():  # under torchrun rank 0 alone prints and writes
        return 0
    _show_and_save(probe_table(result), result.to_dict(), output, probe_figure(result), plot,
                   "probes")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from tapt.analysis.report import build_report, history_table, report_paths, write_report

    markdown, curve, data = report_paths(args.output or args.run_dir / "report.md")
    # replaced, as are the curve and data beside it; never a file of the run or its data
    check_outputs([("--output", markdown), ("--output's dev curve", curve),
                   ("--output's data file", data)], inputs=_report_inputs(args))
    bm25 = None if args.no_bm25 else (args.bm25 or "compute")
    report = build_report(args.run_dir, bm25=bm25, plots=args.plot)
    terminal.console.print(history_table(report))
    markdown, curve, data = write_report(report, markdown)
    terminal.console.print(f"report written to {markdown} (dev curve {curve}, data {data})")
    return 0


def _report_inputs(args: argparse.Namespace) -> list[tuple[str, str | Path]]:
    """What ``tapt report`` reads: the run's files, ``--bm25`` and ``--plot``, and the data
    the BM25 reference is computed on (``data.path`` of the run's recipe)."""
    from tapt.run_folder.layout import RunDir

    run = RunDir(args.run_dir)
    found = [("RUN_DIR", path) for path in (run.recipe_file, run.metrics_file,
                                            run.results_file, run.root / "test.json")]
    found += [("--bm25", args.bm25)] + [("--plot", plot) for plot in args.plot]
    if args.bm25 is None and not args.no_bm25:
        found += data_inputs("run's data.path", _recorded_data(run.recipe_file))
    return found


def _recorded_data(recipe_file: Path) -> str | None:
    """``data.path`` of a run's ``recipe.yaml``, or None when it cannot be read (then
    :func:`tapt.analysis.report.load_run` names the problem)."""
    import yaml

    try:
        recipe = yaml.safe_load(recipe_file.read_text(encoding="utf-8"))
        path = recipe["data"]["path"]
    except (OSError, UnicodeDecodeError, yaml.YAMLError, TypeError, KeyError, RecursionError):
        return None
    return path if isinstance(path, str) else None


COMMANDS = {"compare": cmd_compare, "ablate": cmd_ablate, "analyze": cmd_analyze,
            "probe": cmd_probe, "report": cmd_report}
