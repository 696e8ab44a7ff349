"""Export a trained model: a SentenceTransformer folder with safetensors weights, merged
LoRA, stored prompts, the Apache-2.0 LICENSE and a model card (:mod:`tapt.cards.run_card`),
written into the staging folder of the run's ``final/`` (:func:`export_staging`)."""

from __future__ import annotations

import json
from pathlib import Path

from tapt.cards.common import apache_license_text
from tapt.cards.run_card import redact_card, set_card_metadata
from tapt.encoders.precision import torch_dtype
from tapt.recipe import Recipe
from tapt.training.lora import merge_lora
from tapt.util.files import ensure_free_space, parameter_bytes, staging_folder


def export_staging(model, run, dtype: str) -> Path:
    """The staging folder of the run ``run``'s ``final/``, after checking there is room for
    the export in ``dtype`` (the recipe's ``export.dtype``)."""
    bytes_per_value = 4 if dtype == "float32" else 2
    ensure_free_space(run.root, parameter_bytes(model, bytes_per_value), "the export")
    return staging_folder(run.final)


def save_model(model, folder: Path, recipe: Recipe) -> Path:
    """Write ``folder``: merged weights (safetensors), prompts, tokenizer, LICENSE and
    sentence-transformers' model card (``write_card`` adds tapt's section)."""
    if recipe.model.lora.enabled:
        merge_lora(model)
    folder.mkdir(parents=True, exist_ok=False)
    set_card_metadata(model, recipe)
    model.save(str(folder), safe_serialization=True)
    redact_card(folder / "README.md")  # write_card rewrites it; a crash before must not leak
    if recipe.export.dtype != "float32":
        cast_saved_weights(folder, recipe.export.dtype)
    (folder / "LICENSE").write_text(apache_license_text(), encoding="utf-8")
    return folder


def cast_saved_weights(folder: Path, dtype: str) -> None:
    """Rewrite every floating-point tensor of the saved safetensors files in ``dtype`` and
    record it in ``config.json``, so loaders keep that dtype. The in-memory model (float32
    master weights, still used for the test evaluation) is not touched."""
    from safetensors.torch import load_file, save_file

    target = torch_dtype(dtype)
    for weights in folder.rglob("*.safetensors"):
        tensors = {name: tensor.to(target) if tensor.is_floating_point() else tensor
                   for name, tensor in load_file(weights).items()}
        save_file(tensors, weights, metadata={"format": "pt"})
    for config in folder.rglob("config.json"):
        data = json.loads(config.read_text(encoding="utf-8"))
        if "model_type" in data:  # the transformers config, not sentence-transformers' own
            data["dtype"] = dtype
            data.pop("torch_dtype", None)
            config.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


EXPORT_STAGES = ("tapt", "dapt", "merge", "combine", "export")
"""The ``stage`` every record tapt writes carries (:func:`write_preset_record`'s callers)."""
