"""A training run's folder: what it holds and which checkpoint it can resume from (how a
run takes the folder, resumes or refuses it: :mod:`tapt.run_folder.start`).

Layout::

    OUTPUT/recipe.yaml        the resolved recipe and its inputs' fingerprint (written
                              before training starts, after the model loaded)
    OUTPUT/tapt.lock          while a training runs: its pid and host
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
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tapt.recipe import DaptRecipe, Recipe, recipe_to_yaml
from tapt.util.digests import file_record, mismatch
from tapt.util.files import atomic_write_json, atomic_write_text

logger = logging.getLogger(__name__)

FINGERPRINT_KEY = "fingerprint"
"""The key of ``recipe.yaml`` that records the inputs' fingerprint (not a recipe setting)."""


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
        """``checkpoints/checkpoint-N`` folders, oldest first, in the order the trainer
        rotates them (transformers' ``sort_checkpoints``; a name that only starts like one,
        ``checkpoint-12-old``, is not a checkpoint). tapt resumes from the newest *whole*
        one (:meth:`last_checkpoint`), where ``get_last_checkpoint`` takes the newest folder
        whether whole or not."""
        from transformers.trainer_utils import sort_checkpoints

        if not self.checkpoints.is_dir():
            return []
        return [Path(path) for path in sort_checkpoints(str(self.checkpoints))
                if checkpoint_step(path) is not None]

    def incomplete_checkpoints(self) -> list[Path]:
        """Checkpoints a crash cut short or that changed since: no completion marker (see
        :func:`mark_complete`), an unreadable ``trainer_state.json``, or a marker whose
        record of a file is not a digest record or differs from the file in size or
        content (one pass over each file)."""
        return [path for path in self.checkpoint_folders() if not _complete(path)]

    def last_checkpoint(self, incomplete: list[Path] | None = None) -> str | None:
        """The newest complete checkpoint, or None; ``incomplete``: what
        :meth:`incomplete_checkpoints` gave, when known (it reads every file)."""
        broken = set(self.incomplete_checkpoints() if incomplete is None else incomplete)
        complete = [path for path in self.checkpoint_folders() if path not in broken]
        return str(complete[-1]) if complete else None


CHECKPOINT_MARKER = "tapt-complete.json"
"""Written into a checkpoint folder after everything else: the checkpoint is whole."""


def mark_complete(folder: Path, step: int) -> None:
    """Record that ``folder`` holds a whole checkpoint: each file's (subfolders' included,
    by relative path) size and content digest
    (:func:`tapt.util.digests.file_record`, one pass over each), checked before it is resumed."""
    files = {path.relative_to(folder).as_posix(): file_record(path)
             for path in sorted(folder.rglob("*"))  # 1_Pooling/, 2_Dense/: modules too
             if path.is_file() and path.relative_to(folder).as_posix() != CHECKPOINT_MARKER}
    atomic_write_json(folder / CHECKPOINT_MARKER, {"step": step, "files": files}, indent=None)


def _complete(folder: Path) -> bool:
    try:
        json.loads((folder / "trainer_state.json").read_text(encoding="utf-8"))
        marker = json.loads((folder / CHECKPOINT_MARKER).read_text(encoding="utf-8"))
        files = marker.get("files")
    except (OSError, ValueError, AttributeError):
        return False
    if not isinstance(files, dict) or not files:
        return False
    for name, record in files.items():
        if not isinstance(name, str) or Path(name).is_absolute() or ".." in Path(name).parts:
            return False  # no file of this checkpoint
        problem = mismatch(folder / name, record)
        if problem is not None:
            logger.warning("%s: %s %s; the checkpoint counts as incomplete (it is neither "
                           "resumed nor averaged)", folder, name, problem)
            return False
    return True


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


def write_recipe(run: RunDir, recipe: Recipe | DaptRecipe, fingerprint: dict) -> None:
    """Record the resolved recipe, secrets redacted (tokens belong in the environment, but
    an override may carry one), and the inputs' ``fingerprint``
    (:mod:`tapt.run_folder.input_fingerprint`) under :data:`FINGERPRINT_KEY`, atomically: other
    ranks never read half a recipe. The file still loads as a recipe (``load_recipe``
    ignores the fingerprint)."""
    text = recipe_to_yaml(recipe) + yaml.safe_dump({FINGERPRINT_KEY: fingerprint},
                                                   sort_keys=False)
    atomic_write_text(run.recipe_file, text, secrets=False)
