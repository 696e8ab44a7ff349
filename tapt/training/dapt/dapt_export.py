"""DAPT's export: the SentenceTransformer that ``tapt train`` starts from, its preset
record, and its model card (:func:`tapt.cards.run_card.write_dapt_card`: the held-out loss
and dev metrics per save)."""

from __future__ import annotations

from pathlib import Path

from tapt.cards.run_card import dapt_card_section, write_dapt_card
from tapt.encoders.preset_record import write_preset_record
from tapt.recipe import DaptRecipe
from tapt.training.export import save_model


def export_dapt(model, spec, folder: Path, recipe: DaptRecipe, history: list[dict]) -> None:
    """The export (``OUTPUT/final``, written into ``folder``): the SentenceTransformer, the
    preset record that lets ``tapt train`` start from it, and a card section with the
    curves."""
    save_model(model, folder, recipe)
    write_preset_record(folder, model, spec, stage="dapt", objective=recipe.objective.name)
    write_dapt_card(folder, recipe, dapt_card_section(recipe, history))  # its own card
