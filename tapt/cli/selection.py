"""``tapt soup``: choosing and combining trained models (model soups). torch and the
training code are imported inside the handler."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.markup import escape

from tapt.cli import terminal
from tapt.cli.options import check_folder, number_type
from tapt.util import bounds


def add_parsers(commands) -> None:
    """``tapt soup``."""
    soup = commands.add_parser(
        "soup", help="average several finished runs of one base model (greedy or uniform "
                     "model soup, picked on their shared dev set) into a new export")
    soup.add_argument("runs", nargs="+", type=Path, metavar="RUN",
                      help="finished run folders (final/, recipe.yaml, results.json), or a "
                           "tapt sweep folder (its finished trials)")
    soup.add_argument("--output", type=Path, required=True,
                      help="folder of the soup's export (must not exist)")
    soup.add_argument("--method", choices=("greedy", "uniform"), default="greedy",
                      help="greedy (default): add runs best-dev first while dev does not "
                           "drop; uniform: the mean of all")
    soup.add_argument("--top", type=number_type(bounds.SOUP_SIZE, "soup_size"), default=None,
                      metavar="K", help="only the K runs with the best recorded dev metric "
                                        f"[range: {bounds.SOUP_SIZE.documented}]")
    soup.add_argument("--overwrite", action="store_true",
                      help="replace --output if it is a tapt export (never a run)")
    soup.add_argument("--export-dtype", choices=("float32", "bfloat16", "float16"),
                      default="float32", help="dtype of the exported weights")


def expand_runs(paths: list[Path]) -> list[Path]:
    """Run folders: a sweep folder (``sweep.json``) becomes its finished trials' folders."""
    from tapt.training.merge_types import MergeError

    runs: list[Path] = []
    for path in paths:
        state = path / "sweep.json"
        if not state.is_file():
            runs.append(path)
            continue
        try:
            trials = json.loads(state.read_text(encoding="utf-8"))["trials"]
            found = [Path(t["folder"]) for t in trials if t.get("status") == "finished"]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            raise MergeError(f"{state}: not a readable tapt sweep ({err})") from None
        runs += [folder if folder.is_absolute() else path / folder.name for folder in found]
    return runs


def top_runs(runs: list[Path], top: int | None) -> list[Path]:
    """The ``top`` runs with the best recorded best-dev metric (all without ``top``)."""
    from tapt.training.soup import read_ingredient

    if top is None:
        return runs
    ingredients = [read_ingredient(run) for run in runs]
    metric = ingredients[0].recipe.eval.metric
    ranked = sorted(ingredients, key=lambda i: -i.recorded_dev[metric])
    return [i.run for i in ranked[:top]]


def cmd_soup(args: argparse.Namespace) -> int:
    from tapt.training.soup import soup

    check_folder("--output", args.output.parent, shown=args.output)
    runs = top_runs(expand_runs(args.runs), args.top)

    def shown(step) -> None:
        metric = next(iter(step.dev))
        terminal.console.print(f"tried {escape(step.ingredient)}: dev {metric} "
                               f"{step.dev[metric]:.4f} ({'kept' if step.kept else 'left out'})",
                               highlight=False, soft_wrap=True)

    result = soup(runs, args.output, method=args.method, overwrite=args.overwrite,
                  export_dtype=args.export_dtype, on_step=shown)
    metric = next(iter(result.dev))
    terminal.console.print(f"{result.method} soup of {len(result.ingredients)} of {len(runs)} "
                           f"runs: dev {metric} {result.dev[metric]:.4f}; written to "
                           f"{escape(str(result.output))}", highlight=False, soft_wrap=True)
    return 0


def soup_of_sweep(result, top: int, *, with_test: bool) -> None:
    """``tapt sweep --soup K``: the greedy soup of the K finished trials with the best dev
    metric, cooked into ``SWEEP/soup`` (replaced on a rerun: it is the sweep's own export);
    with ``with_test``, its test metrics (``SWEEP/soup-test.json``) and a paired test
    against the best trial's, printed as ``tapt compare --baseline`` prints them."""
    from tapt.analysis.compare import compare_results, markdown_table
    from tapt.training.soup import soup

    done = [t for t in result.trials if t.status == "finished" and t.dev
            and result.metric in t.dev]
    ranked = sorted(done, key=lambda t: -t.dev[result.metric])[:top]
    if len(ranked) < 2:
        terminal.console.print(f"--soup {top}: {len(ranked)} finished trial(s), no soup",
                               highlight=False)
        return
    output = result.folder / "soup"
    cooked = soup([t.folder for t in ranked], output, method="greedy",
                  overwrite=output.exists())
    metric = result.metric
    terminal.console.print(f"greedy soup of {len(cooked.ingredients)} of the {len(ranked)} best "
                           f"trials: dev {metric} {cooked.dev[metric]:.4f} (best trial "
                           f"{ranked[0].dev[metric]:.4f}); written to {escape(str(output))}",
                           highlight=False, soft_wrap=True)
    if not with_test:
        return
    best_test = ranked[0].folder / "test.json"
    if not best_test.is_file():
        terminal.console.print(f"no {best_test}: the soup's test is not compared",
                               highlight=False)
        return
    soup_test = test_of_export(ranked[0].recipe, output)
    comparison = compare_results([f"best trial={best_test}", f"soup={soup_test}"],
                                 baseline="best trial", test_metric=metric)
    terminal.console.print(markdown_table(comparison, metric), highlight=False,
                           soft_wrap=True)


def test_of_export(recipe, model_folder: Path) -> Path:
    """Evaluate an export on the recipe's test split as ``tapt train --test`` does; the
    result is written beside it (``NAME-test.json``), in ``tapt eval --output``'s format."""
    from tapt.encoders.factory import ModelOptions, load_model
    from tapt.training.contrastive import load_recipe_data, report_on_test

    dataset = load_recipe_data(recipe, with_test=True)
    model, _ = load_model(str(model_folder), ModelOptions(dtype="float32"))
    report = report_on_test(model, dataset, recipe, name=str(model_folder))
    target = model_folder.with_name(f"{model_folder.name}-test.json")
    report.write_json(target)
    return target


COMMANDS = {"soup": cmd_soup}
