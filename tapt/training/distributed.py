"""Which process this is under ``torchrun``/``accelerate launch``, before any process group
exists (the run folder, its lock and the export are written by rank 0 only)."""

from __future__ import annotations

import os


def is_main_process() -> bool:
    """True on global rank 0, and in a single-process run (no ``RANK`` in the environment).

    Reads the launcher's ``RANK`` variable, so it answers before ``torch.distributed`` is
    initialised; :func:`tapt.retrieval.sharding.is_main` asks the process group instead.
    """
    return int(os.environ.get("RANK", "0")) == 0
