"""A training run's folder: what it holds, whether it can resume, and refusing to mix runs.

Layout::

    OUTPUT/recipe.yaml        the resolved recipe (written before training starts)
    OUTPUT/checkpoints/       trainer checkpoints (best + last are kept)
    OUTPUT/metrics.jsonl      one line per dev evaluation
    OUTPUT/final/             the exported SentenceTransformer
    OUTPUT/results.json       zero-shot, best-checkpoint dev and test metrics
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from tapt.recipe import DaptRecipe, Recipe, RecipeError, recipe_to_yaml

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

    def last_checkpoint(self) -> str | None:
        """The newest complete checkpoint (one killed mid-save lacks trainer_state.json)."""
        if not self.checkpoints.is_dir():
            return None
        complete = [path for path in self.checkpoints.glob("checkpoint-*")
                    if checkpoint_step(path) is not None
                    and (path / "trainer_state.json").is_file()]
        if not complete:
            return None
        return str(max(complete, key=checkpoint_step))


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


def prepare_run_dir(recipe: Recipe | DaptRecipe) -> tuple[RunDir, str | None]:
    """Check ``recipe.output_dir`` and return it with the checkpoint to resume from.

    A new or empty folder starts a run; a folder holding the same run resumes from its
    last checkpoint; a folder holding a different run, a finished run or anything else is
    an error, so nothing a user had is overwritten.
    """
    run = RunDir(Path(recipe.output_dir))
    current = recipe.model_dump(mode="json")
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
                              "choose another output_dir to train again, or evaluate it with "
                              f"tapt eval --model {run.final} --data ... --split test")
        return run, run.last_checkpoint()
    return run, None


def write_recipe(run: RunDir, recipe: Recipe | DaptRecipe) -> None:
    """Record the resolved recipe (it holds no secrets: tokens come from the environment)."""
    run.root.mkdir(parents=True, exist_ok=True)
    partial = run.recipe_file.with_suffix(".yaml.tmp")
    partial.write_text(recipe_to_yaml(recipe), encoding="utf-8")
    partial.replace(run.recipe_file)  # atomic: other ranks never read half a recipe
