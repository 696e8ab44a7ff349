"""DAPT: domain-adaptive (continued) pretraining of an encoder on passages, before TAPT.

Phases, as in :mod:`tapt.training.tapt` (and with its run folder, resume, tracking,
non-finite guard, retrieval evaluator, export and Hub push): check (recipe, output
folder, passages) -> set up (model, objective, sequences) -> train (held-out loss at every
save, and the zero-shot dev retrieval metrics of the encoder as it is) -> export.

Objectives:

- ``mlm``: masked language modelling with transformers' ``Trainer`` and
  ``DataCollatorForLanguageModeling`` (15% masking, optional whole-word masking) on the
  model's ``AutoModelForMaskedLM`` (its MLM head loaded when the checkpoint has one,
  initialised otherwise). The encoder weights are copied into the SentenceTransformer
  (the family's pooling and prompts) for each retrieval evaluation and for the export.
  The held-out passages are masked once with a fixed seed, so their loss (and perplexity)
  is comparable across saves.
- ``simcse``: unsupervised SimCSE through sentence-transformers: each passage window
  against itself under dropout noise, in-batch negatives (MultipleNegativesRankingLoss),
  for any model (Qwen3 too: its missing dropout is supplied while training).

The export (``OUTPUT/final``) is a SentenceTransformer folder that ``tapt train`` starts
from (``model.name: OUTPUT/final``); ``tapt_preset.json`` keeps the base model's family
preset so the TAPT run pools and prompts as the base model did.

Example::

    from tapt.recipe import load_recipe
    from tapt.training.dapt import dapt

    result = dapt(load_recipe("recipes/dapt-quickstart.yaml", kind="dapt"))
    result.history[-1]["heldout_loss"]
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from transformers import TrainerCallback

from tapt.recipe import DaptRecipe, RecipeError
from tapt.training.arguments import common_arguments, is_main_process
from tapt.training.run_dir import RunDir
from tapt.training.run_start import RunStart, open_run_dir

logger = logging.getLogger(__name__)

WHOLE_WORD_REPLACEMENT = {"mask_replace_prob": 1.0, "random_replace_prob": 0.0}
"""transformers' whole-word masking replaces every chosen word by masks (no random or kept
tokens); saying so avoids its warning."""

DEFAULT_MAX_LENGTH = 512
"""DAPT sequence length when neither the recipe nor the model says less."""


@dataclass
class DaptResult:
    """Where the run is and what it measured (one history entry per evaluation)."""

    run_dir: Path
    final_dir: Path | None
    history: list[dict] = field(default_factory=list)


class DaptRecorder(TrainerCallback):
    """At every evaluation: the held-out loss (and perplexity for ``mlm``) with the dev
    retrieval metrics of the encoder as it is, as one line of ``metrics.jsonl``.

    With ``run_retrieval`` the recorder runs the evaluator itself (the masked-LM trainer
    does not know it); otherwise the trainer already ran it (SimCSE on
    sentence-transformers' trainer) and its last record is used.
    """

    def __init__(self, run: RunDir, objective: str, evaluator=None, sync=None,
                 run_retrieval: bool = False) -> None:
        self.run, self.objective = run, objective
        self.evaluator, self.sync, self.run_retrieval = evaluator, sync, run_retrieval
        self.history: list[dict] = []

    def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):
        metrics = metrics or {}
        record = {"step": state.global_step, "epoch": state.epoch}
        if "eval_loss" in metrics:
            record["heldout_loss"] = metrics["eval_loss"]
            if self.objective == "mlm":
                record["perplexity"] = math.exp(min(metrics["eval_loss"], 700.0))
        if self.evaluator is not None:
            if self.run_retrieval:
                self.evaluator(self.sync(), steps=state.global_step, epoch=state.epoch)
            last = self.evaluator.history[-1]
            record.update({key: value for key, value in last.items()
                           if key not in ("step", "epoch", "seconds")})
        self.history.append(record)
        if is_main_process():
            from tapt.files import append_json_line

            append_json_line(self.run.metrics_file, record)
        return control


def dapt(recipe: DaptRecipe, *, callbacks: list | None = None,
         overwrite: bool = False) -> DaptResult:
    """Run a DAPT recipe end to end; see the module docstring for the phases.

    Raises:
        NonFiniteTrainingError: a NaN/inf loss or gradient and ``on_nonfinite: stop``.
        TrainingInterrupted: Ctrl-C while training (a ``KeyboardInterrupt`` naming the
            last complete checkpoint).
    """
    from tapt.training.tapt import check_hub

    # 1. Check everything cheap before anything heavy (the run folder is locked).
    check_hub(recipe)
    with open_run_dir(recipe, overwrite=overwrite) as start:
        return dapt_in(start, recipe, callbacks=callbacks)


def dapt_in(start: RunStart, recipe: DaptRecipe, *, callbacks: list | None = None
            ) -> DaptResult:
    """The phases of :func:`dapt` after the run folder was checked and locked."""
    from transformers import set_seed

    from tapt.data.passages import collect_passages, split_held_out
    from tapt.encoders.loading import load_sentence_transformer
    from tapt.files import publish
    from tapt.training.nonfinite import NonFiniteGuard
    from tapt.training.tapt import (
        export_staging,
        model_spec,
        push_to_hub,
        read_history,
        run_trainer,
        write_results,
    )

    # 2. Load and check the passages, then the model and the objective's needs; whatever
    # fails here leaves the run folder as it was.
    eval_data = retrieval_data(recipe)
    passages = collect_passages(recipe.data, eval_data if recipe.data.path
                                and not recipe.data.dev_data else None)
    train_texts, held_out = split_held_out(passages, recipe.data.held_out_fraction,
                                           recipe.data.held_out_max, recipe.data.seed)
    set_seed(recipe.training.seed)
    spec = model_spec(recipe)
    model = load_sentence_transformer(spec)
    evaluator = dev_evaluator(recipe, eval_data)
    guard = NonFiniteGuard(recipe.training.on_nonfinite, recipe.training.max_nonfinite_steps,
                           evaluator=evaluator)
    max_length = sequence_length(recipe, model)
    check_objective(recipe, model, max_length)

    # 3. The run's first write (recipe.yaml), then the objective's trainer.
    run, resume_from = start.begin(recipe)
    logger.info("DAPT (%s): %d training and %d held-out passages, sequences of %d tokens",
                recipe.objective.name, len(train_texts), len(held_out), max_length)
    build = mlm_trainer if recipe.objective.name == "mlm" else simcse_trainer
    trainer, finish = build(recipe, run, model, train_texts, held_out, max_length, evaluator,
                            guard, callbacks, resume_from is not None)

    # 4. Train.
    run_trainer(trainer, run, resume_from)
    finish()

    # 5. Export the encoder as it ended (DAPT keeps no "best" checkpoint).
    from tapt.training.tapt import check_exportable

    check_exportable(model, evaluator, None)
    history = read_history(run)
    result = DaptResult(run_dir=run.root, final_dir=None, history=history)
    if not is_main_process():
        return result
    staging = export_staging(model, run, recipe)
    export_dapt(model, spec, staging, recipe, history)
    write_results(run, {"status": "finished", "objective": recipe.objective.name,
                        "sequence_length": max_length, "training_passages": len(train_texts),
                        "held_out_passages": len(held_out), "nonfinite_steps": guard.skipped,
                        "nonfinite_events": guard.records(), "history": history})
    result.final_dir = publish(staging, run.final)
    if recipe.tracking.backend == "wandb":
        import wandb

        if wandb.run is not None:
            wandb.finish()
    push_to_hub(recipe, run.final)
    return result


def retrieval_data(recipe: DaptRecipe):
    """The BEIR data of the zero-shot dev evaluation (also the corpus when it is
    ``data.path``), or None when the recipe evaluates no retrieval."""
    from tapt.data.sources import load_data

    data = recipe.data
    source = data.dev_data or data.path
    if not source:
        return None
    splits = [data.dev_split] if data.dev_split else []
    config = data.config if source == data.path else None
    return load_data(source, config, splits, revision=data.revision if source == data.path
                     else None, require_anchor=not data.lenient, allow_empty=data.lenient)


def dev_evaluator(recipe: DaptRecipe, dataset):
    """tapt's retrieval evaluator on the dev split, or None without one."""
    if dataset is None or not recipe.data.dev_split:
        return None
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.retrieval.evaluator import RetrievalEvaluator

    dev_ids = subcorpus_ids(dataset, recipe.data.dev_split,
                            distractors=recipe.data.dev_distractors, seed=recipe.data.dev_seed)
    return RetrievalEvaluator(dataset, recipe.data.dev_split, dev_ids, name="dev",
                              metric=recipe.eval.metric, batch_size=recipe.eval.batch_size,
                              top_k=recipe.eval.top_k, with_title=recipe.data.with_title,
                              dtype=recipe.eval.dtype,
                              max_tokens_per_batch=recipe.eval.max_tokens_per_batch,
                              on_nonfinite="record")


def sequence_length(recipe: DaptRecipe, model) -> int:
    """``chunking.max_length``, else the model's maximum length capped at 512."""
    if recipe.chunking.max_length:
        return recipe.chunking.max_length
    return min(model.max_seq_length or DEFAULT_MAX_LENGTH, DEFAULT_MAX_LENGTH)


def check_objective(recipe: DaptRecipe, model, max_length: int) -> None:
    """Checks that need the loaded model: ``mlm`` needs a mask token; the window overlap
    must be smaller than the sequence length."""
    if recipe.objective.name == "mlm" and model.tokenizer.mask_token_id is None:
        raise RecipeError(f"objective mlm needs a tokenizer with a mask token; "
                          f"{recipe.model.name} has none (a decoder such as Qwen3?): use "
                          "objective.name: simcse")
    window_overlap(recipe, max_length)


def window_overlap(recipe: DaptRecipe, max_length: int) -> int:
    """``chunking.overlap``, else an eighth of the sequence length."""
    overlap = recipe.chunking.overlap
    if overlap is None:
        return max_length // 8
    if overlap >= max_length:
        raise RecipeError(f"chunking.overlap ({overlap}) must be smaller than the sequence "
                          f"length ({max_length})")
    return overlap


# --- masked language modelling ------------------------------------------------------------

def mlm_model(recipe: DaptRecipe, model):
    """The model's ``AutoModelForMaskedLM`` (head from the checkpoint when it has one),
    holding exactly the SentenceTransformer's encoder weights."""
    import torch
    from transformers import AutoModelForMaskedLM
    from transformers.utils import logging as hf_logging

    from tapt.encoders.loading import resolve_model_path

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
    first = json.loads(modules.read_text(encoding="utf-8"))[0]
    return str(Path(path) / first.get("path", ""))


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
        import os

        import numpy as np

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


def mlm_trainer(recipe, run, model, train_texts, held_out, max_length, evaluator, guard,
                callbacks, resuming):
    from datasets import Dataset
    from transformers import (
        DataCollatorForLanguageModeling,
        DataCollatorForTokenClassification,
        TrainingArguments,
    )

    from tapt.training.chunking import mlm_sequences
    from tapt.training.trainer import GuardedTrainer

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
                             callbacks=[*(callbacks or []), recorder, masking], guard=guard)
    return trainer, sync


# --- SimCSE -------------------------------------------------------------------------------

def set_dropout(model, probability: float | None) -> dict:
    """Set every dropout of ``model`` to ``probability``; returns what to restore.

    A model with no dropout module on its hidden states (Qwen3 has attention dropout at
    most) gets dropout on its input embeddings while training, through a forward hook:
    SimCSE needs two views of a passage that differ.
    """
    from torch import nn
    from torch.nn import functional

    previous: dict = {}
    if probability is None:
        return previous
    for name, module in model.named_modules():
        if isinstance(module, nn.Dropout):
            previous[(name, "p")] = module.p
            module.p = probability
        elif isinstance(getattr(module, "attention_dropout", None), float):
            previous[(name, "attention_dropout")] = module.attention_dropout
            module.attention_dropout = probability
    if not any(attribute == "p" for _, attribute in previous):
        embeddings = model.transformers_model.get_input_embeddings()
        previous["hook"] = embeddings.register_forward_hook(
            lambda module, args, output: functional.dropout(output, probability,
                                                            module.training))
    return previous


def restore_dropout(model, previous: dict) -> None:
    modules = dict(model.named_modules())
    for key, value in previous.items():
        if key == "hook":
            value.remove()
        else:
            name, attribute = key
            setattr(modules[name], attribute, value)


def simcse_trainer(recipe, run, model, train_texts, held_out, max_length, evaluator, guard,
                   callbacks, resuming):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    from tapt.recipe import LossSettings
    from tapt.training.chunking import text_windows
    from tapt.training.losses import build_loss

    tokenizer = model.tokenizer

    def pairs(texts):
        windows = text_windows(tokenizer, texts, max_length=max_length,
                               overlap=window_overlap(recipe, max_length))
        return Dataset.from_dict({"anchor": windows, "positive": windows})

    from tapt.training.trainer import TaptTrainer

    class SimcseTrainer(TaptTrainer):
        """Held-out loss = the SimCSE objective on held-out passages, dropout included
        (with a fixed seed per batch, so saves are comparable); in eval mode the two
        views would be identical and the loss near zero whatever the model."""

        def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
            import torch

            self._eval_batch = getattr(self, "_eval_batch", 0) + 1
            with torch.random.fork_rng(devices=[] if not torch.cuda.is_available()
                                       else [torch.cuda.current_device()]):
                torch.manual_seed(recipe.data.seed * 100_003 + self._eval_batch)
                model.train()
                try:
                    return super().prediction_step(model, inputs, prediction_loss_only,
                                                   ignore_keys)
                finally:
                    model.eval()

        def evaluation_loop(self, *args, **kwargs):
            self._eval_batch = 0
            return super().evaluation_loop(*args, **kwargs)

    document = model.prompts.get("document", "")
    prompts = {"anchor": document, "positive": document} if document else None
    previous = set_dropout(model, recipe.objective.dropout)
    loss = build_loss(model, LossSettings(name="mnrl", scale=recipe.objective.scale))
    recorder = DaptRecorder(run, "simcse", evaluator)
    args = SentenceTransformerTrainingArguments(
        **common_arguments(recipe, run.checkpoints, resuming), load_best_model_at_end=False,
        batch_sampler=BatchSamplers.NO_DUPLICATES, prompts=prompts)
    trainer = SimcseTrainer(model=model, args=args, train_dataset=pairs(train_texts),
                          eval_dataset=pairs(held_out), loss=loss, evaluator=evaluator,
                          callbacks=[*(callbacks or []), recorder], guard=guard)

    return trainer, lambda: restore_dropout(model, previous)


# --- export -------------------------------------------------------------------------------

def export_dapt(model, spec, folder: Path, recipe: DaptRecipe, history: list[dict]) -> None:
    """The export (``OUTPUT/final``, written into ``folder``): the SentenceTransformer, the
    preset record that lets ``tapt train`` start from it, and a card section with the
    curves."""
    from tapt.encoders.preset_record import write_preset_record
    from tapt.files import atomic_write_text
    from tapt.training.export import card_with_front_matter, save_model

    save_model(model, folder, recipe)
    write_preset_record(folder, model, spec, stage="dapt", objective=recipe.objective.name)
    card = folder / "README.md"
    text = card.read_text(encoding="utf-8") if card.exists() else ""
    text = card_with_front_matter(text, recipe, summary={})
    atomic_write_text(card, text.rstrip("\n") + "\n\n" + dapt_card_section(recipe, history))


def dapt_card_section(recipe: DaptRecipe, history: list[dict]) -> str:
    from tapt.retrieval.metrics import METRIC_KEYS

    source = recipe.data.path or ", ".join(recipe.data.files)
    intro = (f"Continued pretraining of `{recipe.model.name}` with the "
             f"`{recipe.objective.name}` objective on {source}. Start a TAPT run from this "
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
