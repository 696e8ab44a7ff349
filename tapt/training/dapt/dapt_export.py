"""DAPT's export: the SentenceTransformer that ``tapt train`` starts from, its preset
record, and a model card section with the held-out loss and dev metrics per save."""

from __future__ import annotations

from pathlib import Path

from tapt.encoders.preset_record import write_preset_record
from tapt.recipe import DaptRecipe
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.training.export import data_label, model_label, save_model, write_dapt_card


def export_dapt(model, spec, folder: Path, recipe: DaptRecipe, history: list[dict]) -> None:
    """The export (``OUTPUT/final``, written into ``folder``): the SentenceTransformer, the
    preset record that lets ``tapt train`` start from it, and a card section with the
    curves."""
    save_model(model, folder, recipe)
    write_preset_record(folder, model, spec, stage="dapt", objective=recipe.objective.name)
    write_dapt_card(folder, recipe, dapt_card_section(recipe, history))  # its own card


def dapt_card_section(recipe: DaptRecipe, history: list[dict]) -> str:
    """The card section: what was trained on what, and the held-out loss and dev
    metrics at each save."""
    intro = (f"Continued pretraining of `{model_label(recipe.model.name)}` with the "
             f"`{recipe.objective.name}` objective on `{data_label(recipe)}`. Start a TAPT "
             "run from this "
             "folder (`model.name: <this folder>`): it keeps the base model's pooling and "
             "prompts (`tapt_preset.json`).")
    lines = ["## Domain-adaptive pretraining with tapt", "", intro, "",
             "| step | held-out loss | " + " | ".join(METRIC_KEYS) + " |",
             "|---:|---:|" + "---:|" * len(METRIC_KEYS)]
    for entry in history:
        loss = entry.get("heldout_loss")
        cells = [f"{entry[key]:.4f}" if isinstance(entry.get(key), float) else "-"
                 for key in METRIC_KEYS]
        lines.append(f"| {entry['step']} | {f'{loss:.4f}' if loss is not None else '-'} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
