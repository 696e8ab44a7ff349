"""TAPT: contrastive fine-tuning on (query, anchor, hard negative) rows with
sentence-transformers' trainer (which runs on Accelerate: bf16, DDP, FSDP, DeepSpeed).

Phases: check (recipe, output folder: locked, then resumed, started or refused) -> load and
check (data, model, loss, evaluator; nothing is written yet) -> record the recipe -> train
(with dev evaluation, best checkpoint, resume, a non-finite guard) -> export -> optional
test evaluation. A run whose loss or gradients go non-finite stops (or skips those steps,
``training.on_nonfinite``) and never exports a diverged model. The steps DAPT shares
(trainer run, results, history, export staging, Hub push) are in :mod:`tapt.training.run`.

Example::

    from tapt.recipe import load_recipe
    from tapt.training.contrastive import train

    result = train(load_recipe("recipes/quickstart.yaml"), run_test=True)
    result.summary["TAPT test"]["binary_ndcg@10"]
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from transformers import set_seed

from tapt.data.beir import BeirDataset, strictness
from tapt.data.fingerprint import remember_digests
from tapt.data.mined import read_mined
from tapt.data.sources import load_data
from tapt.data.splits import check_no_split_file, splits_to_load, training_splits
from tapt.data.subcorpus import subcorpus_ids
from tapt.data.triplets import build_training_rows
from tapt.data.weak_pairs import weak_pairs_for, with_weak_pairs
from tapt.encoders.loading import load_sentence_transformer
from tapt.encoders.preset_record import write_preset_record
from tapt.recipe import Recipe, check_recipe
from tapt.retrieval.embedding_cache import local_cache_root
from tapt.retrieval.evaluate import evaluate
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.training.arguments import common_arguments
from tapt.training.average import average_last, check_saves
from tapt.training.distill import labeler_for
from tapt.training.distributed import is_main_process
from tapt.training.errors import NonFiniteTrainingError
from tapt.training.export import save_model, set_card_metadata, write_card
from tapt.training.guard_data import guard_evaluator
from tapt.training.lora import add_lora
from tapt.training.nonfinite import NonFiniteGuard, QueryIdsCollator
from tapt.training.run import (
    check_exportable,
    check_hub,
    export_staging,
    finish_wandb,
    model_spec,
    push_to_hub,
    read_history,
    run_trainer,
    write_results,
)
from tapt.training.run_dir import RunDir, checkpoint_step
from tapt.training.run_start import RunStart, open_run_dir
from tapt.training.scratch import scratch_folder
from tapt.training.split_notes import data_records, test_records
from tapt.training.tracking import check_wandb
from tapt.training.zero_shot_gate import GATE_KEY, enforce, gate_message, zero_shot_gate
from tapt.util.files import publish, unwritable_reason

logger = logging.getLogger(__name__)

TEST_RESULTS = "test.json"
"""``tapt train --test``'s test metrics in the run folder, in ``tapt eval --output``'s
format (per-query values, timings, ``evaluated``, ``provenance``)."""

EVAL_NAME = "dev"


@dataclass
class TrainResult:
    """Where the run is and what it measured."""

    run_dir: Path
    final_dir: Path | None
    summary: dict[str, dict[str, float]] = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    best_step: int | None = None
    zero_shot_gate: dict | None = None
    """Whether the export beats the zero-shot dev score (:mod:`tapt.training.zero_shot_gate`)."""


def load_recipe_data(recipe: Recipe, with_test: bool) -> BeirDataset:
    """The recipe's splits under its relevance rule; a query also judged in any other qrels
    file (the test split included when it is not loaded) is an error. Train is
    decontaminated against ``data.decontaminate``, and with ``data.dev_from_train`` the dev
    split is carved from what is left (:func:`tapt.data.splits.training_splits`)."""
    data = recipe.data
    if data.dev_from_train is not None:
        check_no_split_file(data.path, data.config, data.dev_split)
    dataset = load_data(data.path, data.config, splits_to_load(data, with_test),
                        revision=data.revision, relevant_from=data.relevant_from,
                        leaks="error", **strictness(data.lenient))
    dataset = training_splits(dataset, data, keep=(data.test_split,) if with_test else ())
    log_split_record(dataset)
    if with_test:  # test.json's data fingerprint: the files as read now, not after training
        remember_digests(dataset, [data.test_split])
    return dataset


def log_split_record(dataset: BeirDataset) -> None:
    """One log line each for the decontamination and the dev carve (also in results.json)."""
    if (record := dataset.decontaminated):
        logger.info("train decontaminated against %s: %d -> %d queries, %d -> %d judgments "
                    "(%d passages held out)", ", ".join(record["against"]),
                    *record["train_queries"], *record["judgments"], record["passages"])
    if (carve := dataset.carved):
        logger.info("dev carved from %s by %s: %d queries in %d groups, seed %d; %d dev "
                    "queries have a relevant passage that a training query has as a positive",
                    carve["carved_from"], carve["by"], carve["queries"], carve["groups"],
                    carve["seed"], carve["overlap"])


def column_prompts(model, columns: list[str] | None = None) -> dict[str, str]:
    """The model's query/document prompts per training column, as the data collator wants:
    the query prompt on ``query``, the document prompt on every other column.

    sentence-transformers' trainer ignores ``model.prompts``: without this, Qwen3 would
    train on bare queries but be evaluated (and used) with its instruction.
    """
    query, document = model.prompts.get("query", ""), model.prompts.get("document", "")
    columns = columns or ["query", "positive", "negative", "soft_negative"]
    prompts = {column: query if column == "query" else document for column in columns
               if column != "label"}  # distillation targets are not texts
    return {column: prompt for column, prompt in prompts.items() if prompt}


def dataset_columns(rows) -> list[str]:
    """Every column of a training ``Dataset`` or ``DatasetDict``."""
    if hasattr(rows, "column_names") and isinstance(rows.column_names, dict):
        return list(dict.fromkeys(c for names in rows.column_names.values() for c in names))
    return list(rows.column_names)


def training_arguments(recipe: Recipe, run: RunDir, resuming: bool,
                       prompts: dict[str, str] | None = None,
                       groups: list[str] | None = None):
    """sentence-transformers' arguments: the shared ones, best checkpoint on the dev metric,
    NO_DUPLICATES batches (or, with ``groups``, batches from one group:
    :mod:`tapt.training.grouped_batches`), per-column prompts."""
    from sentence_transformers import SentenceTransformerTrainingArguments
    from sentence_transformers.base.sampler import BatchSamplers

    from tapt.training.grouped_batches import grouped_batch_sampler

    return SentenceTransformerTrainingArguments(
        **common_arguments(recipe, run.checkpoints, resuming),
        load_best_model_at_end=True,
        metric_for_best_model=f"eval_{EVAL_NAME}_{recipe.eval.metric}",
        greater_is_better=True,
        batch_sampler=(grouped_batch_sampler(groups) if groups is not None
                       else BatchSamplers.NO_DUPLICATES),
        prompts=prompts or None,
    )


def train(recipe: Recipe, *, run_test: bool = False, callbacks: list | None = None,
          overwrite: bool = False) -> TrainResult:
    """Run a recipe end to end; see the module docstring for the phases. The run folder
    is locked while it runs (:mod:`tapt.training.run_start`).

    Raises:
        NonFiniteTrainingError: the loss, a gradient or a dev evaluation went non-finite
            and the recipe says stop (the last finite checkpoint is kept; no ``final/``).
        ZeroShotGateError: ``eval.require_beats_zero_shot`` and the exported weights' dev
            score is not above the zero-shot one (results.json records it; no ``final/``).
        TrainingInterrupted: Ctrl-C while training (a ``KeyboardInterrupt`` naming the
            last complete checkpoint).
    """
    # 1. Check everything cheap before anything heavy (the recipe again: one built
    # without validation, e.g. by ``model_copy``, has not been checked).
    check_recipe(recipe)
    check_hub(recipe)
    check_wandb(recipe.tracking.backend)  # credentials, before data and model load
    with ExitStack() as stack:
        start = stack.enter_context(open_run_dir(recipe, overwrite=overwrite))
        scratch = None
        if recipe.data.weak_pairs != "none":  # their Arrow files, removed when training ends
            scratch = stack.enter_context(scratch_folder("weak-pairs"))
        return train_in(start, recipe, run_test=run_test, callbacks=callbacks,
                        scratch=scratch)


def train_in(start: RunStart, recipe: Recipe, *, run_test: bool = False,
             callbacks: list | None = None, scratch: Path | None = None) -> TrainResult:
    """The phases of :func:`train` after the run folder was checked and locked
    (``scratch``: a folder that outlives training, for the weak pairs' Arrow files)."""
    from tapt.retrieval.in_loop import RetrievalEvaluator
    from tapt.training.losses import build_loss
    from tapt.training.trainer import TaptTrainer

    # 2. Load and check the data, then the model, loss and evaluator (seeded first: LoRA
    # and heads initialise randomly); whatever fails here leaves the run folder as it was.
    dataset = load_recipe_data(recipe, with_test=run_test)

    guard_set = guard_evaluator(recipe)  # eval.guard_data: checked before the model loads
    mined = None
    if recipe.data.mined_negatives:
        mined = read_mined(recipe.data.mined_negatives, dataset, recipe.data.train_split,
                           with_title=recipe.data.with_title)
    from tapt.training.grouped_batches import group_of

    grouping = group_of(dataset, recipe.data.batch_by)
    train_rows = build_training_rows(dataset, recipe.data.train_split,
                                     soft_negative=recipe.data.soft_negative,
                                     missing=recipe.data.missing_hard_negative,
                                     with_title=recipe.data.with_title, mined=mined,
                                     mined_per_row=recipe.data.negatives_per_query,
                                     group_of=grouping,  # margin_mse / distill_kl: targets
                                     labels=labeler_for(recipe.loss, dataset,
                                                        recipe.data.train_split,
                                                        recipe.data.mined_negatives))
    train_rows, groups = train_rows if grouping is not None else (train_rows, None)
    weak_record = None  # results.json's and the card's weak_pairs, when any are mixed in
    if recipe.data.weak_pairs != "none":  # passages alone: tapt.data.weak_pairs
        if scratch is None:
            raise RuntimeError("data.weak_pairs needs train_in's scratch folder (train makes one)")
        pairs, weak_record = weak_pairs_for(
            dataset, recipe.data.weak_pairs, folder=scratch, count=recipe.data.weak_pairs_max,
            seed=recipe.data.weak_pairs_seed)
        train_rows = with_weak_pairs(train_rows, pairs)
    dev_ids = subcorpus_ids(dataset, recipe.data.dev_split,
                            distractors=recipe.data.dev_distractors, seed=recipe.data.dev_seed)

    set_seed(recipe.training.seed)
    model = load_sentence_transformer(model_spec(recipe))
    if recipe.model.lora.enabled:
        add_lora(model, recipe.model.lora)

    set_card_metadata(model, recipe)
    loss = build_loss(model, recipe.loss)  # checks loss.matryoshka_dims against the model
    evaluator = RetrievalEvaluator(
        dataset, recipe.data.dev_split, dev_ids, name=EVAL_NAME, metric=recipe.eval.metric,
        batch_size=recipe.eval.batch_size, top_k=recipe.eval.top_k,
        with_title=recipe.data.with_title, dtype=recipe.eval.dtype,
        max_tokens_per_batch=recipe.eval.max_tokens_per_batch, on_nonfinite="record",
        metrics_file=str(start.run.metrics_file) if is_main_process() else None,
        guard=guard_set)
    guard = NonFiniteGuard(recipe.training.on_nonfinite, recipe.training.max_nonfinite_steps,
                           evaluator=evaluator)

    # 3. The run's first write (recipe.yaml), then the trainer.
    run, resume_from = start.begin(recipe)
    args = training_arguments(recipe, run, resuming=resume_from is not None,
                              prompts=column_prompts(model, dataset_columns(train_rows)),
                              groups=groups)
    trainer = TaptTrainer(model=model, args=args, train_dataset=train_rows, loss=loss,
                          evaluator=evaluator, callbacks=callbacks, guard=guard)
    trainer.data_collator = QueryIdsCollator(trainer.data_collator,
                                             query_ids_by_text(dataset, recipe.data.train_split))

    if recipe.training.average_last:  # before the zero-shot test (maybe 1M passages)
        check_saves(trainer, recipe.training.average_last)
    zero_shot_test = None
    if run_test and recipe.eval.zero_shot and resume_from is None:
        zero_shot_test = test_metrics(model, dataset, recipe)

    # 4. Train (the best checkpoint is loaded at the end).
    run_trainer(trainer, run, resume_from)
    best_step = checkpoint_step(trainer.state.best_model_checkpoint)
    history = read_history(run, require_metrics=True)
    check_exportable(model, evaluator, best_step)
    averaged, averaged_rows = None, {}
    if recipe.training.average_last:  # replaces the best checkpoint: tapt.training.average
        averaged = average_last(trainer, run, recipe.training.average_last)
        what = ("the averaged weights (training.average_last: steps "
                + ", ".join(map(str, averaged["steps"])) + ")")
        check_exportable(model, None, None, weights=what)
        averaged_rows = averaged_metrics(model, evaluator, what)
    summary = {**summarize(history, best_step), **averaged_rows}
    if zero_shot_test is not None:
        summary["zero-shot test"] = zero_shot_test
    gate = zero_shot_gate(history, best_step, recipe.eval.metric, averaged_rows.get(
        "averaged dev")) if recipe.eval.zero_shot else None
    enforce(gate, recipe.eval.require_beats_zero_shot, run,  # recorded, then nothing exported
            {"summary": summary, "best_step": best_step, "relevance": dataset.rule.to_dict(),
             **data_records(dataset), "history": history})
    result = TrainResult(run_dir=run.root, final_dir=None, history=history, best_step=best_step,
                         zero_shot_gate=gate)

    # 5. Export first (a failing test evaluation must not cost the model), then test.

    # The export is written into a staging folder and renamed to final/ only when whole.
    staging = None
    if is_main_process():
        staging = export_staging(model, run, recipe)
        save_model(model, staging, recipe)
        write_preset_record(staging, model, model_spec(recipe), stage="tapt",
                            loss=recipe.loss.name,
                            **({"averaged": averaged} if averaged else {}))
    # test.json: the test metrics as `tapt eval --output` writes them, for `tapt compare`
    trained_report = report_on_test(model, dataset, recipe, name=str(run.final)) \
        if run_test else None
    trained_test = trained_report.metrics if trained_report is not None else None
    if not is_main_process():
        return result
    if trained_test is not None:
        summary["TAPT test"] = trained_test
    result.summary = summary
    write_card(staging, recipe, history=history, summary=summary, best_step=best_step,
               averaged=averaged, gate=gate, splits=test_records(dataset, trained_report),
               weak_pairs=weak_record)
    write_results(run, {"status": "finished", "summary": summary, "best_step": best_step,
                        "export": averaged or {"kind": "best", "steps": [best_step]},
                        "eval_dtype": evaluator.history[-1]["dtype"] if evaluator.history
                        else None,
                        "nonfinite_steps": guard.skipped, "nonfinite_events": guard.records(),
                        "refused_evaluations": len(evaluator.refusals),
                        "relevance": dataset.rule.to_dict(),
                        **({"dev_carve": dataset.carved} if dataset.carved else {}),
                        **({"decontaminated": dataset.decontaminated}
                           if dataset.decontaminated else {}),
                        **({"weak_pairs": weak_record} if weak_record else {}),
                        **({GATE_KEY: gate} if gate else {}), "history": history})
    result.final_dir = publish(staging, run.final)
    if trained_report is not None:
        trained_report.write_json(run.root / TEST_RESULTS)
    if recipe.tracking.backend == "wandb":
        finish_wandb(summary)
    push_to_hub(recipe, run.final)
    if warning := gate_message(gate):
        logger.warning("%s", warning)
    return result


def query_ids_by_text(dataset: BeirDataset, split: str) -> dict[str, str]:
    """Query text -> id(s) for the split (ids joined with '|' when texts repeat)."""
    ids: dict[str, str] = {}
    for query_id in dataset.split(split):
        text = dataset.queries[query_id]
        ids[text] = f"{ids[text]}|{query_id}" if text in ids else query_id
    return ids


def summarize(history: list[dict], best_step: int | None) -> dict[str, dict[str, float]]:
    """Zero-shot and best-checkpoint dev metrics from the evaluation history."""
    summary: dict[str, dict[str, float]] = {}
    by_step = {entry["step"]: entry for entry in history if not entry.get("error")}
    if 0 in by_step:
        summary["zero-shot dev"] = {key: by_step[0][key] for key in METRIC_KEYS}
    if best_step is not None and best_step in by_step:
        # a stable key (the step is results.json's best_step; the card shows it)
        summary["best dev"] = {key: by_step[best_step][key] for key in METRIC_KEYS}
    for row, step in (("zero-shot guard", 0), ("best guard", best_step)):  # eval.guard_data
        entry = by_step.get(step, {})
        if all(isinstance(entry.get(f"guard_{key}"), float) for key in METRIC_KEYS):
            summary[row] = {key: entry[f"guard_{key}"] for key in METRIC_KEYS}
    return summary


def averaged_metrics(model, evaluator, what: str) -> dict[str, dict[str, float]]:
    """The averaged weights' ``averaged dev`` (and ``averaged guard``) summary rows; call on
    every rank. A refused (non-finite) evaluation refuses the export:
    :class:`~tapt.training.errors.NonFiniteTrainingError` naming ``what`` (the same on every
    rank: the outcome is rank 0's)."""
    rows = {}
    for row, measured in (("averaged dev", evaluator), ("averaged guard", evaluator.guard)):
        if measured is not None:
            outcome, _ = measured.measure(model)
            if outcome["error"]:
                raise NonFiniteTrainingError(
                    f"{what}: the {measured.name} evaluation was refused ({outcome['error']}); "
                    "nothing is exported (the checkpoints are kept)", [])
            rows[row] = {key: float(outcome["metrics"][key]) for key in METRIC_KEYS}
    return rows


def test_metrics(model, dataset: BeirDataset, recipe: Recipe) -> dict[str, float] | None:
    """Zero-shot test metrics on the full corpus (:func:`report_on_test`'s, through the
    embedding cache); call it on every rank."""
    report = report_on_test(model, dataset, recipe, cached=True)
    return report.metrics if report is not None else None


def report_on_test(model, dataset: BeirDataset, recipe: Recipe, *, name: str | None = None,
                   cached: bool = False):
    """The test split's :class:`~tapt.retrieval.evaluate.EvalReport` on the full corpus, as
    ``tapt eval`` reports it, the model named ``name`` (default ``model.name``: the base
    model's); call it on every rank.

    ``cached``: the passages go through the default embedding cache
    (:func:`~tapt.retrieval.embedding_cache.local_cache_root`; ``TAPT_EMBEDDING_CACHE=0``
    turns it off). The zero-shot test asks for it: every run of the same base model with the
    same ``eval`` settings encodes the same ~1M passages with the same weights, so all but
    the first hit, for the ~2 s of hashing the weights. The trained model's test does not:
    its weights are new, so nothing can hit, and what it would write serves only a later
    ``tapt eval`` whose key is the same, i.e. float32 weights computing in float32 (on a GPU
    ``tapt eval`` loads the export in bf16 and training evaluates float32 weights under bf16
    autocast, a LoRA run's weights are merged on export: other keys), while it costs a
    float32 copy of the test corpus's embeddings (4 GB at 1M x 1024) per run.

    Under DDP every rank encodes a share of the ~1M-passage test corpus and rank 0 scores
    (no cache); rank 0 gets the report, the others None. Non-finite embeddings raise
    :class:`~tapt.util.finite.NonFiniteEmbeddingsError` on every rank.
    """
    from tapt.retrieval.in_loop import model_retriever

    root = local_cache_root() if cached else None
    reason = None if root is None else unwritable_reason(root)
    if reason is not None:  # a cache that cannot be written must not stop the run
        logger.warning("embedding cache %s cannot be written (%s); the zero-shot test "
                       "encodes without it", root, reason)
        root = None
    retriever = model_retriever(model, name=name or recipe.model.name,
                                batch_size=recipe.eval.batch_size, top_k=recipe.eval.top_k,
                                dtype=recipe.eval.dtype,
                                max_tokens_per_batch=recipe.eval.max_tokens_per_batch,
                                cache_dir=None if root is None else str(root))
    return evaluate(retriever, dataset, recipe.data.test_split,
                    with_title=recipe.data.with_title, train_split=recipe.data.train_split,
                    info={"distractors": None, "fraction": None, "seed": None,
                          "top_k": recipe.eval.top_k})  # the whole corpus, as tapt eval's
