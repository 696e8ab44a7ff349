"""``tapt combine``: a dense model and a lexical model in one vector (SPAR;
:mod:`tapt.selection.combine`), the lexical model's weight given or picked on dev."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import lexical_weight
from tapt.cli.options import (
    add_batching_args,
    add_quiet_arg,
    add_subcorpus_args,
    check_folder,
    data_inputs,
)


def add_parsers(commands) -> None:
    """``tapt combine``."""
    from tapt.retrieval.metrics import METRIC_KEYS

    combine = commands.add_parser(
        "combine", help="a dense model and a lexical model (trained to imitate BM25 on "
                        "pseudo-queries) in one vector: one index, hybrid ranking (SPAR)")
    combine.add_argument("dense", metavar="DENSE", help="the dense model (folder, Hub id, "
                                                        "package:...)")
    combine.add_argument("lexical", metavar="LEXICAL",
                         help="the lexical model Λ, with the dense model's tokenizer (e.g. "
                              "tapt train ... data.pseudo_queries=BM25_FILE "
                              "data.pseudo_mix=only from the same base)")
    combine.add_argument("--output", type=Path, required=True, help="the combined model's folder")
    combine.add_argument("--overwrite", action="store_true",
                         help="replace --output when it is a tapt combine export holding "
                              "nothing else")
    how = combine.add_mutually_exclusive_group(required=True)
    how.add_argument("--weight", type=lexical_weight, default=None,
                     help="w: query·passage scores dense + w x lexical")
    how.add_argument("--pick-on-dev", default=None, metavar="DATA|RUN",
                     help="pick w on a dev split: a tapt run folder (its recipe's dev set, "
                          "a carved one included) or a BEIR folder with a dev split")
    combine.add_argument("--weights", type=lexical_weight, nargs="+", default=None, metavar="W",
                         help="the weights tried on dev (default 0 0.1 0.2 0.3 0.5 0.75 1 1.5 "
                              "2 3)")
    combine.add_argument("--metric", choices=METRIC_KEYS, default="binary_ndcg@10",
                         help="dev metric that picks (ties: the smaller weight)")
    combine.add_argument("--lenient", action="store_true",
                         help="read --pick-on-dev DATA leniently (empty passages)")
    combine.add_argument("--no-title", action="store_true",
                         help="encode passages without title (--pick-on-dev DATA)")
    add_subcorpus_args(combine, "dev sub-corpus (--pick-on-dev DATA)")
    add_batching_args(combine)  # the dev pick's encoding batches (a DATA folder's)
    add_quiet_arg(combine)


def cmd_combine(args: argparse.Namespace) -> int:
    from tapt.encoders.loading import refuse_serving_export
    from tapt.retrieval.metrics import METRIC_KEYS
    from tapt.selection.combine import DEFAULT_WEIGHTS, check_combine_output, combine_models
    from tapt.training.weights import MergeError

    if args.weights is not None and args.pick_on_dev is None:
        raise MergeError("--weights needs --pick-on-dev (or give one --weight)")
    for model in (args.dense, args.lexical):
        refuse_serving_export(model, "tapt combine joins torch models")
    run_recipe = Path(args.pick_on_dev or "") / "recipe.yaml"
    run = None
    if args.pick_on_dev and run_recipe.is_file():
        from tapt.recipe import load_recipe
        from tapt.run_folder.start import input_paths

        run = load_recipe(run_recipe)
        inputs = [("--pick-on-dev", Path(args.pick_on_dev)), *input_paths(run)]
    else:
        inputs = data_inputs("--pick-on-dev", args.pick_on_dev, None)
    check_combine_output(args.output, [args.dense, args.lexical], overwrite=args.overwrite,
                         inputs=inputs)
    check_folder("--output", args.output.parent, shown=args.output)
    dev = None
    progress = terminal.show_progress(args)
    if run is not None:
        from tapt.selection.soup import dev_settings

        dev = replace(dev_settings(run), metric=args.metric, progress=progress)
    elif args.pick_on_dev:
        from tapt.data.beir import strictness
        from tapt.data.sources import has_split, load_data
        from tapt.data.subcorpus import subcorpus_ids
        from tapt.selection.merge import DevSettings

        if not has_split(args.pick_on_dev, None, "dev"):
            raise MergeError(f"--pick-on-dev {args.pick_on_dev}: the data has no dev split; "
                             "give a finished run folder (its recipe's dev set) instead")
        dataset = load_data(args.pick_on_dev, None, ["dev"], **strictness(args.lenient))
        dev = DevSettings(dataset, metric=args.metric, with_title=not args.no_title,
                          corpus_ids=subcorpus_ids(dataset, "dev", distractors=args.distractors,
                                                   fraction=args.fraction, seed=args.seed),
                          batch_size=args.batch_size,
                          max_tokens_per_batch=args.max_tokens_per_batch,
                          progress=progress)
    result = combine_models(args.dense, args.lexical, args.output, weight=args.weight, dev=dev,
                            grid=args.weights or DEFAULT_WEIGHTS, overwrite=args.overwrite,
                            inputs=inputs)
    if result.points:
        from rich.table import Table

        table = Table(title=f"dev metrics by lexical weight w; picked on {result.metric}")
        table.add_column("w", justify="right")
        for key in METRIC_KEYS:
            table.add_column(key, justify="right")
        table.add_column("")
        for point in result.points:
            table.add_row(f"{point.weight:g}", *(f"{point.metrics[k]:.4f}" for k in METRIC_KEYS),
                          "picked" if point.weight == result.weight else "")
        terminal.console.print(table)
    terminal.console.print(f"combined model (lexical weight {result.weight:g}) written to "
                           f"{result.output}", highlight=False, soft_wrap=True)
    return 0


COMMANDS = {"combine": cmd_combine}
