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
from pathlib import Path

from tapt.data.arrow_corpus import default_corpus_cache
from tapt.training.run_lock import pid_alive
from tapt.util.files import check_writable

logger = logging.getLogger(__name__)


def scratch_root() -> Path:
    """``$TAPT_CACHE_DIR/scratch``, beside the Arrow corpus cache (see the module docstring)."""
    return default_corpus_cache().parent / "scratch"


def _host() -> str:
    return "".join(c if c.isalnum() else "_" for c in socket.gethostname()) or "host"


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
