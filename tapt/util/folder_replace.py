"""The one rule for ``--overwrite``: which existing folder tapt replaces, and how.

Every command that writes a folder in one piece (``tapt export``, ``tapt merge``, ``tapt
soup`` and the soup of ``tapt sweep --soup``) goes through :func:`check_replaceable`
before any work and :func:`replace_folder` at the end; a training run's ``output_dir``
(``tapt train``, ``tapt dapt``, a sweep's trials) is moved aside instead of deleted
(:mod:`tapt.run_folder.start`), under the same :func:`foreign_entries` and
:func:`symlink_refusal`. The rule:

- An output path that is itself a symbolic link is refused before any work, naming where
  it points: replacing it would swap the link for a folder and leave the folder it named
  (or, renamed aside, fail to remove it); give the folder itself.
- An existing folder is replaced only with ``--overwrite``, and only when its record (each
  kind of folder supplies a :class:`FolderRecord`: a serving export's checked
  ``tapt_export.json``, a merge's ``tapt_preset.json`` and ``merge.json``) reads back
  checked, and the folder holds nothing that record does not account for besides the
  card and licence tapt writes beside it (:data:`BESIDE`). Anything else is refused,
  naming what is in the way: a user's ``src/``, notes or benchmark results put beside a
  real export are never deleted.
- The new folder is staged beside the output and renamed into place; the old one is
  checked again (it may have changed while the model loaded), moved aside, put back if the
  rename fails, and removed once the new one is in place. A failure to remove it is a
  warning naming where it was left: the result is published.
- Ctrl-C during that commit waits until it is done (:func:`interrupts_held`), so the
  output is never left half swapped; the interrupt then goes on as usual, and
  :func:`published` tells the command line that its result was complete before it came.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tapt.util.files import publish

logger = logging.getLogger(__name__)

BESIDE = frozenset({"README.md", "LICENSE"})
"""Files tapt writes beside a folder's record and does not list in it (a user may edit
them): replaced with the folder."""
SHOWN = 5
"""Foreign entries a refusal names (then "and N more")."""

_PUBLISHED: list[Path] = []


@dataclass(frozen=True)
class FolderRecord:
    """How a kind of folder tapt writes says what it holds.

    Attributes:
        kind: What the folder is, for messages (``tapt export``).
        file: Its record's file name (``tapt_export.json``), which must be in the folder.
        entries: Reads the record of a folder, checked, and returns the names of the
            folder's entries it accounts for (the record file included); raises
            ``ValueError`` or ``OSError`` saying why the record is not one tapt wrote.
    """

    kind: str
    file: str
    entries: Callable[[Path], Collection[str]]


def shown(names: Sequence[str]) -> str:
    """``a, b, c`` (the first :data:`SHOWN`, then ``and N more``)."""
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f" and {more} more" if more > 0 else "")


def foreign_entries(folder: Path, accounted: Callable[[str], bool]) -> list[str]:
    """The entries of ``folder`` (sorted names) that ``accounted`` does not account for."""
    return sorted(name for name in os.listdir(folder) if not accounted(name))


def symlink_refusal(flag: str, path: Path) -> str | None:
    """Why ``path`` (given as ``flag``) cannot be replaced or moved: it is a symbolic link
    (None when it is not)."""
    if not path.is_symlink():
        return None
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (f"{flag} {path} is a symbolic link (to {target}): tapt does not replace or "
            f"move through a link (the link would be swapped for a folder and the folder it "
            f"names left behind); give the folder itself ({path.resolve()})")


def refusal(output: Path, record: FolderRecord) -> str | None:
    """Why ``--overwrite`` must not replace the existing ``output`` (the module docstring's
    rule), or None when it may."""
    linked = symlink_refusal("--output", output)
    if linked is not None:
        return linked
    if not output.is_dir():
        return f"--output {output}: exists and is not a folder"
    advice = "so --overwrite does not replace it; choose another folder"
    if not (output / record.file).is_file():
        return f"--output {output}: not a {record.kind} (no {record.file}), {advice}"
    try:
        listed = set(record.entries(output))
    except (OSError, ValueError) as err:
        return (f"--output {output}: not a {record.kind}: its {record.file} does not read "
                f"back as tapt wrote it ({err}), {advice}")
    foreign = foreign_entries(output, lambda name: name in listed or name in BESIDE)
    if foreign:
        return (f"--output {output}: holds {shown(foreign)} beside the {record.kind} its "
                f"{record.file} records; --overwrite replaces only a folder that holds "
                "nothing else (but README.md and LICENSE), so nothing was written: move "
                "those out, or choose another folder")
    return None


def check_replaceable(output: Path, *, overwrite: bool, error: type[Exception],
                      record: FolderRecord) -> None:
    """Before any work: a missing ``output`` passes; a symbolic link is refused
    (``error``); an existing one needs ``overwrite`` (:class:`FileExistsError`) and must
    pass :func:`refusal` (``error``; :class:`NotADirectoryError` for a file)."""
    output = Path(output)
    linked = symlink_refusal("--output", output)
    if linked is not None:
        raise error(linked)
    if not output.exists():
        return
    if not output.is_dir():
        raise NotADirectoryError(f"--output {output}: exists and is not a folder")
    if not overwrite:
        raise FileExistsError(f"--output {output}: exists; pass --overwrite to replace it "
                              f"(only a {record.kind} that holds nothing else is replaced)")
    problem = refusal(output, record)
    if problem is not None:
        raise error(problem)


def aside_path(path: Path, tag: str) -> Path:
    """A free name beside ``path`` to move it to: ``NAME.old-TAG`` (``-2``, ``-3``, ... when
    taken)."""
    candidate, number = path.with_name(f"{path.name}.old-{tag}"), 1
    while candidate.exists() or candidate.is_symlink():
        number += 1
        candidate = path.with_name(f"{path.name}.old-{tag}-{number}")
    return candidate


def replace_folder(staging: Path, output: Path, *, overwrite: bool, record: FolderRecord,
                   error: type[Exception]) -> Path:
    """Publish the finished ``staging`` folder as ``output`` and return ``output``; with
    ``overwrite``, an existing ``output`` that still passes :func:`refusal` is replaced
    (the module docstring). A refusal (``error``) or a clash leaves the new folder in
    ``staging`` and says so."""
    output = Path(output)
    with interrupts_held():
        if output.exists() or output.is_symlink():
            if not overwrite:
                raise FileExistsError(f"{output} exists; the new folder stays in {staging}")
            problem = refusal(output, record)  # checked before loading; it may have changed
            if problem is not None:
                raise error(f"{problem}; the new folder stays in {staging}")
            aside = aside_path(output, str(os.getpid()))
            output.replace(aside)
            try:
                publish(staging, output)
            except BaseException:
                aside.replace(output)
                raise
            try:
                shutil.rmtree(aside)
            except OSError as err:
                logger.warning("%s is in place; the folder it replaced could not be removed "
                               "(%s) and is left in %s: remove it yourself", output,
                               err.strerror or err, aside)
        else:
            publish(staging, output)
        _PUBLISHED.append(output)
    return output


def published() -> list[Path]:
    """The folders :func:`replace_folder` published in this process since
    :func:`forget_published`, in order."""
    return list(_PUBLISHED)


def forget_published() -> None:
    """Start a new command: :func:`published` is empty again."""
    _PUBLISHED.clear()


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Inside, SIGINT (Ctrl-C) waits: a few renames and a removal that must not stop half
    way. When the block ends, a SIGINT that came goes to the handler that was there before
    (``KeyboardInterrupt`` under Python's). Only the main thread receives signals and can
    set a handler; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and callable(previous):
            previous(signal.SIGINT, None)
        elif held and previous == signal.SIG_DFL:
            raise KeyboardInterrupt


__all__ = ["BESIDE", "FolderRecord", "aside_path", "check_replaceable", "foreign_entries",
           "forget_published", "interrupts_held", "published", "refusal", "replace_folder",
           "symlink_refusal"]
