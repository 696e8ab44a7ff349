"""Advisory file locks (``flock``) on an open file descriptor: tapt's one use of ``fcntl``.

Two users: a run or sweep folder's exclusive lock (:mod:`tapt.run_folder.lock`), whose lock
file carries the holder's pid, host and command so a refusal can name it, and the embedding
cache, whose readers share a lock that ``tapt cache prune`` must take exclusively before it
deletes (:mod:`tapt.util.cache_entries`). ``filelock`` does neither: its ``FileLock`` is
exclusive only and owns its lock file (a second contender opens it for writing, so the file
cannot carry the holder's record), and its ``ReadWriteLock`` is a SQLite database, not a
lock on the folder's own file. The kernel drops an ``flock`` when its process dies (SIGKILL
included), so no lock outlives its holder.
"""

from __future__ import annotations

import fcntl
import os


def try_lock(fd: int, *, shared: bool = False) -> bool:
    """Take the lock without waiting: True when taken, False while another process holds
    a conflicting one."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def wait_lock(fd: int, *, shared: bool = False) -> None:
    """Take the lock, waiting while another process holds a conflicting one; an
    ``OSError`` when the file system cannot lock."""
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)


def holds_path(fd: int, path: str | os.PathLike) -> bool:
    """Whether the locked descriptor ``fd`` is still the file at ``path``: another process
    may remove or replace the lock file between our open and our lock, and a lock on the
    old file guards nothing."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def unlock(fd: int) -> None:
    """Release the lock (closing the descriptor releases it too)."""
    fcntl.flock(fd, fcntl.LOCK_UN)
