"""A rank that trains from Python under torchrun (as tests/training/ddp_worker.py does):
the group is opened, tapt's run_trainer runs a trainer, and an atexit handler registered
before tapt's (so it runs after it) records whether the group was still open at exit."""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

import torch.distributed as dist


def record_state() -> None:
    Path(sys.argv[1]).mkdir(parents=True, exist_ok=True)
    rank = os.environ["RANK"]
    (Path(sys.argv[1]) / f"rank{rank}.txt").write_text(
        "open" if dist.is_initialized() else "closed", encoding="utf-8")


atexit.register(record_state)  # runs after every handler registered later

from tapt.training.trainer import run_trainer


class Trainer:
    """Stands for the Trainer: its accelerator opens the process group."""

    def train(self, resume_from_checkpoint=None) -> None:
        dist.init_process_group("gloo")
        dist.barrier()


run_trainer(Trainer(), run=None, resume_from=None)
