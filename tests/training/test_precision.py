"""Evaluation precision in a training run, and the dtype of the export."""

from __future__ import annotations

import json

import numpy as np
import torch
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from tapt.recipe import load_recipe
from tapt.training.contrastive import train


def test_bf16_evaluation_and_export_keep_float32_master_weights(make_recipe, tiny_texts):
    recipe_file, output = make_recipe("bf16", training={"max_steps": 2, "eval_steps": 2},
                                      eval={"dtype": "bfloat16", "max_tokens_per_batch": 256},
                                      export={"dtype": "bfloat16"})
    result = train(load_recipe(recipe_file))
    history = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert [entry["dtype"] for entry in history] == ["bfloat16", "bfloat16"]
    assert json.loads((output / "results.json").read_text())["eval_dtype"] == "bfloat16"

    checkpoint = load_file(output / "checkpoints" / "checkpoint-2" / "model.safetensors")
    exported = load_file(result.final_dir / "model.safetensors")
    assert {t.dtype for t in checkpoint.values() if t.is_floating_point()} == {torch.float32}
    assert {t.dtype for t in exported.values() if t.is_floating_point()} == {torch.bfloat16}
    for name, tensor in exported.items():
        torch.testing.assert_close(tensor, checkpoint[name].to(torch.bfloat16), rtol=0, atol=0)
    assert json.loads((result.final_dir / "config.json").read_text())["dtype"] == "bfloat16"

    loaded = SentenceTransformer(str(result.final_dir))
    assert next(loaded.parameters()).dtype == torch.bfloat16
    full = SentenceTransformer(str(output / "checkpoints" / "checkpoint-2"))
    a = loaded.encode(tiny_texts[:8])
    b = full.encode(tiny_texts[:8])
    assert np.isfinite(a).all() and (a * b).sum(1).min() > 0.98  # normalised: cosine
