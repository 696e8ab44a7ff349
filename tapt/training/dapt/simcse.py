"""DAPT's ``simcse`` objective: unsupervised SimCSE on sentence-transformers' trainer, each
passage window against itself under dropout noise with in-batch negatives (dropout is added
to models that have none, such as Qwen3, while training)."""

from __future__ import annotations

from sentence_transformers import SentenceTransformerTrainingArguments
from sentence_transformers.base.sampler import BatchSamplers

from tapt.recipe import LossSettings
from tapt.training.arguments import common_arguments
from tapt.training.chunking import text_windows
from tapt.training.dapt.dapt_inputs import window_overlap
from tapt.training.dapt.recorder import DaptRecorder
from tapt.training.trainer import TaptTrainer


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
    """Undo :func:`set_dropout`."""
    modules = dict(model.named_modules())
    for key, value in previous.items():
        if key == "hook":
            value.remove()
        else:
            name, attribute = key
            setattr(modules[name], attribute, value)


def simcse_trainer(recipe, run, model, train_texts, held_out, max_length, evaluator,
                   nonfinite_guard, callbacks, resuming):
    """sentence-transformers' trainer on (window, same window) pairs under dropout, and
    the function that restores the model's dropout afterwards."""
    from datasets import Dataset

    from tapt.training.losses import build_loss

    tokenizer = model.tokenizer

    def pairs(texts):
        windows = text_windows(tokenizer, texts, max_length=max_length,
                               overlap=window_overlap(recipe, max_length))
        return Dataset.from_dict({"anchor": windows, "positive": windows})

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
                          callbacks=[*(callbacks or []), recorder],
                          nonfinite_guard=nonfinite_guard)

    return trainer, lambda: restore_dropout(model, previous)
