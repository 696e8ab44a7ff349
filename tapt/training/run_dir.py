"""A training run's folder: what it holds, whether it can resume, and refusing to mix runs.

Layout::

    OUTPUT/recipe.yaml        the resolved recipe (written before training starts)
    OUTPUT/checkpoints/       trainer checkpoints (best + last are kept; each is marked
                              complete once whole, and one a crash cut short is set
                              aside in OUTPUT/incomplete/ on resume)
    OUTPUT/metrics.jsonl      one line per dev evaluation
    OUTPUT/final/             the exported SentenceTransformer
    OUTPUT/results.json       zero-shot, best-checkpoint dev and test metrics
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tapt.recipe import DaptRecipe, Recipe, RecipeError
from tapt.training.arguments import is_main_process

logger = logging.getLogger(__name__)

FREE_SECTIONS = ("tracking", "hub", "output_dir", "export")
"""Sections that may change between a run and its resumption; any other change (model,
data, loss or objective, training, eval, ...) makes a different run."""


@dataclass(frozen=True)
class RunDir:
    root: Path

    @property
    def recipe_file(self) -> Path:
        return self.root / "recipe.yaml"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def metrics_file(self) -> Path:
        return self.root / "metrics.jsonl"

    @property
    def final(self) -> Path:
        return self.root / "final"

    @property
    def results_file(self) -> Path:
        return self.root / "results.json"

    def checkpoint_folders(self) -> list[Path]:
        """``checkpoints/checkpoint-N`` folders, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        return sorted((path for path in self.checkpoints.glob("checkpoint-*")
                       if path.is_dir() and checkpoint_step(path) is not None),
                      key=checkpoint_step)

    def incomplete_checkpoints(self) -> list[Path]:
        """Checkpoints a crash cut short: no completion marker (see :func:`mark_complete`),
        or an unreadable ``trainer_state.json``. A run from before the markers existed
        counts as complete where its trainer state reads."""
        folders = self.checkpoint_folders()
        legacy = not any((path / CHECKPOINT_MARKER).is_file() for path in folders)
        return [path for path in folders if not _complete(path, legacy)]

    def last_checkpoint(self) -> str | None:
        """The newest complete checkpoint, or None."""
        broken = set(self.incomplete_checkpoints())
        complete = [path for path in self.checkpoint_folders() if path not in broken]
        return str(complete[-1]) if complete else None


CHECKPOINT_MARKER = "tapt-complete.json"
"""Written into a checkpoint folder after everything else: the checkpoint is whole."""


def mark_complete(folder: Path, step: int) -> None:
    """Record that ``folder`` holds a whole checkpoint (its files and their sizes)."""
    from tapt.files import atomic_write_text

    files = {path.name: path.stat().st_size for path in sorted(folder.iterdir())
             if path.is_file()}
    atomic_write_text(folder / CHECKPOINT_MARKER, json.dumps({"step": step, "files": files}))


def _complete(folder: Path, legacy: bool) -> bool:
    try:
        json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        if legacy:
            return True
        marker = json.loads((folder / CHECKPOINT_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return all((folder / name).is_file() and (folder / name).stat().st_size == size
               for name, size in marker.get("files", {}).items())


def set_aside_incomplete(run: RunDir, folders: list[Path]) -> list[Path]:
    """Move ``folders`` (checkpoints a crash cut short, :meth:`RunDir.incomplete_checkpoints`)
    to ``OUTPUT/incomplete/`` (kept, not deleted, and out of the trainer's sight); returns
    where they went. Call on the main process."""
    moved = []
    for folder in folders:
        target = run.root / "incomplete" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        target.parent.mkdir(parents=True, exist_ok=True)
        folder.rename(target)
        moved.append(target)
    return moved


def checkpoint_step(path: str | Path | None) -> int | None:
    """The step of a trainer checkpoint folder (``checkpoint-N``), or None."""
    if not path:
        return None
    number = Path(path).name.rsplit("-", 1)[-1]
    return int(number) if number.isdigit() else None


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    found = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: {a!r} -> {b!r}")
    return found


def prepare_run_dir(recipe: Recipe | DaptRecipe, overwrite: bool = False
                    ) -> tuple[RunDir, str | None]:
    """Check ``recipe.output_dir`` and return it with the checkpoint to resume from.

    A new or empty folder starts a run; a folder holding the same run resumes from its
    last complete checkpoint (checkpoints cut short by a crash are set aside); a folder
    holding a different run, a finished run or anything else is an error, so nothing a
    user had is overwritten. With ``overwrite`` such a folder is moved aside
    (``OUTPUT.old-TIMESTAMP``) and a new run starts; the same unfinished run still resumes.
    """
    from tapt.redaction import redact_data

    run = RunDir(Path(recipe.output_dir))
    if overwrite:
        try:
            return prepare_run_dir(recipe)
        except RecipeError:
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:
                raise RecipeError(f"--overwrite moves {run.root} aside, which several "
                                  "processes cannot do at once: run it in one process, or "
                                  "move the folder yourself") from None
            aside = run.root.with_name(f"{run.root.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
            run.root.rename(aside)
            logger.warning("%s held another run: moved to %s", run.root, aside)
            return run, None
    current = redact_data(recipe.model_dump(mode="json"))  # as write_recipe records it
    if run.root.exists() and any(run.root.iterdir()):
        if not run.recipe_file.is_file():
            raise RecipeError(f"output_dir {run.root} is not empty and holds no tapt run "
                              "(no recipe.yaml); choose an empty or new folder")
        previous = yaml.safe_load(run.recipe_file.read_text(encoding="utf-8")) or {}
        sections = sorted((set(previous) | set(current)) - set(FREE_SECTIONS))
        changed = [line for section in sections
                   for line in _differences({section: previous.get(section)},
                                            {section: current.get(section)})]
        if changed:
            raise RecipeError(f"output_dir {run.root} holds a different run; it differs in:\n  "
                              + "\n  ".join(changed)
                              + "\nchoose another output_dir (override: output_dir=...)")
        if run.final.is_dir():
            raise RecipeError(f"output_dir {run.root} holds a finished run ({run.final}); "
                              "choose another output_dir to train again (or --overwrite to "
                              "move it aside), or evaluate it with "
                              f"tapt eval --model {run.final} --data ... --split test")
        incomplete = run.incomplete_checkpoints()
        for folder in incomplete:
            logger.warning("%s was cut short (no completion marker): it is skipped and the "
                           "previous complete checkpoint is used", folder)
        if is_main_process():
            set_aside_incomplete(run, incomplete)
        return run, run.last_checkpoint()
    return run, None


def write_recipe(run: RunDir, recipe: Recipe | DaptRecipe) -> None:
    """Record the resolved recipe, secrets redacted (tokens belong in the environment, but
    an override may carry one), atomically: other ranks never read half a recipe."""
    from tapt.files import atomic_write_text
    from tapt.recipe import recipe_to_yaml

    atomic_write_text(run.recipe_file, recipe_to_yaml(recipe), secrets=False)
