"""What every ``tapt`` command checks in its options before it loads anything.

- The argparse number types: every numeric flag of every command uses one of
  :data:`NUMBER_TYPES`, built from :mod:`tapt.bounds`, so ``--batch-size 0``, ``--k1 nan`` or
  ``--rrf-k inf`` stop at parsing with ``argument --k1: must be ...`` (exit code 2).
- :func:`check_outputs`: every output path a command will write is checked before the
  model or the data loads (an existing file without ``--overwrite``, a folder in the way,
  a parent that is a file, a folder that cannot be written).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from tapt import bounds


def number_type(bound: bounds.Bound, name: str, *, none: str | None = None) -> Callable:
    """An argparse ``type`` for ``bound``; ``none``: a word (e.g. ``none``) that means None."""

    def parse(text: str):
        if none is not None and text.strip().lower() == none:
            return None
        try:
            return bound.parse(text, "value")
        except ValueError:
            extra = f" or '{none}'" if none is not None else ""
            raise argparse.ArgumentTypeError(
                f"must be {bound.description}{extra}, got {text!r}") from None

    parse.__name__ = name  # argparse names the type in some of its messages
    parse.bound = bound  # type: ignore[attr-defined]
    return parse


positive_int = number_type(bounds.POSITIVE_INT, "positive_int")
non_negative_int = number_type(bounds.NON_NEGATIVE_INT, "non_negative_int")
seed = number_type(bounds.SEED, "seed")
positive_float = number_type(bounds.POSITIVE_FLOAT, "positive_float")
non_negative_float = number_type(bounds.NON_NEGATIVE_FLOAT, "non_negative_float")
fraction = number_type(bounds.FRACTION, "fraction")
open_fraction = number_type(bounds.OPEN_FRACTION, "open_fraction")
margin_or_none = number_type(bounds.MARGIN, "margin_or_none", none="none")
finite_float = number_type(bounds.FINITE_FLOAT, "finite_float")



def relevant_from(text: str) -> int | str:
    """``--relevant-from``: ``auto`` or a grade >= 1 (see
    :func:`tapt.data.relevance.parse_relevant_from`)."""
    from tapt.data.relevance import parse_relevant_from

    try:
        return parse_relevant_from(text.strip().lower())
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


NUMBER_TYPES = (positive_int, non_negative_int, seed, positive_float, non_negative_float,
                fraction, open_fraction, margin_or_none, finite_float, relevant_from)
"""The only ``type=`` a numeric flag may have (a test walks the parser tree)."""


def check_outputs(paths: Iterable[tuple[str, Path | None]], *, overwrite: bool = True) -> None:
    """Refuse, before any work, outputs that could not be written at the end.

    ``paths``: (flag, path) pairs; ``None`` paths are skipped. A missing parent folder is
    fine (writers create it) when its nearest existing ancestor is a writable folder.
    ``overwrite=False`` refuses existing files. Raises ``FileExistsError`` or
    ``NotADirectoryError`` / ``IsADirectoryError`` / ``PermissionError`` naming the flag and
    the path.
    """
    seen: dict[Path, str] = {}
    for flag, path in paths:
        if path is None:
            continue
        path = Path(path).expanduser()
        key = Path(os.path.abspath(path))
        if key in seen:
            raise ValueError(f"{flag} {path}: the same file as {seen[key]}")
        seen[key] = flag
        if path.is_dir():
            raise IsADirectoryError(f"{flag} {path}: is a folder; give a file name")
        if path.exists() or path.is_symlink():
            if not overwrite:
                raise FileExistsError(f"{flag} {path}: exists; pass --overwrite to replace it")
            if path.exists() and not os.access(path, os.W_OK):
                raise PermissionError(f"{flag} {path}: exists and cannot be written")
        check_folder(flag, path.parent, shown=path)


def check_folder(flag: str, folder: Path, *, shown: Path | None = None) -> None:
    """``folder`` exists and is writable, or can be created in its nearest existing
    ancestor; else an error naming ``flag`` and ``shown`` (default: ``folder``)."""
    shown = folder if shown is None else shown
    ancestor = Path(os.path.abspath(Path(folder).expanduser()))
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise NotADirectoryError(f"{flag} {shown}: {ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(f"{flag} {shown}: cannot write in {ancestor}")
