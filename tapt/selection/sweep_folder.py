"""Whose folder a sweep may write into: new, empty, or one a sweep created (it holds
:data:`MARKER_FILE`); never one in use by another sweep or one that is, holds or lies inside
an input. Used by :mod:`tapt.selection.sweep`.
"""

from __future__ import annotations

import json
from pathlib import Path

from tapt.recipe import Recipe, RecipeError
from tapt.run_folder.lock import LOCK_NAME, RunLockedError, live_holder, locked_message
from tapt.run_folder.start import input_paths
from tapt.util.files import atomic_write_json
from tapt.util.outputs import OutputOnInputError, check_apart

SWEEP_FILE = "sweep.json"
REPORT_FILE = "sweep.md"
MARKER_FILE = "tapt-sweep.json"
"""Written into a sweep folder when a sweep first takes it: the folder is a sweep's."""
LOCK_WORDING = {"label": "--output", "user": "tapt sweep or training"}


def check_sweep_folder(folder: Path, recipe_path: Path, recipes: list[Recipe]) -> None:
    """The sweep folder is not in use by another sweep, lies apart from every input (the
    recipe file, the trials' data and models), and is new, empty or a sweep's (see the
    module docstring); else a :class:`RecipeError` naming ``--output``."""
    if folder.exists() and not folder.is_dir():
        raise RecipeError(f"--output {folder} is a file, not a sweep folder")
    holder = live_holder(folder)
    if holder is not None:
        raise RunLockedError(locked_message(folder, holder, **LOCK_WORDING))
    inputs = [("recipe", recipe_path)]
    for recipe in recipes:
        inputs += [item for item in input_paths(recipe) if item not in inputs]
    try:
        check_apart([("--output", folder)], inputs)
    except OutputOnInputError as err:
        raise RecipeError(str(err)) from None
    foreign = foreign_entries(folder)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more"
                                          if len(foreign) > 5 else "")
        raise RecipeError(f"--output {folder} holds files that are no tapt sweep's ({shown}): "
                          "a sweep writes only into a new or empty folder, or one a sweep "
                          f"created (it holds {MARKER_FILE}); choose another --output")


def foreign_entries(folder: Path) -> list[str]:
    """What keeps a sweep out of ``folder``: everything but the lock file, unless the folder
    is a sweep's (it holds :data:`MARKER_FILE`)."""
    if not folder.is_dir():
        return []
    entries = sorted(path.name for path in folder.iterdir() if path.name != LOCK_NAME)
    if not entries:
        return []
    marker = folder / MARKER_FILE
    if marker.exists() or marker.is_symlink():
        if read_marker(marker):
            return []
        raise RecipeError(f"--output {folder}: {marker} is not a tapt sweep marker (tapt "
                          "writes it as a JSON object with \"tapt\": \"sweep\"); choose "
                          "another --output")
    return entries


def read_marker(path: Path) -> bool:
    """Whether ``path`` is a sweep marker tapt wrote (a JSON object, ``"tapt": "sweep"``)."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 4096:
            return False
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(record, dict) and record.get("tapt") == "sweep"


def write_marker(folder: Path, recipe_path: Path) -> None:
    """Mark ``folder`` as a sweep's (once; main process)."""
    if not (folder / MARKER_FILE).exists():
        atomic_write_json(folder / MARKER_FILE, {
            "tapt": "sweep", "recipe": str(recipe_path),
            "note": "this folder was created by tapt sweep; a sweep reuses only such a folder"})
