"""The Weights & Biases run of a training run, started with nothing secret in it.

transformers' ``WandbCallback`` starts a W&B run only when none is running, with the
project and run name as given and the command line as ``sys.argv`` holds it (W&B keeps it
in the run's metadata, and ``wandb sync`` uploads it later). :func:`start_wandb` starts the
run first, with the project, the run name and that command line redacted
(:func:`tapt.redaction.redact`: a token pasted into an override is in all three); the
callback then reports to it and adds the trainer's arguments to its config (their
``run_name`` and ``project`` are redacted by :func:`tapt.training.arguments.common_arguments`).

Limits: only the main process starts a run; a run already started by the caller is used as
it is.
"""

from __future__ import annotations

import sys

from tapt.redaction import redact


def start_wandb(args, *, main_process: bool) -> None:
    """Start the W&B run for trainer arguments ``args`` (``report_to`` holding ``wandb``),
    ``project`` and ``run_name`` redacted, ``sys.argv`` redacted for the start."""
    if not main_process or "wandb" not in (args.report_to or []):
        return
    import wandb

    if wandb.run is not None:
        return
    argv = sys.argv
    # W&B's one switch for it, x_disable_meta, would drop all the system metadata too
    sys.argv = [redact(arg) for arg in argv]
    try:
        wandb.init(project=redact(args.project), name=redact(args.run_name or "") or None)
    finally:
        sys.argv = argv
