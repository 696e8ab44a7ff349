"""``tapt train`` (TAPT), ``tapt dapt``, ``tapt validate`` and ``tapt recipe schema``. The
training code (torch, transformers, peft) is imported inside the handlers, after the recipe
has loaded, so a missing recipe or a bad key fails at once."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from tapt.cli import terminal


def add_parsers(commands) -> None:
    """``tapt train``, ``tapt dapt``, ``tapt validate``, ``tapt recipe``."""
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

    check = commands.add_parser("validate", help="check recipes without loading models")
    check.add_argument("recipes", type=Path, nargs="+", metavar="RECIPE",
                       help="recipe YAML files (one with an objective section is a DAPT recipe)")
    recipe = commands.add_parser("recipe", help="recipe keys: tapt recipe schema [--kind dapt]")
    recipe_commands = recipe.add_subparsers(dest="recipe_command", required=True,
                                            metavar="ACTION", help="what to show")
    recipe_commands.add_parser("schema", help="every recipe key: type, default, help").add_argument(
        "--kind", choices=["tapt", "dapt"], default="tapt", help="tapt train or tapt dapt recipes")


def cmd_train(args: argparse.Namespace) -> int:
    from tapt.recipe import load_recipe

    recipe = load_recipe(args.recipe, args.overrides)
    from tapt.encoders.loading import refuse_serving_export
    from tapt.run_folder.start import check_output_dir

    refuse_serving_export(recipe.model.name, "tapt train fine-tunes torch weights",
                          named="model.name")

    check_output_dir(recipe, recipe_file=args.recipe)  # also: output_dir must not hold it
    # imported once the recipe is valid: training pulls in torch, transformers and peft
    # (seconds), which a missing recipe or a bad key must not wait for
    from tapt.retrieval.evaluate import metrics_table
    from tapt.training.contrastive import train
    from tapt.training.errors import ZeroShotGateError
    from tapt.training.zero_shot_gate import gate_message

    try:
        result = train(recipe, run_test=args.test, overwrite=args.overwrite)
    except ZeroShotGateError as err:  # results.json written, nothing exported
        terminal.console.print(f"[red]export refused:[/red] {escape(str(err))}",
                               highlight=False, soft_wrap=True)
        return 4
    if result.final_dir is None:  # not the main process
        return 0
    terminal.console.print(metrics_table(result.summary, title=f"{args.recipe.name}: TAPT results"))
    terminal.console.print(f"model exported to {result.final_dir}")
    if warning := gate_message(result.zero_shot_gate):
        terminal.console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False,
                               soft_wrap=True)
    return 0


def cmd_dapt(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.recipe import load_recipe
    from tapt.retrieval.metrics import METRIC_KEYS

    recipe = load_recipe(args.recipe, args.overrides, kind="dapt")
    from tapt.encoders.loading import refuse_serving_export
    from tapt.run_folder.start import check_output_dir

    refuse_serving_export(recipe.model.name, "tapt dapt trains torch weights",
                          named="model.name")

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


COMMANDS = {"train": cmd_train, "dapt": cmd_dapt, "validate": cmd_validate,
            "recipe": cmd_recipe}
