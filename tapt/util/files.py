"""Writing files and folders so that a crash or a full disk never leaves half of one.

Every result file tapt writes goes to a temporary name next to its target and is renamed
into place (atomic on POSIX filesystems); exports are written into a staging folder that
is renamed at the end. Before writing a checkpoint or an export, the free space is checked
against the size about to be written.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from tapt.util.redaction import redact, redact_data

logger = logging.getLogger(__name__)


class DiskSpaceError(OSError):
    """Not enough free space for what tapt is about to write."""


def atomic_write_text(path: str | os.PathLike, text: str, *, secrets: bool = True) -> Path:
    """Write ``text`` to ``path`` atomically; ``secrets``: redact it as free text (a model
    card, a report: token shapes too). Structured data goes through :func:`atomic_write_json`
    (or :func:`tapt.util.redaction.redact_data` and ``secrets=False``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(redact(text) if secrets else text, encoding="utf-8")
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def atomic_write_json(path: str | os.PathLike, data, *, indent: int | None = 2,
                      lines: bool = False) -> Path:
    """Write ``data`` as JSON (``lines``: a list of records, one JSON line each) to ``path``
    atomically, the exact values of known secrets redacted (:func:`redact_data`): ids and
    keys that merely look like tokens are kept."""
    data = redact_data(data, where=str(path))
    text = ("".join(json.dumps(record) + "\n" for record in data) if lines
            else json.dumps(data, indent=indent) + "\n")
    return atomic_write_text(path, text, secrets=False)


def atomic_write_lines(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Stream ``records`` to ``path`` as JSON lines, each redacted as
    :func:`atomic_write_json` redacts, into a temporary name renamed into place at the end
    (a crash leaves no half file); only one record is held at a time. Returns how many
    lines were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    count = 0
    try:
        with partial.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(redact_data(record, where=str(path))) + "\n")
                count += 1
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def append_json_line(path: str | os.PathLike, record: dict) -> None:
    """Append ``record`` as one JSON line to ``path``, creating its folder; the exact values
    of known secrets redacted (:func:`redact_data`).

    A crash mid-append can cut only this last line, which readers of metrics files skip;
    the next append (a resumed run's) first cuts such a torn line away, so that it never
    ends up in the middle of the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(redact_data(record, where=str(path)))
    cut_torn_tail(path)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def cut_torn_tail(path: Path) -> None:
    """Make ``path`` end in a newline before an append: a last line that is a whole JSON
    record but lacks its newline gets one; a torn half line (a crash mid-append) is cut
    away, with a warning. A missing or empty file is left alone."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        keep = data.rfind(b"\n") + 1
        try:
            json.loads(data[keep:])
        except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
            handle.truncate(keep)
        else:
            handle.write(b"\n")  # whole: only its newline was lost
            return
    logger.warning("%s: cut %d bytes of an incomplete last line (a crash while appending)",
                   path, size - keep)


STAGING_OWNER_SUFFIX = ".tapt-owner"
"""The file beside ``OUTPUT.partial`` that says tapt made it (its text names the folder)."""


def _owner_file(staging: Path) -> Path:
    return staging.with_name(f"{staging.name}{STAGING_OWNER_SUFFIX}")


def _owner_text(staging: Path) -> str:
    return f"tapt staging folder {staging.name}\n"


def staging_folder(target: Path) -> Path:
    """Where an export of ``target`` is written before :func:`publish` renames it: the
    folder ``TARGET.partial`` (not created here), claimed by a file ``TARGET.partial.tapt-owner``
    beside it. A staging folder a crash left behind is removed only when that claim reads
    back; one tapt did not make (no claim, another text, a link, a file) is refused with
    :class:`FileExistsError` naming it, so nothing a user keeps there is deleted."""
    target = Path(target)
    staging = target.with_name(f"{target.name}.partial")
    owner = _owner_file(staging)
    if staging.exists() or staging.is_symlink():
        claimed = (owner.is_file() and not owner.is_symlink()
                   and owner.read_text(encoding="utf-8", errors="replace")
                   == _owner_text(staging))
        if not claimed or staging.is_symlink() or not staging.is_dir():
            raise FileExistsError(
                f"{staging} exists and tapt did not make it (no matching {owner.name} beside "
                f"it): move or remove it yourself; tapt writes {target}'s export there")
        logger.info("removing %s, a staging folder an interrupted export left behind", staging)
        shutil.rmtree(staging)
    atomic_write_text(owner, _owner_text(staging), secrets=False)
    return staging


def publish(staging: Path, target: Path) -> Path:
    """Rename a finished staging folder to ``target`` (which must not exist) and drop the
    claim :func:`staging_folder` wrote beside it."""
    if target.exists():
        raise FileExistsError(f"{target} exists; the export stays in {staging}")
    staging.replace(target)
    _owner_file(staging).unlink(missing_ok=True)
    return target


def check_writable(folder: str | os.PathLike) -> None:
    """``folder`` exists writable or can be created: else :class:`NotADirectoryError` (it,
    or its nearest existing ancestor, is not a folder) or :class:`PermissionError`."""
    ancestor = Path(os.path.abspath(Path(folder).expanduser()))
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise NotADirectoryError(f"{ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write in {ancestor}")


def unwritable_reason(folder: str | os.PathLike) -> str | None:
    """Why ``folder`` could not be written (:func:`check_writable`'s message), or None."""
    try:
        check_writable(folder)
    except (NotADirectoryError, PermissionError) as err:
        return str(err)
    return None


def ensure_free_space(path: str | os.PathLike, needed: int, what: str,
                      headroom: float = 1.1,
                      advice: str = "free some space or choose another output_dir") -> None:
    """Raise :class:`DiskSpaceError` unless ``path``'s filesystem has room for ``needed``
    bytes (times ``headroom``); the message ends with ``advice``."""
    folder = Path(path)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if free < needed * headroom:
        raise DiskSpaceError(f"not enough disk space for {what}: it needs about "
                             f"{human(needed * headroom)} at {Path(path)}, and "
                             f"{human(free)} is free there; {advice}")


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1000 or unit == "TB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1000
    return f"{size:.1f} TB"


def parameter_bytes(model, dtype_bytes: int | None = None) -> int:
    """Bytes of ``model``'s parameters (at ``dtype_bytes`` each, or as stored)."""
    return sum(p.numel() * (dtype_bytes or p.element_size()) for p in model.parameters())
