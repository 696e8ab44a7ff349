"""Run by ``torchrun --nproc_per_node 2`` in test_ddp.py: rank 1's loss is NaN at its second
optimizer step, rank 0's never; ``tapt train`` runs and the process exits with its code."""

from __future__ import annotations

import os
import sys

import tapt.training.losses as losses_module
from tapt.cli import main

rank = int(os.environ["RANK"])
build = losses_module.build_loss


def poisoned_build_loss(model, settings):
    loss = build(model, settings)
    forward = loss.forward
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        value = forward(*args, **kwargs)
        if loss.training:
            calls["n"] += 1
            if rank == 1 and calls["n"] == 2:
                return value * float("nan")
        return value
    loss.forward = poisoned
    return loss


losses_module.build_loss = poisoned_build_loss
sys.exit(main(["train", sys.argv[1]]))
