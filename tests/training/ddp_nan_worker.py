"""Run by ``torchrun --nproc_per_node 2`` in test_ddp.py: rank 1's loss is NaN at its second
optimizer step, rank 0's never; ``tapt train`` runs and the process exits with its code."""

from __future__ import annotations

import os
import sys

from faults import poisoning

import tapt.training.losses as losses_module
from tapt.cli import main

rank = int(os.environ["RANK"])
if rank == 1:
    losses_module.build_loss = poisoning(losses_module.build_loss, {2})
sys.exit(main(["train", sys.argv[1]]))
