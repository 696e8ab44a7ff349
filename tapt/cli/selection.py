"""``tapt merge``, ``tapt sweep`` and ``tapt soup``: choosing and combining trained models
(:mod:`tapt.selection`). torch and the training code are imported inside the handlers."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from tapt.cli import terminal
from tapt.cli.number_types import fraction, relevant_from, seed_list, soup_size
from tapt.cli.options import (
    add_batching_args,
    add_device_args,
    add_quiet_arg,
    add_relevance_arg,
    add_subcorpus_args,
    check_folder,
    data_inputs,
    family_help,
)
from tapt.util import bounds


def add_parsers(commands) -> None:
    """``tapt merge``, ``tapt sweep``, ``tapt soup``."""
    _add_merge_parser(commands)
    _add_sweep_parser(commands)
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
    soup.add_argument("--top", type=soup_size, default=None,
                      metavar="K", help="only the K runs with the best recorded dev metric "
                                        f"[range: {bounds.SOUP_SIZE.documented}]")
    soup.add_argument("--overwrite", action="store_true",
                      help="replace --output if it is a tapt export (never a run)")
    soup.add_argument("--export-dtype", choices=("float32", "bfloat16", "float16"),
                      default="float32", help="dtype of the exported weights")


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
                           "folder: its recipe's own dev set (a carved dev split, which "
                           "must be the one the run recorded, its sub-corpus and encoding "
                           "settings; the data flags are not used)")
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
    add_batching_args(pick)
    add_device_args(pick)
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



def cmd_merge(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.encoders.loading import refuse_serving_export
    from tapt.retrieval.metrics import METRIC_KEYS
    from tapt.selection.merge import DEFAULT_GRID, DevSettings, check_request, merge
    from tapt.selection.merge_export import check_merge_output
    from tapt.training.weights import MergeError

    if args.grid is not None and args.pick_on_dev is None:
        raise MergeError("--grid needs --pick-on-dev")
    _check_guard_flags(args)
    grid = (args.grid or list(DEFAULT_GRID)) if args.pick_on_dev else None
    check_request(len(args.models), args.weights, grid)
    for model in args.models:
        refuse_serving_export(model, "tapt merge averages torch weights")
    run_recipe = Path(args.pick_on_dev or "") / "recipe.yaml"
    run = None
    if args.pick_on_dev and run_recipe.is_file():  # a run folder: its recipe's inputs too
        from tapt.recipe import load_recipe
        from tapt.run_folder.start import input_paths

        run = load_recipe(run_recipe)
        dev_inputs = [("--pick-on-dev", Path(args.pick_on_dev)), *input_paths(run)]
    else:
        dev_inputs = data_inputs("--pick-on-dev", args.pick_on_dev, args.config)
    check_merge_output(args.output, args.models, overwrite=args.overwrite,
                       inputs=dev_inputs + data_inputs("--guard-data", args.guard_data))
    check_folder("--output", args.output.parent, shown=args.output)
    dev = None
    if run is not None:  # a run folder: its own dev set, carved as the run recorded
        from tapt.selection.merge import check_run_carve
        from tapt.selection.soup import dev_settings

        own = dev_settings(run)
        check_run_carve(Path(args.pick_on_dev), own.dataset.carved)
        dev = replace(own, grid=grid, metric=args.metric,
                      device=args.device, progress=terminal.show_progress(args),
                      guard=_guard_set(args), guard_tolerance=args.guard_tolerance)
    elif args.pick_on_dev:
        from tapt.data.beir import strictness
        from tapt.data.sources import has_split, load_data
        from tapt.data.subcorpus import subcorpus_ids

        if not has_split(args.pick_on_dev, args.config, "dev", revision=args.revision):
            raise MergeError(f"--pick-on-dev {args.pick_on_dev}: the data has no dev split "
                             "(qrels/dev.tsv) to pick the weight on; give a finished run "
                             "folder instead (its recipe's dev set, e.g. carved from train "
                             "by data.dev_from_train), or data with a dev split")
        dataset = load_data(args.pick_on_dev, args.config, ["dev"], revision=args.revision,
                            relevant_from=args.relevant_from, **strictness(args.lenient))
        dev = DevSettings(dataset, grid=grid, metric=args.metric,
                          corpus_ids=subcorpus_ids(dataset, "dev", distractors=args.distractors,
                                                   fraction=args.fraction, seed=args.seed),
                          with_title=not args.no_title, batch_size=args.batch_size,
                          max_tokens_per_batch=args.max_tokens_per_batch, dtype=args.dtype,
                          device=args.device, progress=terminal.show_progress(args),
                          guard=_guard_set(args), guard_tolerance=args.guard_tolerance)
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
    from tapt.training.weights import MergeError

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
    """``--guard-data``'s :class:`~tapt.training.guard_data.GuardSet` (None without it;
    the whole corpus)."""
    if args.guard_data is None:
        return None
    from tapt.training.guard_data import GuardSet, load_guard_data

    dataset = load_guard_data(args.guard_data, args.guard_split,
                              relevant_from=args.guard_relevant_from, lenient=args.guard_lenient)
    return GuardSet(dataset, args.guard_split, corpus_ids=None)


# tapt sweep (tapt.selection.sweep) ------------------------------------------------------

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
    sweep.add_argument("--soup", type=soup_size, default=None,
                       metavar="K",
                       help="then cook a greedy model soup of the K trials with the best dev "
                            "metric into SWEEP/soup (tapt soup); with --test, its test "
                            "metrics against the best trial's, with the paired test "
                            f"[range: {bounds.SOUP_SIZE.documented}]")


def cmd_sweep(args: argparse.Namespace) -> int:
    from rich.table import Table

    from tapt.selection.sweep import plan_sweep, run_sweep, setting_rows

    plan = plan_sweep(args.recipe, args.overrides, seeds=args.seeds, output=args.output,
                      run_test=args.test, soup=args.soup is not None)  # checked before training
    result = run_sweep(plan)
    from tapt.util.process_group import is_main_process

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
        soup_of_sweep(result, args.soup, with_test=args.test)
    return 1 if result.failed else 0


def expand_runs(paths: list[Path]) -> list[Path]:
    """Run folders: a sweep folder (``sweep.json``) becomes its finished trials' folders,
    ``SWEEP/NAME`` by each trial's recorded name (a trial always lives there, so a moved
    sweep still works and a recorded path can never point outside the sweep)."""
    from tapt.training.weights import MergeError

    runs: list[Path] = []
    for path in paths:
        state = path / "sweep.json"
        if not state.is_file():
            runs.append(path)
            continue
        try:
            trials = json.loads(state.read_text(encoding="utf-8"))["trials"]
        except (OSError, UnicodeDecodeError, ValueError, RecursionError, KeyError,
                TypeError) as err:
            raise MergeError(f"{state}: not a readable tapt sweep ({err})") from None
        if not isinstance(trials, list):
            raise MergeError(f"{state}: field 'trials': expected a list")
        for number, trial in enumerate(trials, 1):
            name = trial.get("name") if isinstance(trial, dict) else None
            if not (isinstance(name, str) and name not in ("", ".", "..")
                    and Path(name).name == name and "\\" not in name):
                raise MergeError(f"{state}: trial {number}: field 'name': expected a folder "
                                 f"name inside the sweep, got {name!r}")
            if trial.get("status") == "finished":
                runs.append(path / name)
    return runs


def top_runs(runs: list[Path], top: int | None) -> list[Path]:
    """The ``top`` runs with the best recorded best-dev metric (all without ``top``)."""
    from tapt.selection.soup import read_ingredient

    if top is None:
        return runs
    ingredients = [read_ingredient(run) for run in runs]
    metric = ingredients[0].recipe.eval.metric
    ranked = sorted(ingredients, key=lambda i: -i.recorded_dev[metric])
    return [i.run for i in ranked[:top]]


def cmd_soup(args: argparse.Namespace) -> int:
    from tapt.selection.soup import soup

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
    from tapt.analysis.compare import compare_results
    from tapt.analysis.compare_render import markdown_table
    from tapt.selection.soup import soup

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
    from tapt.training.evaluation_on_test import report_on_test
    from tapt.training.inputs import load_recipe_data

    dataset = load_recipe_data(recipe, with_test=True)
    model, _ = load_model(str(model_folder), ModelOptions(dtype="float32"))
    report = report_on_test(model, dataset, recipe.eval, recipe.data, name=str(model_folder))
    target = model_folder.with_name(f"{model_folder.name}-test.json")
    report.write_json(target)
    return target


COMMANDS = {"merge": cmd_merge, "sweep": cmd_sweep, "soup": cmd_soup}
