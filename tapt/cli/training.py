"""``tapt train`` (TAPT), ``tapt dapt``, ``tapt merge``, ``tapt validate`` and ``tapt
recipe schema``. The training code (torch, transformers, peft) is imported inside the
handlers, after the recipe has loaded, so a missing recipe or a bad key fails at once."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from tapt.cli import terminal
from tapt.cli.options import (
    add_quiet_arg,
    add_relevance_arg,
    add_subcorpus_args,
    batch_size,
    check_folder,
    data_inputs,
    family_help,
    fraction,
    number_type,
    relevant_from,
    seed_list,
    tokens_per_batch,
)
from tapt.encoders.precision import DTYPE_NAMES
from tapt.util import bounds


def add_parsers(commands) -> None:
    """``tapt train``, ``tapt dapt``, ``tapt merge``, ``tapt validate``, ``tapt recipe``."""
    train = commands.add_parser("train", help="TAPT: train on a recipe, keep the best dev "
                                              "checkpoint, export it")
    train.add_argument("recipe", type=Path, help="recipe YAML, e.g. recipes/quickstart.yaml")
    train.add_argument("overrides", nargs="*", metavar="key=value",
                       help="dotted overrides, e.g. training.learning_rate=1e-5")
    train.add_argument("--test", action="store_true",
                       help="evaluate zero-shot and trained models on the test split")
    train.add_argument("--overwrite", action="store_true",
                       help="output_dir holds another or a finished run: move it aside "
                            "(OUTPUT.old-TIMESTAMP) and start anew; nothing is deleted")

    dapt = commands.add_parser("dapt", help="DAPT: continued pretraining (mlm or simcse) on "
                                            "corpus passages, exported for tapt train")
    dapt.add_argument("recipe", type=Path, help="DAPT recipe YAML (objective: mlm or simcse)")
    dapt.add_argument("overrides", nargs="*", metavar="key=value",
                      help="dotted overrides, e.g. objective.name=simcse")
    dapt.add_argument("--overwrite", action="store_true",
                      help="move a folder holding another or a finished run aside")
    _add_merge_parser(commands)
    _add_sweep_parser(commands)

    check = commands.add_parser("validate", help="check recipes without loading models")
    check.add_argument("recipes", type=Path, nargs="+", metavar="RECIPE",
                       help="recipe YAML files (one with an objective section is a DAPT recipe)")
    recipe = commands.add_parser("recipe", help="recipe keys: tapt recipe schema [--kind dapt]")
    recipe_commands = recipe.add_subparsers(dest="recipe_command", required=True,
                                            metavar="ACTION", help="what to show")
    recipe_commands.add_parser("schema", help="every recipe key: type, default, help").add_argument(
        "--kind", choices=["tapt", "dapt"], default="tapt", help="tapt train or tapt dapt recipes")


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
    merge.add_argument("--family", default="auto", help=family_help())
    merge.add_argument("--trust-remote-code", action="store_true",
                       help="allow the models' own code from the Hub (off by default)")
    merge.add_argument("--export-dtype", choices=("float32", "bfloat16", "float16"),
                       default="float32", help="dtype of the saved weights (default float32)")
    pick = merge.add_argument_group(
        "picking the weight on dev (two models: put the fine-tuned one first)")
    pick.add_argument("--pick-on-dev", default=None, metavar="DATA",
                      help="BEIR folder or Hub dataset id: evaluate each --grid weight on its "
                           "dev split as tapt eval does and keep the best; or a tapt run "
                           "folder: its recipe's own dev set (a carved dev split, its "
                           "sub-corpus and encoding settings; the data flags are not used)")
    pick.add_argument("--grid", type=fraction, nargs="+", default=None, metavar="W",
                      help="weights of the first model to try (the second gets 1 - W; "
                           "default: 0 0.25 0.5 0.75 1)")
    pick.add_argument("--metric", choices=METRIC_KEYS, default="binary_ndcg@10",
                      help="dev metric that picks (ties: the larger weight on the first model)")
    pick.add_argument("--config", default=None, help="Hub config or subfolder")
    pick.add_argument("--revision", default=None, help="Hub dataset revision")
    pick.add_argument("--lenient", action="store_true",
                      help="accept empty passages and queries without a relevant passage")
    add_relevance_arg(pick)
    pick.add_argument("--no-title", action="store_true", help="encode passages without title")
    add_subcorpus_args(pick, "dev sub-corpus")
    pick.add_argument("--batch-size", type=batch_size, default=32,
                      help="texts per encoding batch")
    pick.add_argument("--max-tokens-per-batch", type=tokens_per_batch, default=None,
                      help="padded tokens per encoding batch (default: batch size x maximum "
                           "sequence length)")
    pick.add_argument("--dtype", choices=DTYPE_NAMES, default="auto",
                      help="encoding precision (auto: bfloat16 on a CUDA GPU, else float32)")
    pick.add_argument("--device", default=None,
                      help="torch device such as cuda:1 or cpu (default: a GPU when there is one)")
    add_quiet_arg(pick)
    guard = merge.add_argument_group(
        "a guard criterion for --pick-on-dev: the best dev weight whose guard metric is at "
        "least the second model's (w = 0, evaluated too) minus --guard-tolerance")
    guard.add_argument("--guard-data", default=None, metavar="DATA",
                       help="a second (out-of-domain) local BEIR folder, e.g. Cranfield, "
                            "evaluated on its whole corpus at every weight")
    # None defaults (GUARD_DEFAULTS fills them): a guard flag without --guard-data is refused
    guard.add_argument("--guard-split", default=None, help="its split (default test)")
    guard.add_argument("--guard-tolerance", type=fraction, default=None, metavar="T",
                       help="guard metric a pick may lose against the second model "
                            "(default 0.01)")
    guard.add_argument("--guard-lenient", action="store_true",
                       help="read the guard data leniently (empty passages: Cranfield)")
    guard.add_argument("--guard-relevant-from", type=relevant_from, default=None,
                       metavar="auto|N",
                       help="lowest relevant grade of the guard data (default auto)")



def cmd_train(args: argparse.Namespace) -> int:
    from tapt.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)
    from tapt.training.run_start import check_output_dir

    check_output_dir(recipe, recipe_file=args.recipe)  # also: output_dir must not hold it
    # imported once the recipe is valid: training pulls in torch, transformers and peft
    # (seconds), which a missing recipe or a bad key must not wait for
    from tapt.retrieval.evaluate import metrics_table
    from tapt.training.contrastive import train

    result = train(recipe, run_test=args.test, overwrite=args.overwrite)
    if result.final_dir is None:  # not the main process
        return 0
    terminal.console.print(metrics_table(result.summary, title=f"{args.recipe.name}: TAPT results"))
    terminal.console.print(f"model exported to {result.final_dir}")
    return 0


def cmd_dapt(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.recipe import load_recipe
    from tapt.retrieval.metrics import METRIC_KEYS

    recipe = load_recipe(args.recipe, args.overrides, kind="dapt")
    from tapt.training.run_start import check_output_dir

    check_output_dir(recipe, recipe_file=args.recipe)  # also: output_dir must not hold it
    from tapt.training.dapt import dapt  # torch, transformers: only once the recipe is valid

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
    terminal.console.print(table)
    terminal.console.print(f"model exported to {result.final_dir}; start TAPT from it with "
                           f"model.name: {result.final_dir}")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.retrieval.metrics import METRIC_KEYS
    from tapt.training.merge import DEFAULT_GRID, DevSettings, MergeError, check_request, merge
    from tapt.training.merge_export import check_merge_output

    if args.grid is not None and args.pick_on_dev is None:
        raise MergeError("--grid needs --pick-on-dev")
    _check_guard_flags(args)
    grid = (args.grid or list(DEFAULT_GRID)) if args.pick_on_dev else None
    check_request(len(args.models), args.weights, grid)
    check_merge_output(args.output, args.models, overwrite=args.overwrite,
                       inputs=data_inputs("--pick-on-dev", args.pick_on_dev, args.config)
                       + data_inputs("--guard-data", args.guard_data))
    check_folder("--output", args.output.parent, shown=args.output)
    dev = None
    run_recipe = Path(args.pick_on_dev or "") / "recipe.yaml"
    if args.pick_on_dev and run_recipe.is_file():  # a run folder: its own dev set
        from dataclasses import replace

        from tapt.recipe import load_recipe
        from tapt.training.soup import dev_settings

        dev = replace(dev_settings(load_recipe(run_recipe)), grid=grid, metric=args.metric,
                      device=args.device, progress=terminal.show_progress(args),
                      guard=_guard_set(args))
    elif args.pick_on_dev:
        from tapt.data.beir import strictness
        from tapt.data.sources import load_data
        from tapt.data.subcorpus import subcorpus_ids

        dataset = load_data(args.pick_on_dev, args.config, ["dev"], revision=args.revision,
                            relevant_from=args.relevant_from, **strictness(args.lenient))
        dev = DevSettings(dataset, grid=grid, metric=args.metric,
                          corpus_ids=subcorpus_ids(dataset, "dev", distractors=args.distractors,
                                                   fraction=args.fraction, seed=args.seed),
                          with_title=not args.no_title, batch_size=args.batch_size,
                          max_tokens_per_batch=args.max_tokens_per_batch, dtype=args.dtype,
                          device=args.device, progress=terminal.show_progress(args),
                          guard=_guard_set(args))
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
        guarded = args.guard_data is not None
        if guarded:
            table.add_column(f"guard {selection.metric}", justify="right")
        table.add_column("")
        for point in selection.points:
            guard_cell = [f"{point.guard[selection.metric]:.4f}"] if guarded else []
            table.add_row(f"{point.weight:g}", *(f"{point.metrics[k]:.4f}" for k in METRIC_KEYS),
                          *guard_cell, "picked" if point.weight == selection.picked else "")
        terminal.console.print(table)
    shown = ", ".join(f"{weight:g}" for weight in result.weights)
    terminal.console.print(f"merged model (weights {shown}) written to {result.output}",
                           highlight=False, soft_wrap=True)
    return 0



GUARD_DEFAULTS = {"guard_split": "test", "guard_tolerance": 0.01, "guard_relevant_from": "auto"}
"""``tapt merge``'s guard flags' defaults, filled in once ``--guard-data`` is known given."""


def _check_guard_flags(args: argparse.Namespace) -> None:
    """``--guard-data`` needs ``--pick-on-dev`` and the other guard flags need
    ``--guard-data`` (they would do nothing); fills their defaults (:data:`GUARD_DEFAULTS`)."""
    from tapt.training.merge import MergeError

    if args.guard_data is None:
        given = [key for key in GUARD_DEFAULTS if getattr(args, key) is not None]
        given += ["guard_lenient"] if args.guard_lenient else []
        if given:
            raise MergeError(f"--{given[0].replace('_', '-')} needs --guard-data (the guard "
                             "flags describe the guard set)")
    elif args.pick_on_dev is None:
        raise MergeError("--guard-data needs --pick-on-dev")
    for key, value in GUARD_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)


def _guard_set(args: argparse.Namespace):
    """``--guard-data``'s :class:`~tapt.training.merge.GuardSet` (None without it)."""
    if args.guard_data is None:
        return None
    from tapt.training.guard_data import load_guard_data
    from tapt.training.merge import GuardSet

    dataset = load_guard_data(args.guard_data, args.guard_split,
                              relevant_from=args.guard_relevant_from, lenient=args.guard_lenient)
    return GuardSet(dataset, split=args.guard_split, tolerance=args.guard_tolerance)


def cmd_recipe(args: argparse.Namespace) -> int:
    from tapt.recipe import describe_schema
    from tapt.recipe.keys import format_rows

    print(format_rows(describe_schema(args.kind)))  # plain text: no wrapping, for grep
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from tapt.recipe import DaptRecipe, RecipeError, check_recipe, load_recipe

    failed = 0
    for path in args.recipes:
        try:
            recipe = load_recipe(path, kind="auto")
            if not isinstance(recipe, DaptRecipe):
                check_recipe(recipe)
            terminal.console.print(f"[green]ok[/green] {path}")
        except RecipeError as err:
            terminal.console.print(f"[red]error:[/red] {escape(str(err))}", highlight=False)
            failed += 1
    return 2 if failed else 0


# tapt sweep (tapt.training.sweep) ------------------------------------------------------

def _add_sweep_parser(commands) -> None:
    sweep = commands.add_parser(
        "sweep", help="grid search: one tapt train run per combination of the keys' values "
                      "(x --seeds), resumable; the winner by mean dev")
    sweep.add_argument("recipe", type=Path, help="recipe YAML, e.g. recipes/quickstart.yaml")
    sweep.add_argument("overrides", nargs="*", metavar="key=v1,v2",
                       help="a recipe key and its values, split on top-level commas only "
                            "(loss.matryoshka_dims=[64,32],[32,16] is two lists); one value "
                            "fixes the key for every trial")
    sweep.add_argument("--seeds", type=seed_list, default=None, metavar="S1,S2",
                       help="training.seed values, e.g. 0,1,2; settings are ranked by mean dev "
                            "over them (default: the recipe's seed)")
    sweep.add_argument("--output", type=Path, default=None,
                       help="sweep folder: one run folder per trial, sweep.json, sweep.md; "
                            "new, empty or made by a sweep, and locked while it runs "
                            "(default: the recipe's output_dir + -sweep)")
    sweep.add_argument("--test", action="store_true",
                       help="also evaluate each trial on the test split (reported, never used "
                            "to pick)")
    sweep.add_argument("--soup", type=number_type(bounds.SOUP_SIZE, "soup_size"), default=None,
                       metavar="K",
                       help="then cook a greedy model soup of the K trials with the best dev "
                            "metric into SWEEP/soup (tapt soup); with --test, its test "
                            "metrics against the best trial's, with the paired test "
                            f"[range: {bounds.SOUP_SIZE.documented}]")


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.training.sweep import plan_sweep, run_sweep, setting_rows

    plan = plan_sweep(args.recipe, args.overrides, seeds=args.seeds, output=args.output,
                      run_test=args.test)  # every trial checked before training is imported
    result = run_sweep(plan)
    from tapt.training.distributed import is_main_process

    if not is_main_process():
        return 0
    header, rows = setting_rows(result, args.test)
    table = Table(title=f"{args.recipe.name}: sweep, best dev checkpoint of each trial")
    for number, column in enumerate(header):
        table.add_column(column, justify="left" if number == 0 else "right")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    terminal.console.print(table)
    best = result.best_trial
    if best is not None:
        terminal.console.print(f"winner: {escape(result.winner.setting)}; its best trial's model: "
                               f"{best.folder / 'final'}", highlight=False, soft_wrap=True)
    if result.note:
        terminal.console.print(f"note: {escape(result.note)}", highlight=False)
    for trial in result.failed:
        terminal.console.print(f"[red]{trial.status}:[/red] {escape(trial.name)}: "
                               f"{escape(trial.error or '')}", highlight=False, soft_wrap=True)
    terminal.console.print(f"sweep written to {result.folder / 'sweep.json'} and sweep.md",
                           highlight=False, soft_wrap=True)
    if args.soup is not None:
        from tapt.cli.selection import soup_of_sweep

        soup_of_sweep(result, args.soup, with_test=args.test)
    return 1 if result.failed else 0


COMMANDS = {"train": cmd_train, "dapt": cmd_dapt, "merge": cmd_merge,
            "validate": cmd_validate, "recipe": cmd_recipe, "sweep": cmd_sweep}
