"""``tapt eval``'s further views of one evaluation: ``--dims`` (several Matryoshka widths
from one encoding, :mod:`tapt.retrieval.widths`), ``--by FIELD`` (metrics per query
group, :mod:`tapt.retrieval.by_group`) and ``--tune-on SPLIT`` (hybrid fusion picked on
another split, :mod:`tapt.retrieval.fusion_tuning`).

:func:`check_view_args` refuses bad combinations before anything loads (a ``ValueError``
naming the flags: exit code 2); :func:`evaluate_views` runs the evaluation the flags ask
for; :func:`show_views` prints the extra tables, draws the plot and fills the report's
JSON sections."""

from __future__ import annotations

import argparse
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import width
from tapt.data.beir import SPLITS


def add_view_args(parser: argparse.ArgumentParser) -> None:
    """``--dims --plot --by --tune-on`` of ``tapt eval``."""
    views = parser.add_argument_group("views: widths, query groups, tuned fusion")
    views.add_argument("--dims", type=width, nargs="+", default=None, metavar="N",
                       help="score these Matryoshka widths (first N dimensions, each <= the "
                            "model's width) from one full-width encoding; one table, and a "
                            "plot with --plot (holds the corpus embeddings in memory)")
    views.add_argument("--plot", type=Path, default=None,
                       help="--dims: PNG of the metrics against the width")
    add_by_arg(views)
    views.add_argument("--tune-on", choices=SPLITS, default=None,
                       help="--hybrid: pick --rrf-k (grid 1 10 30 60 100) or --alpha (0.0 to "
                            "1.0 by 0.1) by binary nDCG@10 on this split, ties to the given "
                            "value, then evaluate --split with it")


def add_by_arg(parser: argparse._ActionsContainer) -> None:
    """``--by FIELD`` of ``tapt eval`` and ``tapt bm25`` (on a parser or an argument group)."""
    parser.add_argument("--by", default=None, metavar="FIELD",
                        help="also report every metric per query group: the value of FIELD "
                             "under 'labels' in queries.jsonl (local data; queries without "
                             "it: group '(none)'; tapt data synth writes mode and domain)")


def check_view_args(args: argparse.Namespace) -> None:
    """Refuse combinations the views do not support, naming the flags."""
    dims, tune_on = getattr(args, "dims", None), getattr(args, "tune_on", None)
    hybrid = getattr(args, "hybrid", None)
    if tune_on is not None and not hybrid:
        raise ValueError("--tune-on tunes the fusion of --hybrid bm25; add --hybrid bm25")
    if tune_on is None and hybrid and getattr(args, "fusion", None) == "auto":
        raise ValueError("--fusion auto picks RRF or linear fusion on a tuning split: add "
                         "--tune-on SPLIT (e.g. dev)")
    if tune_on is not None and tune_on == args.split:
        raise ValueError(f"--tune-on {tune_on}: tune on another split than --split "
                         f"{args.split} (tuning on the evaluated queries overstates them)")
    if dims is not None and hybrid:
        raise ValueError("--dims scores a dense model's widths; it does not combine with "
                         "--hybrid")
    if dims is not None and getattr(args, "truncate_dim", None) is not None:
        raise ValueError("--dims and --truncate-dim: give the widths with --dims alone")
    if getattr(args, "plot", None) is not None and dims is None:
        raise ValueError("--plot draws the --dims curve; add --dims")


def read_labels(args: argparse.Namespace, dataset):
    """``--by``: the query labels (before any encoding), or None."""
    if getattr(args, "by", None) is None:
        return None
    from tapt.data.labels import read_query_labels

    if not Path(dataset.source).is_dir():
        raise ValueError(f"--by {args.by}: query labels are read from a local "
                         f"queries.jsonl; {dataset.source} is not a local folder")
    return read_query_labels(dataset.source, args.by)


def evaluate_views(args: argparse.Namespace, retriever, dataset, corpus_ids, info):
    """``(report, retriever, per-width reports or None)``: the report is None on a DDP rank
    other than 0; the retriever is the tuned one under ``--tune-on``."""
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.retrieval.evaluate import evaluate

    with_title = not args.no_title
    if getattr(args, "dims", None):
        from tapt.retrieval.widths import evaluate_widths

        widths = evaluate_widths(retriever, dataset, args.split, args.dims,
                                 corpus_ids=corpus_ids, with_title=with_title, info=info)
        return (None, retriever, None) if widths is None else \
            (widths[max(widths)], retriever, widths)
    if getattr(args, "tune_on", None):
        from tapt.retrieval.fusion_tuning import tune_and_evaluate

        tune_ids = subcorpus_ids(dataset, args.tune_on, distractors=args.distractors,
                                 fraction=args.fraction, seed=args.seed)
        report, tuned = tune_and_evaluate(retriever, dataset, args.split, args.tune_on,
                                          corpus_ids=corpus_ids, tune_corpus_ids=tune_ids,
                                          with_title=with_title, info=info)
        return report, tuned, None
    report = evaluate(retriever, dataset, args.split, corpus_ids=corpus_ids,
                      with_title=with_title, info=info)
    return report, retriever, None


def show_views(args: argparse.Namespace, report, widths, labels) -> None:
    """Print the per-width and per-group tables, draw ``--plot``, fill ``report.sections``."""
    from tapt.retrieval.by_group import group_metrics, groups_section, groups_table
    from tapt.retrieval.evaluate import metrics_table

    if "tuning" in report.info:
        tuning = report.info["tuning"]
        terminal.console.print(f"fusion tuned on {tuning['tuned_on']}: "
                               f"{tuning.get('fusion', '')} {tuning['setting']} "
                               f"{tuning['picked']:g} ({tuning['metric']} "
                               f"{max(tuning['scores']):.4f} on {tuning['tuning_queries']} "
                               "queries)", highlight=False)
    if widths is not None:
        from tapt.retrieval.widths import widths_section

        terminal.console.print(metrics_table(
            {str(width): item.metrics for width, item in widths.items()},
            title=f"{args.split} metrics per width", label="width"))
        report.sections["dims"] = widths_section(widths)
        if labels is not None:
            report.sections["dims"]["by_group"] = {
                str(width): group_metrics(item.per_query, labels)
                for width, item in widths.items()}
        if args.plot is not None:
            plot_widths(args.plot, widths, title=f"{report.info['model']} ({args.split})")
            terminal.console.print(f"plot written to {args.plot}")
    if labels is not None:
        groups = group_metrics(report.per_query, labels)
        terminal.console.print(groups_table(args.by, groups,
                                            title=f"{args.split} metrics by {args.by}"))
        report.sections["by_group"] = groups_section(args.by, groups)


def plot_widths(path: Path, widths, title: str) -> None:
    """The four metrics against the width (log-2 axis), one line each."""
    from tapt.retrieval.metrics import METRIC_KEYS
    from tapt.util.figures import new_figure, save

    figure, ax = new_figure(6.0, 4.0)
    sizes = sorted(widths)
    for key in METRIC_KEYS:
        ax.plot(sizes, [widths[size].metrics[key] for size in sizes], marker="o", label=key)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(size) for size in sizes])
    ax.set_xlabel("embedding width (first N dimensions)")
    ax.set_ylabel("score")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    save(figure, path)
