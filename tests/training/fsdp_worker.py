"""Run by ``torchrun --nproc_per_node 2`` in test_fsdp_in_loop.py: train a recipe and record,
per rank, whether the in-loop evaluator's model was FSDP-sharded and how many forward passes
each of its evaluations made (FSDP forwards are collective: the counts must agree)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tapt.recipe import load_recipe
from tapt.retrieval import in_loop
from tapt.training.contrastive import train

recipe_path, record_dir = Path(sys.argv[1]), Path(sys.argv[2])
rank = int(os.environ["RANK"])
record = {"rank": rank, "world_size": int(os.environ["WORLD_SIZE"]), "evaluations": []}
evaluate = in_loop.RetrievalEvaluator.__call__


def recorded_call(self, model, *args, **kwargs):
    from torch.distributed.fsdp import FSDPModule

    units = [m for m in model.modules() if isinstance(m, FSDPModule)]
    sharded = [type(m).__name__ for m in units]
    forwards = [0]
    hook = (units[0] if units else model).register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    try:
        metrics = evaluate(self, model, *args, **kwargs)
    finally:
        hook.remove()
    record["evaluations"].append({"sharded": sharded, "forwards": forwards[0],
                                  "metrics": metrics})
    return metrics


in_loop.RetrievalEvaluator.__call__ = recorded_call
train(load_recipe(recipe_path), run_test=False)
record_dir.mkdir(parents=True, exist_ok=True)
(record_dir / f"rank{rank}.json").write_text(json.dumps(record))
