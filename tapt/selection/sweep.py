"""A sweep: one TAPT run per point of a grid of recipe overrides (x seeds), the winner by dev.

``tapt sweep RECIPE key=v1,v2 [key2=...] [--seeds 0,1,2]`` runs the cartesian product of the
keys' values (the seeds are the key ``training.seed``). Each value is an ordinary recipe
override (:func:`tapt.recipe.parse_override`: read as YAML); a key's values are split on
top-level commas only, so ``loss.matryoshka_dims=[64,32],[32,16]`` gives two lists (commas
inside ``[]``, ``{}``, ``()`` or quotes stay). A key with one value is fixed for every trial.

Rules:

- Every trial's full recipe is validated, and every existing trial folder checked, before any
  trial runs; all problems are reported at once, each naming the trial and the key.
- Trials are ranked on one dev set: an axis that changes which dev queries, passages or
  grades are scored (a recipe ``data`` key of :data:`tapt.selection.soup.DEV_SET_KEYS`:
  the data, its relevance rule, the dev split, its carve and seed, its distractors; and,
  when dev is carved from train, the train split, the carve's kind and the
  decontamination) is refused when the sweep is planned, naming the axis. Seeds
  (``--seeds``, ``training.seed``) and everything else may vary.
- The sweep folder (``--output``, default ``<output_dir>-sweep``) is new, empty, or one a
  sweep created (it holds :data:`MARKER_FILE`): a folder of the user's (their own
  ``sweep.json``, say) is refused. It must not be, hold or lie inside an input (the recipe,
  the data, a model: :func:`tapt.util.outputs.check_apart`), and it is locked while the sweep
  runs (:mod:`tapt.run_folder.lock`): a second sweep on it is refused naming the holder's
  pid; a lock a killed sweep left is taken over.
- Each trial is a normal run folder under the sweep folder, named by its varying overrides
  plus a short hash of all of them (``learning_rate=2e-05_seed=0-1a2b3c4d``); a value that
  holds a secret (:func:`tapt.util.redaction.redact` changes it) is named by a digest
  (``run_name=redacted-5e6f7a8b``), so no folder, checkpoint path or trainer file holds it.
  A finished trial (``final/`` and a finished
  ``results.json`` of the same recipe and inputs) is not rerun: its results are read. A
  crashed trial resumes from its last checkpoint, and a folder holding a different unfinished
  run is refused (both by :mod:`tapt.run_folder.start`).
- Trials run in this process one after another through
  :func:`tapt.training.contrastive.train` (the run lock, fingerprint and resume apply as for
  ``tapt train``), chosen over a ``python -m tapt train`` subprocess per trial: errors stay
  tapt's own, torch is imported once, and a test can watch ``train``. A trial that fails (a
  non-finite loss, out of memory) is recorded as failed, its memory freed (garbage
  collection, the CUDA cache) and the next one runs; Ctrl-C stops the sweep (rerun it to
  resume). Memory a crash leaks inside the process is the price of this choice.
- ``sweep.json`` (the grid, each trial's status and metrics, the ranking) is rewritten
  atomically after each trial; ``sweep.md`` holds the tables at the end.
- The winner is the setting with the best mean dev metric (``eval.metric``, best checkpoint)
  over its finished seeds; test metrics (``--test``) are reported, never used to pick.

Limits: a sweep does not push (``hub.repo_id`` is refused: push the winner with ``tapt
push``); every trial must use one ``eval.metric`` and one dev set.

Example::

    result = run_sweep(plan_sweep("recipes/quickstart.yaml",
                                  ["training.learning_rate=1e-5,2e-5"], seeds=[0, 1]))
    result.winner.setting, result.winner.dev_mean
"""


from __future__ import annotations

import gc
import itertools
import json
import logging
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tapt.data.beir import DataError
from tapt.recipe import Recipe, RecipeError, load_recipe
from tapt.run_folder.input_fingerprint import input_fingerprint
from tapt.run_folder.layout import RunDir
from tapt.run_folder.lock import run_lock
from tapt.run_folder.records import best_step_problem, metrics_row_problem
from tapt.run_folder.start import (
    check_output_dir,
    prepare_run_dir,
    run_changes,
    run_entries,
    saved_recipe,
)
from tapt.selection.soup import CARVED_DEV_KEYS, DEV_SET_KEYS
from tapt.selection.sweep_folder import (  # noqa: F401  (MARKER_FILE, ...: public here too)
    LOCK_WORDING,
    MARKER_FILE,
    REPORT_FILE,
    SWEEP_FILE,
    check_sweep_folder,
    foreign_entries,
    write_marker,
)
from tapt.selection.sweep_grid import (  # noqa: F401  (split_values, ...: public here too)
    SEED_KEY,
    Axis,
    build_axes,
    name_part,
    parse_axis,
    split_values,
    trial_name,
)
from tapt.selection.sweep_report import report_markdown, setting_rows  # noqa: F401
from tapt.util.files import atomic_write_json, atomic_write_text
from tapt.util.process_group import is_main_process

logger = logging.getLogger(__name__)


@dataclass
class Trial:
    """One run of the grid: its overrides, folder, status and best-checkpoint metrics."""

    name: str
    overrides: list[str]
    setting: str
    folder: Path
    seed: str | None = None
    recipe: Recipe | None = field(default=None, repr=False)
    status: str = "pending"
    """pending, running, finished, failed or interrupted."""
    error: str | None = None
    best_step: int | None = None
    dev: dict[str, float] | None = None
    test: dict[str, float] | None = None

    def record(self) -> dict:
        return {"name": self.name, "folder": str(self.folder), "setting": self.setting,
                "overrides": self.overrides, "seed": self.seed, "status": self.status,
                "error": self.error, "best_step": self.best_step, "dev": self.dev,
                "test": self.test}


@dataclass
class Setting:
    """The trials of one setting (every override but the seed) and their mean ± std."""

    setting: str
    trials: int
    finished: int = 0
    dev_mean: float | None = None
    dev_std: float | None = None
    test_mean: float | None = None
    test_std: float | None = None


@dataclass
class Sweep:
    """A checked plan (:func:`plan_sweep`): nothing has run yet."""

    recipe_path: Path
    axes: list[Axis]
    folder: Path
    metric: str
    trials: list[Trial]
    run_test: bool = False


@dataclass
class SweepResult:
    """What a sweep measured: settings best first; ``winner`` is the first (None: no setting
    finished); ``note`` says when the lead is within the seeds' spread."""

    folder: Path
    metric: str
    trials: list[Trial]
    settings: list[Setting]
    winner: Setting | None
    note: str | None = None

    @property
    def failed(self) -> list[Trial]:
        return [trial for trial in self.trials if trial.status != "finished"]

    @property
    def best_trial(self) -> Trial | None:
        """The winner's trial with the best dev metric (its ``final/`` is the model)."""
        if self.winner is None:
            return None
        done = [t for t in self.trials if t.setting == self.winner.setting and t.dev
                and self.metric in t.dev]
        return max(done, key=lambda t: t.dev[self.metric], default=None)


def sweep_folder(recipe: Recipe) -> Path:
    """``<output_dir>-sweep`` next to the recipe's run folder."""
    path = Path(recipe.output_dir)
    if not path.name:  # "." or "/": name the sweep after the resolved folder
        path = path.resolve()
    return path.with_name(f"{path.name or 'run'}-sweep")


def plan_sweep(recipe_path: str | Path, axis_texts: list[str], *, seeds: list[int] | None = None,
               output: str | Path | None = None, run_test: bool = False,
               soup: bool = False) -> Sweep:
    """The grid, every trial's validated recipe and the state of its folder; raises one
    :class:`RecipeError` listing every invalid trial (naming it and the key) before anything
    runs. ``soup``: the trials will be souped (``--soup``), so they must also encode dev
    alike (:func:`soup_problem`). Reads only."""
    recipe_path = Path(recipe_path)
    axes = build_axes(axis_texts, seeds)
    varying = {axis.key for axis in axes if len(axis.values) > 1}
    points = [[f"{axis.key}={value}" for axis, value in zip(axes, values, strict=True)]
              for values in itertools.product(*(axis.values for axis in axes))]
    if not recipe_path.is_file():
        load_recipe(recipe_path)  # its error: not found, or not a regular file
    trials, problems = [], {}
    for overrides in points:
        shown = [o for o in overrides if o.partition("=")[0] in varying - {SEED_KEY}]
        seed = next((o.partition("=")[2] for o in overrides
                     if o.partition("=")[0] == SEED_KEY), None)
        trial = Trial(trial_name(overrides, varying), overrides,
                      ", ".join(shown) or "(the recipe)", Path(), seed=seed)
        try:
            trial.recipe = load_recipe(recipe_path, overrides)
        except RecipeError as err:
            problems.setdefault(str(err), []).append(trial)
        trials.append(trial)
    valid = [trial.recipe for trial in trials if trial.recipe is not None]
    folder = Path(output).expanduser() if output is not None else \
        sweep_folder(valid[0]) if valid else None
    if folder is not None:
        check_sweep_folder(folder, recipe_path, valid)
    metrics = sorted({recipe.eval.metric for recipe in valid})
    if len(metrics) > 1:
        problems[f"eval.metric differs between trials ({', '.join(metrics)}): the winner "
                 "is picked on one dev metric"] = []
    for problem in (dev_set_problem(axes, valid), soup_problem(valid) if soup else None):
        if problem is not None:
            problems[problem] = []
    for trial in trials:
        if trial.recipe is None or folder is None:
            continue
        trial.folder = folder / trial.name
        try:
            check_trial(trial, folder)
        except (RecipeError, DataError) as err:
            problems.setdefault(str(err), []).append(trial)
    if problems:
        lines = [f"{which(failing)}{problem}".replace("\n", "\n    ")
                 for problem, failing in problems.items()]
        raise RecipeError(f"{recipe_path}: {len(lines)} problem(s) in the sweep; no trial was "
                          "run:\n  " + "\n  ".join(lines))
    return Sweep(recipe_path, axes, folder, metrics[0], trials, run_test=run_test)


def dev_set_problem(axes: list[Axis], recipes: list[Recipe]) -> str | None:
    """Why ``recipes`` (the trials') would be ranked on different dev sets, naming the axis
    that varies a key of :data:`DEV_SET_KEYS` and its values; None: one dev set."""
    varying = [axis.key for axis in axes if len(axis.values) > 1]
    carved = any(recipe.data.dev_from_train is not None for recipe in recipes)
    for key in DEV_SET_KEYS:
        if key in CARVED_DEV_KEYS and not carved:
            continue  # a dev split read from the data: the same whatever these are
        values: list = []
        for recipe in recipes:
            value = getattr(recipe.data, key)
            if value not in values:
                values.append(value)
        if len(values) < 2:
            continue
        name = f"data.{key}"
        axis = next((a for a in varying if name == a or name.startswith(f"{a}.")),
                    ", ".join(varying))
        return (f"sweep axis {axis} changes the dev set ({name}: "
                f"{', '.join(map(repr, values))}): trials must be ranked on one dev set, and "
                "these would be scored on different dev queries, passages or grades; run one "
                "sweep per value (seeds vary freely: --seeds or training.seed)")
    return None


SOUP_KEYS = (("data", "with_title"), ("model", "max_seq_length"))
"""Beyond the dev set, what a soup's ingredients must share (how dev passages are encoded:
:func:`tapt.selection.soup.check_same_dev`)."""


def soup_problem(recipes: list[Recipe]) -> str | None:
    """Why the trials could not be souped (``--soup``), said before any trains; None: they
    can."""
    for section, key in SOUP_KEYS:
        values = list(dict.fromkeys(getattr(getattr(r, section), key) for r in recipes))
        if len(values) > 1:
            return (f"--soup: {section}.{key} differs between trials "
                    f"({', '.join(map(repr, values))}): a soup's ingredients must encode dev "
                    "alike; sweep it without --soup, or one sweep per value")
    return None


def which(trials: list[Trial]) -> str:
    """``trial NAME (overrides): `` for one trial; several with the same problem share it."""
    if not trials:
        return ""
    if len(trials) == 1:
        return f"trial {trials[0].name} ({' '.join(trials[0].overrides)}): "
    names = ", ".join(trial.name for trial in trials[:3])
    more = f" and {len(trials) - 3} more" if len(trials) > 3 else ""
    return f"{len(trials)} trials ({names}{more}): "


def check_trial(trial: Trial, folder: Path) -> None:
    """Give the trial its folder and check it: no push, a usable run folder; a finished run
    of the same recipe and inputs is read (status finished), a different one refused."""
    recipe = trial.recipe
    if recipe.hub.repo_id is not None:
        raise RecipeError("hub.repo_id: a sweep does not push its trials; push the winner "
                          "with tapt push")
    try:
        recipe.output_dir = str(trial.folder)  # validated on assignment
    except ValueError as err:
        raise RecipeError(f"--output {folder}: {err}") from None
    check_output_dir(recipe)
    run = RunDir(trial.folder)
    if not run_entries(run):
        return
    if run.final.is_dir():
        check_finished(trial, run)
    else:
        prepare_run_dir(recipe)  # resumes, takes over a run with no checkpoint, or refuses


def check_finished(trial: Trial, run: RunDir) -> None:
    """A finished trial: the same recipe and inputs (else refused), its results read."""
    recipe = trial.recipe
    if not run.recipe_file.is_file():
        raise RecipeError(f"{run.root} holds final/ but no recipe.yaml: not a tapt run")
    settings, inputs = run_changes(saved_recipe(run), recipe, input_fingerprint(recipe),
                                   run.recipe_file)
    if settings or inputs:
        raise RecipeError(f"{run.root} holds a finished run that differs in:\n  "
                          + "\n  ".join(settings + inputs)
                          + "\nmove it out, or choose another sweep folder (--output)")
    read_trial_results(trial, run)
    if trial.status != "finished":
        raise RecipeError(f"{run.results_file}: {trial.error}")


def read_trial_results(trial: Trial, run: RunDir) -> None:
    """Fill the trial's status, best step and dev/test metrics from ``results.json``."""
    try:
        results = json.loads(run.results_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        trial.status, trial.error = "failed", "no results.json (the run did not finish)"
        return
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(run.results_file, f"not a results file ({type(err).__name__})") \
            from None
    summary = results.get("summary") if isinstance(results, dict) else None
    if not isinstance(summary, dict) or results.get("status") != "finished":
        trial.status, trial.error = "failed", "results.json records no finished run"
        return
    best_step = results.get("best_step")
    problem = best_step_problem(best_step)
    if problem is not None:
        raise DataError(run.results_file, problem, field_name="best_step")
    trial.best_step = best_step
    dev_row = next((key for key in summary if key.startswith("best dev")), None)
    trial.dev = None if dev_row is None else checked_metrics(run.results_file, summary, dev_row)
    trial.test = (checked_metrics(run.results_file, summary, "TAPT test")
                  if "TAPT test" in summary else None)
    trial.status = "finished"


def checked_metrics(path: Path, summary: dict, row: str) -> dict[str, float]:
    """``summary[row]`` if it holds each of :data:`METRIC_KEYS` as a finite number in
    [0, 1] (what ranks the trials and picks the winner), else a DataError naming the field."""
    problem = metrics_row_problem(row, summary[row])
    if problem is not None:
        field, message = problem
        raise DataError(path, message, field_name=field)
    return summary[row]


def run_sweep(sweep: Sweep) -> SweepResult:
    """Run the pending trials of a checked plan, one after another; ``sweep.json`` is
    rewritten after each. Returns the ranking (see the module docstring)."""
    with run_lock(sweep.folder, **LOCK_WORDING):  # a second sweep here is refused
        if is_main_process():
            write_marker(sweep.folder, sweep.recipe_path)
        return _run_trials(sweep)


def _run_trials(sweep: Sweep) -> SweepResult:
    """:func:`run_sweep` once the sweep folder is locked."""
    from tapt.training import contrastive

    for trial in sweep.trials:  # finished by another sweep between the plan and the lock
        run = RunDir(trial.folder)
        if trial.status != "finished" and run.final.is_dir():
            check_finished(trial, run)
    write_state(sweep)
    for trial in sweep.trials:
        if trial.status == "finished":
            logger.info("trial %s: finished before, not rerun", trial.name)
            if sweep.run_test and trial.test is None:
                logger.warning("trial %s finished without --test: no test metrics (evaluate "
                               "%s with tapt eval)", trial.name, trial.folder / "final")
            continue
        logger.info("trial %s: %s", trial.name, " ".join(trial.overrides))
        trial.status, trial.error = "running", None
        write_state(sweep)
        try:
            contrastive.train(trial.recipe, run_test=sweep.run_test)
        except KeyboardInterrupt:
            trial.status = "interrupted"
            write_state(sweep)
            raise
        except Exception as err:  # a failed trial is a result; the next runs  # noqa: BLE001
            trial.status, trial.error = "failed", f"{type(err).__name__}: {err}"
            logger.error("trial %s failed: %s", trial.name, trial.error)
        else:
            if is_main_process():
                read_trial_results(trial, RunDir(trial.folder))
        free_memory()
        write_state(sweep)
    result = rank(sweep)
    write_state(sweep, result)
    if is_main_process():
        atomic_write_text(sweep.folder / REPORT_FILE, report_markdown(sweep, result))
    return result


def free_memory() -> None:
    """Drop the last trial's model before the next one loads (cycles, CUDA cache)."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def rank(sweep: Sweep) -> SweepResult:
    """Settings by mean dev metric over their finished seeds, best first (ties: grid
    order); settings with no finished trial last."""
    groups: dict[str, list[Trial]] = {}
    for trial in sweep.trials:
        groups.setdefault(trial.setting, []).append(trial)
    settings = []
    for label, trials in groups.items():
        done = [t for t in trials if t.status == "finished" and t.dev is not None
                and sweep.metric in t.dev]
        setting = Setting(label, len(trials), len(done))
        setting.dev_mean, setting.dev_std = _mean_std([t.dev[sweep.metric] for t in done])
        setting.test_mean, setting.test_std = _mean_std(
            [t.test[sweep.metric] for t in done if t.test and sweep.metric in t.test])
        settings.append(setting)
    order = sorted(range(len(settings)), key=lambda i: (settings[i].dev_mean is None,
                                                        -(settings[i].dev_mean or 0.0), i))
    settings = [settings[i] for i in order]
    winner = settings[0] if settings and settings[0].dev_mean is not None else None
    return SweepResult(sweep.folder, sweep.metric, sweep.trials, settings, winner,
                       close_call(settings))


def close_call(settings: list[Setting]) -> str | None:
    """A note when the winner leads the runner-up by less than a standard deviation over
    seeds (a few seeds and dev queries: such a lead is often noise)."""
    ranked = [s for s in settings if s.dev_mean is not None]
    if len(ranked) < 2:
        return None
    first, second = ranked[:2]
    spread = max(first.dev_std or 0.0, second.dev_std or 0.0)
    if spread and first.dev_mean - second.dev_mean < spread:
        return (f"the winner leads {second.setting} by {first.dev_mean - second.dev_mean:.4f}, "
                f"less than the seeds' standard deviation ({spread:.4f}): not a clear winner")
    return None


def write_state(sweep: Sweep, result: SweepResult | None = None) -> None:
    """``sweep.json``, atomically (main process only)."""
    if not is_main_process():
        return
    state = {"recipe": str(sweep.recipe_path), "metric": sweep.metric, "test": sweep.run_test,
             "grid": [{"key": axis.key, "values": list(axis.values)} for axis in sweep.axes],
             "trials": [trial.record() for trial in sweep.trials]}
    if result is not None:
        state["settings"] = [vars(setting) for setting in result.settings]
        state["winner"] = result.winner.setting if result.winner else None
        state["best_trial"] = result.best_trial.name if result.best_trial else None
        state["note"] = result.note
    atomic_write_json(sweep.folder / SWEEP_FILE, state)
