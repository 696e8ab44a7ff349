"""Scratch folders for what a training process builds on disk and reads while it runs.

The weak pairs (:mod:`tapt.data.weak_pairs`) are a corpus again at FormBench's size, so
they are written to Arrow files and memory-mapped instead of held in memory. Their folder
lives under ``$TAPT_CACHE_DIR/scratch`` (else ``$XDG_CACHE_HOME/tapt/scratch`` or
``~/.cache/tapt/scratch``), on the disk the user chose for tapt's large files rather than
``/tmp``, one per process (each rank of a torchrun job builds its own), and is removed when
training ends.

A process killed outright (SIGKILL, the OOM killer, torchrun ending the other ranks after
one failed) cannot remove its folder, so each folder's name carries the host and the
process id (``weak-pairs-HOST-PID-XXXX``), and making a new one first removes the folders
of this host whose process is gone. Folders of other hosts (a shared cache) are left to
their own host.
"""

from __future__ import annotations

import gc
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tapt.data.arrow_corpus import default_corpus_cache
from tapt.run_folder.lock import pid_alive
from tapt.util.files import check_writable

logger = logging.getLogger(__name__)


def scratch_root() -> Path:
    """``$TAPT_CACHE_DIR/scratch``, beside the Arrow corpus cache (see the module docstring)."""
    return default_corpus_cache().parent / "scratch"


def _host() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname()) or "host"


@dataclass(frozen=True)
class ScratchFolder:
    """One ``KIND-HOST-PID-*`` folder under the scratch root, as ``tapt cache ls`` shows it.

    ``state``: ``in use`` (its process runs on this host), ``left`` (its process on this
    host has ended: :func:`remove_stale` and ``tapt cache prune`` remove it) or ``other
    host`` (left to that host)."""

    path: Path
    kind: str
    pid: int
    state: str
    bytes: int


def _size(folder: Path) -> int:
    """Bytes of the files under ``folder`` (links not followed; vanishing files skipped)."""
    total = 0
    for parent, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return total


def list_scratch(root: Path | None = None) -> list[ScratchFolder]:
    """The scratch folders under ``root`` (default :func:`scratch_root`) by name; anything
    else there (not named ``KIND-HOST-PID-*``, a link, a file) is not tapt's and not listed.
    A folder is "left" when no process of its PID runs on this host: containers that share
    a host name and cache volume but not a PID namespace would see each other's as left."""
    root = scratch_root() if root is None else root
    try:
        entries = sorted(root.iterdir()) if root.is_dir() else []
    except OSError as err:  # an unreadable root: the other caches are still listed
        logger.warning("cannot list the scratch folders in %s: %s", root, err)
        return []
    found = []
    for folder in entries:
        parts = folder.name.rsplit("-", 3)  # the host has no '-', mkdtemp's suffix neither
        if len(parts) != 4 or not parts[2].isdigit() or folder.is_symlink() \
                or not folder.is_dir():
            continue
        kind, host, pid = parts[0], parts[1], int(parts[2])
        state = "other host" if host != _host() else "in use" if pid_alive(pid) else "left"
        found.append(ScratchFolder(folder, kind, pid, state, _size(folder)))
    return found


def remove_stale(root: Path, kind: str) -> list[Path]:
    """Remove ``root``'s ``KIND-HOST-PID-*`` folders of this host whose process is gone;
    returns them."""
    prefix = f"{kind}-{_host()}-"
    removed = []
    for folder in sorted(root.glob(f"{prefix}*")):
        pid_text = folder.name[len(prefix):].split("-", 1)[0]
        if not folder.is_dir() or folder.is_symlink() or not pid_text.isdigit() \
                or pid_alive(int(pid_text)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            logger.info("removed %s, left by process %s, which has ended", folder, pid_text)
            removed.append(folder)
    return removed


@contextmanager
def scratch_folder(kind: str, root: Path | None = None) -> Iterator[Path]:
    """A new, empty ``KIND-HOST-PID-*`` folder under ``root`` (default
    :func:`scratch_root`), removed on leaving; stale folders of this host removed first.

    Raises:
        PermissionError, NotADirectoryError: ``root`` cannot be made or written (the
            message names it; set ``TAPT_CACHE_DIR`` elsewhere).
    """
    root = scratch_root() if root is None else root
    try:
        check_writable(root)
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise type(err)(f"tapt's scratch folder {root}: {err} (set TAPT_CACHE_DIR to a "
                        "writable disk with room for the weak pairs)") from None
    remove_stale(root, kind)
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-{_host()}-{os.getpid()}-", dir=root))
    try:
        yield folder
    finally:
        gc.collect()  # drop the last memory maps of its files (NFS keeps open files)
        shutil.rmtree(folder, ignore_errors=True)  # never hides how training ended
        if folder.exists():
            logger.warning("could not remove the scratch folder %s; a training run on this "
                           "host removes it once this process has ended", folder)
