"""The process group of a command launched by ``torchrun`` / ``accelerate launch``.

``tapt eval``, ``mine``, ``score``, ``ablate``, ``analyze`` and ``probe`` run the same code on
every rank: the encoding is sharded (:func:`tapt.retrieval.dense.stream_embeddings`), rank 0
searches, scores, prints and writes. :func:`multiprocess` initialises the group once when
``WORLD_SIZE`` > 1 (gloo without CUDA; nccl with, each rank on the GPU of its
``LOCAL_RANK``) and silences the console and info logs of the other ranks while the command
runs. An error on any rank makes that process exit non-zero and torchrun stops the others.
A single process (no ``WORLD_SIZE``, or 1) runs as before: no group, no torch import.

Example::

    torchrun --nproc_per_node 2 -m tapt eval --model runs/x/final --data data/formbench
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tapt.cli import terminal
from tapt.util.process_group import launched_world_size


@contextmanager
def processes() -> Iterator[None]:
    """Run the body in the launcher's process group (initialised here if needed, and
    destroyed on exit if initialised here); ranks other than 0 print nothing but errors."""
    if launched_world_size() <= 1:
        yield
        return
    import torch
    import torch.distributed as dist

    owned = not dist.is_initialized()
    if owned:
        backend = "gloo"
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            backend = "nccl"
        dist.init_process_group(backend)
    logger = logging.getLogger("tapt")
    quiet, level = terminal.console.quiet, logger.level
    if dist.get_rank() != 0:
        terminal.console.quiet = True
        logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:  # errors are printed by tapt.cli.main on every rank, after this
        terminal.console.quiet = quiet
        logger.setLevel(level)
        if owned:
            dist.destroy_process_group()


def multiprocess(handler: Callable[..., int]) -> Callable[..., int]:
    """Decorate a command handler to run inside :func:`processes`."""

    @functools.wraps(handler)
    def run(*args, **kwargs) -> int:
        with processes():
            return handler(*args, **kwargs)

    return run
