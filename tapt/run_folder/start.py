"""How a training run takes its output folder: check it, lock it, then start, resume, take
over, move aside or refuse; and, as the run's first write, set the folder up.

The rules (nothing a user had is moved, overwritten or deleted unless it is a tapt run
folder and ``--overwrite`` was given):

- ``output_dir`` must not be, hold or lie inside an input: the data (``data.path``,
  ``data.mined_negatives``, DAPT's ``data.files`` and ``data.dev_data``) or a local model
  folder. Checked before anything is written.
- One training at a time per folder (:mod:`tapt.run_folder.lock`).
- A new or empty folder starts a run.
- The same run (the recipe outside :data:`FREE_SECTIONS` and the inputs' fingerprint,
  :mod:`tapt.run_folder.input_fingerprint`) resumes from its last complete checkpoint; checkpoints
  a crash cut short are set aside in ``OUTPUT/incomplete/``. A ``recipe.yaml`` whose
  fingerprint is missing or damaged is refused: whether the inputs changed cannot be told.
- A run that never completed a checkpoint (and has no ``final/``) holds nothing a changed
  recipe or changed inputs could mix with: it is taken over, with a warning that names the
  changes; its files are kept in ``OUTPUT/incomplete/superseded-TIMESTAMP/``.
- Anything else (a different or finished run, a non-empty folder that is no tapt run) is
  refused. With ``overwrite``, a tapt run folder (tapt's ``recipe.yaml``, only run files)
  that is not the current directory or above it, nor a symbolic link, is moved aside to
  ``OUTPUT.old-TIMESTAMP``; the same unfinished run still resumes. (The rule every
  ``--overwrite`` follows, :mod:`tapt.util.folder_replace`: a run folder is moved aside,
  never deleted, so one whose ``recipe.yaml`` cannot be checked is moved too.)

Example::

    with open_run_dir(recipe) as start:
        ...  # load data and model: nothing is written yet
        run, resume_from = start.begin(recipe)  # the first write: recipe.yaml
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tapt.encoders.model_paths import resolve_model_path
from tapt.recipe import DaptRecipe, Recipe, RecipeError, recipe_record
from tapt.run_folder.input_fingerprint import compare, input_fingerprint, recorded_problem
from tapt.run_folder.layout import FINGERPRINT_KEY, RunDir, set_aside_incomplete, write_recipe
from tapt.run_folder.lock import LOCK_NAME, RunLock, run_lock
from tapt.util import folder_replace
from tapt.util.files import STAGING_OWNER_SUFFIX
from tapt.util.outputs import OutputOnInputError, check_apart, resolved
from tapt.util.process_group import is_main_process, launched

logger = logging.getLogger(__name__)

FREE_SECTIONS = ("tracking", "hub", "output_dir", "export")
"""Sections that may change between a run and its resumption; any other change (model,
data, loss or objective, training, eval, ...) makes a different run."""

RUN_ENTRIES = {"recipe.yaml", "checkpoints", "metrics.jsonl", "final", "final.partial",
               f"final.partial{STAGING_OWNER_SUFFIX}", "results.json", "test.json", "incomplete",
               LOCK_NAME}
"""What a tapt run folder holds (besides ``tapt report`` output and PNGs)."""
PARTIAL = re.compile(r"\..+\.\d+\.partial")
"""A file :func:`tapt.util.files.atomic_write_text` was writing when a crash came."""


@dataclass
class RunStart:
    """What :func:`prepare_run_dir` decided; nothing is written until :meth:`begin`."""

    run: RunDir
    resume_from: str | None = None
    fingerprint: dict = field(default_factory=dict)
    incomplete: list[Path] = field(default_factory=list)
    supersede: bool = False
    """Set the files of a run with no complete checkpoint aside, then start anew."""
    move_aside: bool = False
    """``--overwrite``: rename the whole folder to ``OUTPUT.old-TIMESTAMP``, then start."""
    lock: RunLock | None = None

    def begin(self, recipe: Recipe | DaptRecipe) -> tuple[RunDir, str | None]:
        """The run's first write (main process): what was decided is done to the folder,
        then ``recipe.yaml`` (with the fingerprint) is recorded. Returns the run and the
        checkpoint to resume from."""
        if is_main_process():
            if self.move_aside:
                root = self.run.root.resolve()
                aside = folder_replace.aside_path(root, time.strftime("%Y%m%d-%H%M%S"))
                root.rename(aside)
                logger.warning("%s held another run: moved to %s", self.run.root, aside)
                if self.lock is not None:
                    self.lock.moved(aside)
                else:
                    self.run.root.mkdir()
            if self.supersede:
                kept = supersede(self.run)
                logger.warning("the files of the run it held are kept in %s", kept)
            set_aside_incomplete(self.run, self.incomplete)
            write_recipe(self.run, recipe, self.fingerprint)
        if self.resume_from:
            logger.info("resuming from %s", self.resume_from)
        return self.run, self.resume_from


@contextlib.contextmanager
def open_run_dir(recipe: Recipe | DaptRecipe, overwrite: bool = False
                 ) -> Iterator[RunStart]:
    """Check ``output_dir``, lock it (rank 0) and decide how the run starts there; the lock
    is held until the block ends. A folder the lock created and the run left empty (a
    failure before :meth:`RunStart.begin`) is removed again."""
    check_output_dir(recipe)
    with run_lock(recipe.output_dir) as lock:
        start = prepare_run_dir(recipe, input_fingerprint(recipe), overwrite=overwrite)
        start.lock = lock
        yield start


def input_paths(recipe: Recipe | DaptRecipe) -> list[tuple[str, Path]]:
    """(recipe key, resolved path) of every local input the recipe reads."""
    data = recipe.data
    found = [("model.name", resolve_model_path(recipe.model.name) if recipe.model.name else ""),
             ("model.family_module", recipe.model.family_module)]
    if isinstance(recipe, DaptRecipe):
        found += [("data.path", data.path), ("data.dev_data", data.dev_data)]
        found += [("data.files", name) for name in data.files]
    else:
        found += [("data.path", data.path), ("data.mined_negatives", data.mined_negatives),
                  ("loss.teacher_scores", recipe.loss.teacher_scores),
                  ("eval.guard_data", recipe.eval.guard_data)]
    return [(key, Path(name).resolve()) for key, name in found
            if name and Path(name).exists()]  # "" would be the current directory


def check_output_dir(recipe: Recipe | DaptRecipe,
                     recipe_file: str | os.PathLike | None = None) -> None:
    """Refuse an ``output_dir`` that is a file, that is, holds or lies inside an input (a
    run writes checkpoints, metrics and an export there), whose path holds a secret, or
    that holds ``recipe_file`` (the recipe given), unless that is the run's own record
    ``OUTPUT/recipe.yaml`` (which a resumed run rewrites) (:func:`tapt.util.outputs.check_apart`).
    """
    given = Path(recipe.output_dir)
    if given.exists() and not given.is_dir():
        raise RecipeError(f"output_dir {given} is a file, not a folder; choose a new folder")
    inputs: list[tuple[str, str | os.PathLike]] = list(input_paths(recipe))
    if recipe_file is not None and not is_run_record(Path(recipe_file), given):
        inputs.append(("recipe", recipe_file))
    try:
        check_apart([("output_dir", given)], inputs)
    except OutputOnInputError as err:
        raise RecipeError(f"{err} (a run writes checkpoints, metrics and an export into its "
                          "output_dir; choose a folder outside the data and the model)") \
            from None


def is_run_record(recipe_file: Path, output_dir: Path) -> bool:
    """``recipe_file`` is ``output_dir``'s own ``recipe.yaml`` as tapt wrote it (it records
    the inputs' fingerprint): resuming from it rewrites tapt's record, not a user's file."""
    if resolved(recipe_file) != resolved(RunDir(output_dir).recipe_file):
        return False
    try:
        saved = yaml.safe_load(recipe_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return False
    return isinstance(saved, dict) and isinstance(saved.get(FINGERPRINT_KEY), dict)


def run_entries(run: RunDir) -> list[str]:
    """What the folder holds, the lock file left out."""
    if not run.root.is_dir():
        return []
    return sorted(path.name for path in run.root.iterdir() if path.name != LOCK_NAME)


def run_entry(name: str) -> bool:
    """Whether an entry named ``name`` is part of a tapt run folder."""
    return (name in RUN_ENTRIES or bool(PARTIAL.fullmatch(name)) or name.startswith("report")
            or name.endswith(".png"))


def foreign_entries(run: RunDir) -> list[str]:
    """Entries that are no part of a tapt run folder."""
    if not run.root.is_dir():
        return []
    return folder_replace.foreign_entries(run.root, run_entry)


def saved_recipe(run: RunDir) -> dict:
    """The run's ``recipe.yaml`` as data; a file that is no tapt record is refused."""
    try:
        saved = yaml.safe_load(run.recipe_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError) as err:
        raise RecipeError(f"output_dir {run.root}: cannot read {run.recipe_file} "
                          f"({type(err).__name__}); it holds no tapt run tapt can check: "
                          "choose an empty or new folder") from None
    if not isinstance(saved, dict) or not {"model", "data", "output_dir"} <= set(saved):
        raise RecipeError(f"output_dir {run.root}: {run.recipe_file} is not the record of a "
                          "tapt run (no model, data and output_dir); choose an empty or new "
                          "folder")
    return saved


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return found


def run_changes(previous: dict, recipe: Recipe | DaptRecipe, fingerprint: dict,
                where: Path) -> tuple[list[str], list[str]]:
    """How the recorded run differs from this recipe, and from these inputs: one line
    per change, e.g. ``training.seed: 7 -> 8``, ``data: qrels/dev.tsv changed (...)``."""
    current = recipe_record(recipe)  # as write_recipe records it
    sections = sorted((set(previous) | set(current)) - set(FREE_SECTIONS) - {FINGERPRINT_KEY})
    changed = [line for section in sections
               for line in _differences({section: previous.get(section)},
                                        {section: current.get(section)})]
    recorded = previous.get(FINGERPRINT_KEY)
    if not isinstance(recorded, dict):
        field = f"{FINGERPRINT_KEY}: " + ("missing" if recorded is None else
                                          f"expected an object, got {recorded!r}")
    else:
        problem = recorded_problem(recorded)
        field = None if problem is None else f"{FINGERPRINT_KEY}.{problem}"
    if field is not None:
        raise RecipeError(f"{where}: field '{field}': the record of the run's inputs is "
                          "missing or damaged, so a resume cannot tell whether its data "
                          "changed; restore the file, or move the run folder aside and start "
                          "again")
    return changed, compare(recorded, fingerprint)


def prepare_run_dir(recipe: Recipe | DaptRecipe, fingerprint: dict | None = None,
                    overwrite: bool = False) -> RunStart:
    """Decide how the run starts in ``recipe.output_dir`` (see the module docstring);
    reads only. ``fingerprint``: the inputs' (computed when not given). Raises
    :class:`RecipeError` for a folder the run must not use."""
    if fingerprint is None:
        fingerprint = input_fingerprint(recipe)
    run = RunDir(Path(recipe.output_dir))
    if not run_entries(run):
        return RunStart(run, fingerprint=fingerprint)
    if not run.recipe_file.is_file():
        raise RecipeError(f"output_dir {run.root} is not empty and holds no tapt run "
                          "(no recipe.yaml)" + ("; --overwrite moves only tapt run folders"
                                                if overwrite else "")
                          + "; choose an empty or new folder")
    try:
        settings, inputs = run_changes(saved_recipe(run), recipe, fingerprint,
                                       run.recipe_file)
    except RecipeError:
        if not overwrite:
            raise
        check_movable(run)  # a run whose record cannot be read: moved aside, as asked
        return RunStart(run, None, fingerprint, move_aside=True)
    changed = settings + inputs
    finished = run.final.is_dir()
    incomplete = run.incomplete_checkpoints()
    last = run.last_checkpoint(incomplete)
    if not changed and not finished:
        for folder in incomplete:
            logger.warning("%s was cut short or changed since it was saved (no completion "
                           "marker, or files that differ from it): it is skipped and the "
                           "previous complete checkpoint is used", folder)
        return RunStart(run, last, fingerprint, incomplete=incomplete)
    if changed and last is None and not finished:
        check_run_folder(run, "take it over")
        logger.warning("%s holds a run that never completed a checkpoint and differs in:\n  "
                       "%s\nstarting this run there instead", run.root, "\n  ".join(changed))
        return RunStart(run, None, fingerprint, supersede=True)
    if overwrite:
        check_movable(run)
        return RunStart(run, None, fingerprint, move_aside=True)
    if changed:
        raise RecipeError(f"output_dir {run.root} holds a different run; it differs in:\n  "
                          + "\n  ".join(changed)
                          + "\nchoose another output_dir (override: output_dir=...)"
                          + (", or restore the changed inputs" if inputs else ""))
    raise RecipeError(f"output_dir {run.root} holds a finished run ({run.final}); "
                      "choose another output_dir to train again (or --overwrite to "
                      "move it aside), or evaluate it with "
                      f"tapt eval --model {run.final} --data ... --split test")


def check_run_folder(run: RunDir, action: str) -> None:
    """Refuse to ``action`` a folder that holds more than a tapt run."""
    foreign = foreign_entries(run)
    if foreign:
        raise RecipeError(f"output_dir {run.root} holds files that are no part of a tapt run "
                          f"({folder_replace.shown(foreign)}); tapt does not {action}: choose "
                          "another output_dir, or move those files out")


def check_movable(run: RunDir) -> None:
    """``--overwrite`` moves only a tapt run folder, in one process, and never the current
    directory or a folder above it, nor through a symbolic link (the link's folder would be
    moved and the link left dangling where the new run must start)."""
    if launched():
        raise RecipeError(f"--overwrite moves {run.root} aside, which several processes "
                          "cannot do at once: run it in one process, or move the folder "
                          "yourself")
    linked = folder_replace.symlink_refusal("output_dir", run.root)
    if linked is not None:
        raise RecipeError(linked)
    root, here = run.root.resolve(), Path.cwd().resolve()
    if root == here or root in here.parents:
        raise RecipeError(f"output_dir {run.root} is the current directory or above it: "
                          "--overwrite does not move it; choose another output_dir")
    check_run_folder(run, "move it aside (--overwrite)")


def supersede(run: RunDir) -> Path:
    """Move every file of a run that never completed a checkpoint into
    ``OUTPUT/incomplete/superseded-TIMESTAMP/``; returns that folder."""
    target = run.root / "incomplete" / f"superseded-{time.strftime('%Y%m%d-%H%M%S')}"
    target.mkdir(parents=True, exist_ok=True)
    for name in run_entries(run):
        if name != "incomplete":
            (run.root / name).rename(target / name)
    return target
