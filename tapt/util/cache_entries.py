"""What ``tapt cache ls | prune`` lists and deletes: embedding-cache model keys and
cached Arrow corpora, each with its size and last use; and the lock that keeps prune off a
cache folder a process is using.

Every process that reads or writes an embedding-cache model key holds a shared
``flock`` (:mod:`tapt.util.file_locks`) on its ``in-use.lock`` (:class:`InUse`); prune deletes a folder only while
it holds that lock exclusively, and skips (with a warning) one it cannot lock: a shard being
written never vanishes. A deleted folder is first renamed aside, so a process that opens
the key meanwhile makes a fresh folder instead of writing into one being removed. The
kernel drops a lock when its process dies, so a killed run blocks nothing. An Arrow corpus
needs no lock: it is written under another name and renamed whole, and a process that maps
it keeps its pages after a delete. A folder renamed aside by a prune that was killed before
it finished is removed by the next prune (:func:`remove_abandoned_deletions`). A process
that cached nothing in a key folder (an encode interrupted before its first shard) removes
the folder as it lets go of it (:meth:`InUse.release`), unless another process uses it: no
empty key and no lone ``in-use.lock`` is left behind to be listed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tapt.util.file_locks import holds_path, try_lock, wait_lock

logger = logging.getLogger(__name__)

IN_USE_LOCK = "in-use.lock"
"""The lock file inside a cache folder (held shared while in use, exclusively to delete)."""


class InUse:
    """A shared lock on ``folder/in-use.lock`` (the folder is created); a context manager.

    Where the filesystem cannot lock (some network mounts), the folder is used unlocked
    with a warning."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self.folder = Path(folder)
        self.fd: int | None = None

    @property
    def path(self) -> Path:
        return self.folder / IN_USE_LOCK

    def acquire(self) -> InUse:
        for _ in range(5):  # prune may rename the folder away between our open and lock
            self.folder.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:  # a read-only (shared) cache: a read-only lock still locks
                try:
                    fd = os.open(self.path, os.O_RDONLY)
                except OSError as err:
                    logger.warning("%s: cannot open its lock (%s); used without the lock "
                                   "that keeps tapt cache prune away", self.folder,
                                   err.strerror or err)
                    return self
            try:
                wait_lock(fd, shared=True)  # waits only while a prune deletes it
            except OSError as err:
                os.close(fd)
                logger.warning("%s: cannot lock it (%s); used without the lock that keeps "
                               "tapt cache prune away", self.folder, err.strerror or err)
                return self
            if holds_path(fd, self.path):
                self.fd = fd
                return self
            os.close(fd)
        logger.warning("%s keeps being deleted by another process; used without its lock",
                       self.folder)
        return self

    def release(self, *, remove_unless: Callable[[Path], bool] | None = None) -> None:
        """Let go of the lock. ``remove_unless``: then remove the folder unless it says
        the folder holds something to keep (asked under the exclusive lock), when no other
        process uses it (:func:`remove_unused`); only a folder this process had locked."""
        if self.fd is None:
            return
        os.close(self.fd)
        self.fd = None
        if remove_unless is not None:
            remove_unused(self.folder, self.path, unless=remove_unless)

    def __enter__(self) -> InUse:  # noqa: PYI034
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


@dataclass
class CacheEntry:
    """One deletable cache item: an embedding-cache model key's folder or an Arrow corpus
    file; ``key`` describes it, ``rows`` counts passages, ``last_used`` is a timestamp;
    ``lock``: its :class:`InUse` lock file, if it has one; ``also``: files deleted with it
    (a digest record)."""

    path: Path
    key: dict
    rows: int
    bytes: int
    last_used: float
    lock: Path | None = None
    also: tuple[Path, ...] = ()
    unfinished_bytes: int = 0
    """Of ``bytes``, those of writes that did not finish (shard files without a manifest:
    an interrupted encode, or one another process is making now)."""

    @property
    def folder(self) -> Path:
        """The entry's path (a model key's folder)."""
        return self.path

    def delete(self) -> bool:
        """Delete it; False (nothing deleted) when a process holds its lock."""
        if self.lock is None or not self.path.is_dir():
            self._remove(self.path)
            return True
        return remove_unused(self.path, self.lock, remove=self._remove)

    def _remove(self, path: Path) -> None:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        for extra in self.also:
            with contextlib.suppress(OSError):
                extra.unlink(missing_ok=True)


DELETING = ".deleting-"
"""What a folder being deleted is renamed to: ``.NAME.deleting-PID`` (PID: the deleting
process)."""


def _remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_unused(folder: Path, lock: Path, *, remove: Callable[[Path], None] = _remove_tree,
                  unless: Callable[[Path], bool] | None = None) -> bool:
    """Delete ``folder`` while holding its ``lock`` file exclusively, taken without
    waiting: renamed aside (``.NAME.deleting-PID``) first, so that a process opening it
    meanwhile makes a fresh folder, then ``remove``d. Returns False, nothing deleted, while
    another process holds the lock, when the lock file was replaced meanwhile (another
    process deleted the folder), when it cannot be opened (a read-only cache) or when
    ``unless(folder)`` (asked under the lock) says keep it; True when deleted or already
    gone."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        return True  # deleted meanwhile
    except OSError:
        return False
    try:
        if not try_lock(fd) or not holds_path(fd, lock):
            return False
        if unless is not None and unless(folder):
            return False
        aside = folder.with_name(f".{folder.name}{DELETING}{os.getpid()}")
        try:
            folder.rename(aside)
        except OSError:
            aside = folder
        remove(aside)
        return True
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def remove_abandoned_deletions(root: str | os.PathLike) -> list[Path]:
    """Remove the ``.NAME.deleting-PID`` folders under ``root`` whose pruning process is no
    longer running (it was killed mid-delete: nothing lists or reuses them, so they would
    hold their bytes forever); returns what was removed. A folder whose process still runs
    is left to it."""
    root = Path(root)
    removed = []
    for path in root.glob(f".*{DELETING}*") if root.is_dir() else ():
        pid = path.name.rpartition(DELETING)[2]
        if not pid.isdigit() or _running(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
        logger.info("removed %s, left by a prune that did not finish", path)
        removed.append(path)
    return removed


def remove_unstarted(root: str | os.PathLike, leftovers: frozenset[str]) -> list[Path]:
    """Remove the folders under ``root`` that hold nothing but some of ``leftovers`` (what
    a process killed before it recorded its key leaves: its lock file, a partial record),
    which no listing shows, unless a process uses them (:func:`remove_unused`); returns
    what was removed."""
    root = Path(root)
    removed = []

    def unstarted(folder: Path) -> bool:
        try:
            names = set(os.listdir(folder))
        except OSError:
            return False
        return bool(names) and names <= leftovers

    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir() or \
                not unstarted(folder):
            continue
        if remove_unused(folder, folder / IN_USE_LOCK,
                         unless=lambda path: not unstarted(path)):
            logger.info("removed %s, left by a process stopped before it recorded its key",
                        folder)
            removed.append(folder)
    return removed


def prune_entries(entries: Iterable[CacheEntry], *, older_than_days: float | None = None,
                  keep_bytes: int | None = None) -> list[CacheEntry]:
    """Delete the entries unused for ``older_than_days``, then the least recently used
    until the rest hold at most ``keep_bytes``; returns what was deleted. An entry a
    process is using (its lock is held) is kept, with a warning."""
    if older_than_days is not None and older_than_days < 0:
        raise ValueError(f"older_than_days must be >= 0, got {older_than_days}")
    if keep_bytes is not None and keep_bytes < 0:
        raise ValueError(f"keep_bytes must be >= 0, got {keep_bytes}")
    entries = sorted(entries, key=lambda e: e.last_used)  # least recently used first
    total = sum(e.bytes for e in entries)
    now = time.time()
    deleted = []
    for entry in entries:
        stale = older_than_days is not None and now - entry.last_used > older_than_days * 86400
        too_big = keep_bytes is not None and total > keep_bytes
        if stale or too_big:
            if not entry.delete():
                logger.warning("%s is in use by a running process (it holds %s): kept",
                               entry.path, IN_USE_LOCK)
                continue
            total -= entry.bytes
            deleted.append(entry)
    return deleted


__all__ = ["DELETING", "IN_USE_LOCK", "CacheEntry", "InUse", "prune_entries",
           "remove_abandoned_deletions", "remove_unstarted", "remove_unused"]
