"""DAPT's ``mlm`` objective: masked language modelling with transformers' ``Trainer`` on
the model's ``AutoModelForMaskedLM``, whose encoder weights are copied into the
SentenceTransformer for each retrieval evaluation and the export; training batches are
masked reproducibly (per batch seed), held-out ones once with a fixed seed."""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path

import numpy as np
from transformers import (
    AutoModelForMaskedLM,
    DataCollatorForLanguageModeling,
    DataCollatorForTokenClassification,
    TrainerCallback,
    TrainingArguments,
)
from transformers.utils import logging as hf_logging

from tapt.encoders.model_paths import resolve_model_path
from tapt.recipe import DaptRecipe
from tapt.training.arguments import common_arguments
from tapt.training.chunking import mlm_sequences
from tapt.training.dapt.dapt_inputs import window_overlap
from tapt.training.dapt.recorder import DaptRecorder
from tapt.training.trainer import GuardedTrainer

logger = logging.getLogger(__name__)

WHOLE_WORD_REPLACEMENT = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0}
"""transformers' whole-word masking replaces every chosen word by masks (no random or kept
tokens); saying so avoids its warning."""



def mlm_model(recipe: DaptRecipe, model):
    """The model's ``AutoModelForMaskedLM`` (head from the checkpoint when it has one),
    holding exactly the SentenceTransformer's encoder weights."""
    import torch

    encoder = model.transformers_model
    path = transformer_folder(resolve_model_path(recipe.model.name))
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # a missing MLM head is expected; tapt says it below
    try:
        mlm, info = AutoModelForMaskedLM.from_pretrained(
            path, dtype=torch.float32, trust_remote_code=recipe.model.trust_remote_code,
            revision=recipe.model.revision, output_loading_info=True)
    finally:
        hf_logging.set_verbosity(verbosity)
    copy_encoder(encoder, mlm.base_model)  # the weights the ST loaded (its preset applied)
    prefix = f"{mlm.base_model_prefix}."
    head = [key for key in info.get("missing_keys", []) if not key.startswith(prefix)]
    logger.info("masked-LM head of %s: %s", recipe.model.name,
                f"initialised ({len(head)} tensors not in the checkpoint)" if head
                else "loaded from the checkpoint")
    return mlm


def transformer_folder(path: str) -> str:
    """Where a SentenceTransformer folder keeps its transformers model (its first module),
    or ``path`` itself (a plain transformers model or a Hub id)."""
    modules = Path(path) / "modules.json"
    if not modules.is_file():
        return path
    try:
        entries = json.loads(modules.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RecursionError, ValueError) as err:
        raise ValueError(f"{modules}: not readable JSON ({type(err).__name__}); a "
                         "SentenceTransformer folder lists its modules there") from None
    if not isinstance(entries, list) or not entries or not all(
            isinstance(entry, dict) and isinstance(entry.get("path", ""), str)
            and isinstance(entry.get("idx", 0), int)
            and not isinstance(entry.get("idx", 0), bool) for entry in entries):
        raise ValueError(f"{modules}: expected a non-empty list of modules, each with a "
                         "text 'path' and a whole-number 'idx'")
    first = min(entries, key=lambda entry: entry.get("idx", 0))
    folder = Path(path).resolve()
    inner = (folder / first.get("path", "")).resolve()
    if inner != folder and folder not in inner.parents:
        raise ValueError(f"{modules}: field 'path': the first module's folder "
                         f"{first.get('path')!r} lies outside the model folder")
    return str(inner)


def copy_encoder(source, target) -> None:
    """Load ``source``'s weights into ``target`` (same architecture; a pooler that only one
    of them has is the one difference allowed)."""
    result = target.load_state_dict(source.state_dict(), strict=False)
    bad = [key for key in [*result.missing_keys, *result.unexpected_keys]
           if not key.startswith("pooler.")]
    if bad:
        raise RuntimeError(f"the masked-LM model's encoder does not match the embedding "
                           f"model's (e.g. {bad[:3]})")


class BatchSeededMasking(TrainerCallback):
    """Mask every training batch with a generator seeded from (seed, epoch, the batch's
    example ids): transformers' Trainer collates the first batch after a resume before it
    restores the RNG, so masks drawn from the global RNG would make a resumed run differ
    from an uninterrupted one. Each epoch still masks anew (dynamic masking)."""

    def __init__(self, collator, seed: int) -> None:
        self.collator, self.seed, self.epoch = collator, seed, 0

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.epoch = math.floor((state.epoch or 0.0) + 1e-9)
        return control

    def __call__(self, features: list[dict]) -> dict:
        ids = [int(feature["idx"]) for feature in features]
        features = pad_offsets([{k: v for k, v in feature.items() if k != "idx"}
                                for feature in features], self.collator.tokenizer)
        batch_seed = int(np.random.SeedSequence([self.seed, self.epoch, *ids]).generate_state(1)[0])
        self.collator.generator = self.collator.get_generator(batch_seed, "pt")
        self.collator._generator_pid = os.getpid()
        return self.collator(features)


def pad_offsets(features: list[dict], tokenizer) -> list[dict]:
    """Pad ``offset_mapping`` (whole-word masking) like the tokenizer pads ``input_ids``:
    ``tokenizer.pad`` pads the ids only."""
    if not features or "offset_mapping" not in features[0]:
        return features
    width = max(len(feature["input_ids"]) for feature in features)
    left = tokenizer.padding_side == "left"
    for feature in features:
        fill = [(0, 0)] * (width - len(feature["offset_mapping"]))
        offsets = list(feature["offset_mapping"])
        feature["offset_mapping"] = fill + offsets if left else offsets + fill
    return features


class MaskedOrPadded:
    """Mask training batches (``DataCollatorForLanguageModeling``); pad held-out ones,
    which were masked once with a fixed seed and carry their ``labels``."""

    def __init__(self, masking, padding) -> None:
        self.masking, self.padding = masking, padding

    def __call__(self, features: list[dict]) -> dict:
        if features and "labels" in features[0]:
            return self.padding(features)
        return self.masking(features)


def fixed_masks(collator_class, tokenizer, sequences: list[dict], probability: float,
                whole_word: bool, seed: int) -> list[dict]:
    """Mask ``sequences`` once, reproducibly: ``input_ids`` with masks and ``labels``."""
    collator = collator_class(tokenizer, mlm_probability=probability,
                              whole_word_mask=whole_word, seed=seed,
                              **WHOLE_WORD_REPLACEMENT if whole_word else {})
    masked = []
    for start in range(0, len(sequences), 256):
        batch = collator(pad_offsets([dict(row) for row in sequences[start:start + 256]],
                                     tokenizer))
        attention = batch.get("attention_mask")
        if attention is None:
            attention = batch["input_ids"] != tokenizer.pad_token_id
        for ids, labels, keep in zip(batch["input_ids"], batch["labels"], attention.bool()):
            masked.append({"input_ids": ids[keep].tolist(), "labels": labels[keep].tolist()})
    return masked


def mlm_trainer(recipe, run, model, train_texts, held_out, max_length, evaluator,
                nonfinite_guard, callbacks, resuming):
    """The masked-LM ``Trainer`` (on a copy of the encoder with its MLM head) and the
    function that copies its encoder weights back into ``model``."""
    from datasets import Dataset

    objective, chunking = recipe.objective, recipe.chunking
    tokenizer = model.tokenizer
    mlm = mlm_model(recipe, model)
    wwm = objective.whole_word_masking
    overlap = window_overlap(recipe, max_length)
    train_rows = mlm_sequences(tokenizer, train_texts, max_length=max_length,
                               mode=chunking.mode, overlap=overlap, with_offsets=wwm)
    held_rows = fixed_masks(DataCollatorForLanguageModeling, tokenizer,
                            mlm_sequences(tokenizer, held_out, max_length=max_length,
                                          mode=chunking.mode, overlap=overlap,
                                          with_offsets=wwm),
                            objective.mlm_probability, wwm, recipe.data.seed)
    masking = BatchSeededMasking(
        DataCollatorForLanguageModeling(tokenizer, mlm_probability=objective.mlm_probability,
                                        whole_word_mask=wwm, seed=recipe.training.seed,
                                        **WHOLE_WORD_REPLACEMENT if wwm else {}),
        recipe.training.seed)
    collator = MaskedOrPadded(masking, DataCollatorForTokenClassification(tokenizer))
    for index, row in enumerate(train_rows):
        row["idx"] = index

    def sync():
        """The SentenceTransformer with the masked-LM model's current encoder weights."""
        model.to(next(mlm.parameters()).device)
        copy_encoder(mlm.base_model, model.transformers_model)
        return model

    recorder = DaptRecorder(run, "mlm", evaluator, sync, run_retrieval=evaluator is not None)
    args = TrainingArguments(**common_arguments(recipe, run.checkpoints, resuming),
                             load_best_model_at_end=False, remove_unused_columns=False)
    trainer = GuardedTrainer(model=mlm, args=args, train_dataset=Dataset.from_list(train_rows),
                             eval_dataset=Dataset.from_list(held_rows), data_collator=collator,
                             callbacks=[*(callbacks or []), recorder, masking],
                             nonfinite_guard=nonfinite_guard)
    return trainer, sync
