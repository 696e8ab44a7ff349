"""Which process this is under a launcher, and destroying a ``torch.distributed`` process
group before the interpreter exits.

Left to interpreter exit, gloo's worker threads are torn down by C++ static destructors,
and a rank can abort with SIGABRT ("terminate called without an active exception") after
its work was done: a flaky exit of every multi-process run. tapt's command line closes the
group when a command ends (:mod:`tapt.cli.main`); training registers the same close with
:mod:`atexit` (which runs before the static destructors), so a run started from Python
under ``torchrun`` (the Trainer's accelerator opens the group) exits cleanly too.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys

_registered = False


def launched_world_size() -> int:
    """``WORLD_SIZE`` set by the launcher (1 when unset or not a number)."""
    value = os.environ.get("WORLD_SIZE", "1").strip()
    return int(value) if value.isdigit() else 1


def launched() -> bool:
    """Whether this process is one rank of several started by a launcher."""
    return launched_world_size() > 1


def is_main_process() -> bool:
    """True on global rank 0, and in a single-process run (``WORLD_SIZE`` unset or 1).

    tapt's one answer, for training, the run folder, sweeps and the command line: it reads
    the launcher's ``RANK`` (torchrun and ``accelerate launch`` set it to the rank the
    process group will have), so it answers before ``torch.distributed`` is initialised
    (the run folder, its lock and the export are written by rank 0 only). Not accelerate's
    ``PartialState().is_main_process``: constructing ``PartialState`` under a launcher
    initialises the process group itself (with its own backend, before
    :mod:`tapt.cli.distributed` or the trainer's accelerator) and imports torch, which a
    BM25 or API-model command never loads.
    """
    return not launched() or int(os.environ.get("RANK", "0")) == 0


def close_process_group() -> None:
    """Destroy the default process group if one is open under a launcher. No barrier: a
    rank that failed must not make the others wait."""
    if not launched() or "torch.distributed" not in sys.modules:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except (RuntimeError, ValueError) as err:  # already torn down by its owner
            logging.getLogger("tapt").debug("process group not destroyed: %s", err)


def close_at_exit() -> None:
    """Register :func:`close_process_group` with :mod:`atexit` (once per process)."""
    global _registered
    if not _registered:
        atexit.register(close_process_group)
        _registered = True


def end_launched_process(code: int | None) -> None:
    """End a launched rank whose command is done: an open W&B run is finished with the
    exit code, the exit handlers run (the process group is closed, logging flushes), then
    the process ends without the interpreter's finalization. Closing the group before exit
    made the abort rarer, not gone (1 of 10 two-rank loops still ended rank 1 of ``tapt
    eval`` with "terminate called without an active exception"): torch's distributed
    runtime still holds C++ objects whose threads the static destructors meet joinable.
    ``os._exit`` after the exit handlers skips only that stage; everything tapt writes is
    closed before (atomic writes, the run folder, the result files). Does nothing outside
    a launcher."""
    if not launched():
        return
    code = 0 if code is None else code if isinstance(code, int) else 1  # as sys.exit
    wandb = sys.modules.get("wandb")  # its own exit handler would report 0: no sys.exit
    if wandb is not None and getattr(wandb, "run", None) is not None:
        with contextlib.suppress(Exception):
            wandb.run.finish(exit_code=code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
