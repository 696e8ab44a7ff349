"""Run by ``torchrun --nproc_per_node 2`` in test_ddp.py: train a recipe and record, per rank,
which queries each training batch held and how many candidates MNRL scored them against."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import tapt.training.losses as losses_module
from tapt.recipe import load_recipe
from tapt.training.contrastive import train

recipe_path, record_dir = Path(sys.argv[1]), Path(sys.argv[2])
rank = int(os.environ["RANK"])
record = {"rank": rank, "world_size": int(os.environ["WORLD_SIZE"]), "batches": [],
          "candidates": [], "local_queries": []}
build = losses_module.build_loss


def recording_build_loss(model, settings):
    loss = build(model, settings)
    similarity = loss.similarity_fct
    forward = loss.forward

    def scored(queries, docs):
        if loss.training:
            record["local_queries"].append(int(queries.shape[0]))
            record["candidates"].append(int(docs.shape[0]))
        return similarity(queries, docs)

    def recorded_forward(features, labels):
        ids = features[0]["input_ids"].tolist()
        record["batches"].append([" ".join(map(str, row)) for row in ids])
        return forward(features, labels)

    loss.similarity_fct = scored
    loss.forward = recorded_forward
    return loss


losses_module.build_loss = recording_build_loss

result = train(load_recipe(recipe_path), run_test=True)
record["final"] = str(result.final_dir) if result.final_dir else None
record["summary"] = result.summary
record_dir.mkdir(parents=True, exist_ok=True)
(record_dir / f"rank{rank}.json").write_text(json.dumps(record))
