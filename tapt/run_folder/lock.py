"""One training at a time in a run folder (and one sweep in a sweep folder,
:mod:`tapt.selection.sweep`): an exclusive ``flock`` on ``OUTPUT/tapt.lock``
(:mod:`tapt.util.file_locks`).

The lock file holds the holder's pid, host, start time and command line (JSON); it is
removed when the run ends. A second run on the same folder is refused at once, naming the
holder. The kernel drops the lock when its process dies (SIGKILL included), so a lock file
a killed run left behind no longer locks anything: it is taken over with a warning naming
the dead holder. Under DDP only rank 0 takes the lock (:func:`run_lock`); the other ranks of
one launch follow it. A folder the lock created is removed again when the run leaves it
empty (a run refused before its first write leaves nothing behind).

Limits: ``flock`` is as good as the filesystem's locking; on NFS, Linux maps it to POSIX
locks through the server's lock manager.

Example::

    with RunLock(Path("runs/quickstart")):
        ...  # the only training in runs/quickstart
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tapt.recipe import RecipeError
from tapt.util.file_locks import holds_path, try_lock, unlock
from tapt.util.process_group import is_main_process
from tapt.util.redaction import redact

logger = logging.getLogger(__name__)

LOCK_NAME = "tapt.lock"


class RunLockedError(RecipeError):
    """Another process holds the run folder's lock."""


class RunLock:
    """The exclusive lock on ``folder`` (created if missing); a context manager.

    ``label`` and ``user`` word the refusal: the folder's option (``output_dir``, a sweep's
    ``--output``) and what holds it (a training, a sweep)."""

    def __init__(self, folder: str | os.PathLike, *, label: str = "output_dir",
                 user: str = "training") -> None:
        self.folder = Path(folder)
        self.label, self.user = label, user
        self.fd: int | None = None
        self.created: list[Path] = []
        """Folders the lock created (the run folder, missing parents), innermost first."""

    @property
    def path(self) -> Path:
        return self.folder / LOCK_NAME

    def acquire(self) -> RunLock:
        self.created = [path for path in (self.folder, *self.folder.parents)
                        if not path.exists()]
        self.folder.mkdir(parents=True, exist_ok=True)
        for _ in range(5):  # the holder may remove the file between our open and our lock
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                taken = try_lock(fd)
            except OSError:
                taken = False
            if not taken:
                os.close(fd)
                raise RunLockedError(locked_message(self.folder, read_holder(self.path),
                                                    label=self.label, user=self.user)) \
                    from None
            if holds_path(fd, self.path):
                break
            os.close(fd)
        else:
            raise RunLockedError(f"{self.label} {self.folder}: could not lock {self.path} (it "
                                 "keeps being replaced by another process)")
        self.fd = fd
        previous = holder_from(os.read(fd, 4096))
        if previous:
            logger.warning("%s: took over the lock left by pid %s on %s (started %s), which "
                           "no longer holds it (the run was killed or crashed)", self.folder,
                           previous.get("pid"), previous.get("host"), previous.get("started"))
        record = {"pid": os.getpid(), "host": socket.gethostname(),
                  "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                  "command": redact(" ".join(sys.argv))}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)
        return self

    def release(self) -> None:
        """Remove the lock file and unlock; remove the folders the lock created too, where
        they are empty."""
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self.fd)
        self.fd = None
        for folder in self.created:
            try:
                folder.rmdir()  # only succeeds when empty
            except OSError:
                break
        self.created = []

    def moved(self, target: Path) -> None:
        """The locked folder was renamed to ``target``: lock a new folder at the old path
        (refused if another process got there first), then release the old one."""
        old_fd, old_path = self.fd, target / LOCK_NAME
        self.fd = None
        try:
            self.acquire()
        finally:
            with contextlib.suppress(FileNotFoundError):
                old_path.unlink()
            if old_fd is not None:
                os.close(old_fd)

    def __enter__(self) -> RunLock:  # noqa: PYI034
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike, **wording: str) -> Iterator[RunLock | None]:
    """:class:`RunLock` on the main process (rank 0); nothing on the other ranks.
    ``wording``: :class:`RunLock`'s ``label`` and ``user``."""
    if not is_main_process():
        yield None
        return
    with RunLock(folder, **wording) as lock:
        yield lock


def live_holder(folder: str | os.PathLike) -> dict | None:
    """The record of the process that holds ``folder``'s lock now (``{}`` when it wrote
    none), or None when no process holds it (no lock file, or one a dead run left). Creates
    nothing: a check before a command starts (:class:`RunLock` still decides at the start)."""
    path = Path(folder) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            free = try_lock(fd, shared=True)  # refused while a holder has the exclusive lock
        except OSError:
            free = False
        if not free:
            return read_holder(path)
        unlock(fd)
        return None
    finally:
        os.close(fd)


def holder_from(raw: bytes) -> dict:
    try:
        holder = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def read_holder(path: Path) -> dict:
    try:
        return holder_from(path.read_bytes()[:4096])
    except OSError:
        return {}


def pid_alive(pid) -> bool:
    """Whether process ``pid`` (as a lock records it) runs on this host; a value that is
    no process id (a string, a bool, 0, a number too large for ``kill``) is not alive."""
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def locked_message(folder: Path, holder: dict, *, label: str = "output_dir",
                   user: str = "training") -> str:
    who = (f"pid {holder.get('pid')} on {holder.get('host')}, started {holder.get('started')}"
           if holder else "another process")
    message = f"{label} {folder} is in use by another {user} ({who}"
    if holder.get("command"):
        message += f": {holder['command']}"
    message += ")"
    if holder and holder.get("host") == socket.gethostname() and \
            not pid_alive(holder.get("pid")):
        message += (f"; pid {holder.get('pid')} is gone, but a process it started still "
                    "holds the lock (a data-loader worker?): end it")
    return message + f"; wait for it to end, or choose another {label}"
