"""The Weights & Biases run of a training run, started with nothing secret in it, and
finished with the run's result table (TAPT and DAPT alike: the only module of
:mod:`tapt.training` that imports ``wandb``).

transformers' ``WandbCallback`` starts a W&B run only when none is running, with the
project and run name as given and the command line as ``sys.argv`` holds it (W&B keeps it
in the run's metadata, and ``wandb sync`` uploads it later). :func:`start_wandb` starts the
run first, with the project, the run name and that command line redacted
(:func:`tapt.util.redaction.redact`: a token pasted into an override is in all three); the
callback then reports to it and adds the trainer's arguments to its config (their
``run_name`` and ``project`` are redacted by :func:`tapt.training.arguments.common_arguments`).

:func:`check_wandb` runs before the data and the model load: ``tracking.backend: wandb``
without credentials (and not offline) fails there in one line, not in W&B's traceback after
loading.

Limits: only the main process starts a run; a run already started by the caller is used as
it is. Credentials are only found, not verified (that needs the network): a revoked key
still fails in ``wandb.init``.
"""

from __future__ import annotations

import sys

from tapt.recipe import RecipeError
from tapt.util.redaction import redact

NO_CREDENTIALS_MODES = ("offline", "dryrun", "disabled")
"""W&B modes that run without an account (``WANDB_MODE``, or ``wandb offline``)."""


def check_wandb(backend: str) -> None:
    """For ``tracking.backend: wandb``: W&B is installed, its settings load, and it has
    credentials (``WANDB_API_KEY``, ``wandb login``'s netrc entry, a settings file's
    ``api_key``) unless its mode needs none (offline, dryrun, disabled). W&B's own lookup
    (``wandb.login(verify=False, prompt=False)``, on the settings W&B's process-wide setup
    read, as ``wandb.init`` will): no network, no prompt, no service process started.

    Raises:
        RecipeError: naming ``tracking.backend`` and what to do.
    """
    if backend != "wandb":
        return
    try:
        import wandb
    except ImportError:
        raise RecipeError("tracking.backend: wandb needs the wandb package: "
                          "pip install \"tapt[wandb]\"") from None
    if wandb.run is not None:  # started by the caller: used as it is
        return
    try:
        from wandb.sdk import wandb_setup

        mode = wandb_setup.singleton().settings.mode  # wandb.setup() would start a service
        if mode in NO_CREDENTIALS_MODES:
            return
        found = wandb.login(verify=False, prompt=False)
    except (ValueError, wandb.errors.Error) as err:  # a bad WANDB_MODE, a malformed key
        problem = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors()
                            ) if hasattr(err, "errors") else " ".join(str(err).split())
        raise RecipeError(f"tracking.backend: wandb: W&B cannot start: {redact(problem)}") \
            from None
    if not found:
        raise RecipeError("tracking.backend: wandb: no W&B credentials (set WANDB_API_KEY or "
                          "run `wandb login`; WANDB_MODE=offline logs locally without them, "
                          "for `wandb sync` later)")


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


def finish_wandb(summary: dict[str, dict[str, float]] | None = None) -> None:
    """Put the result table (``summary``: row -> metrics; none for DAPT) in the W&B run
    summary and close the run (flushes offline runs); no run: nothing."""
    import wandb

    if wandb.run is None:
        return
    for row, metrics in (summary or {}).items():
        for key, value in metrics.items():
            wandb.run.summary[f"{row.replace(' ', '_')}/{key}"] = value
    wandb.finish()
