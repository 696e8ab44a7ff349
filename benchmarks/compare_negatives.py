"""Which negatives train best? Same seeds, same recipe, one change at a time.

Settings (each a full ``tapt train`` from the base model, best checkpoint on dev):

- ``zero-shot``: the base model;
- ``mnrl``: plain MNRL on (query, anchor, graded hard negative), what ``tapt train`` does;
- ``mnrl+soft``: the soft negative as a second negative column;
- ``bm25-kK``: K negatives mined with BM25 (``tapt mine``) added to each row;
- ``round2-kK``: K negatives mined with the round-1 model (the best ``bm25-k*`` run on
  dev), training again from the base model.

The winner is chosen on the dev metric only (``best dev`` of each run); test metrics are
reported for every setting. Finished runs are reused, so an interrupted comparison resumes.

Example (the tables of docs/mining.md)::

    python benchmarks/compare_negatives.py --data data/quickstart \\
        --recipe recipes/quickstart.yaml --out runs/negatives-quickstart
    python benchmarks/compare_negatives.py --data ../shared/data/cranfield --lenient \\
        --recipe recipes/quickstart.yaml --out runs/negatives-cranfield \\
        --set data.lenient=true data.missing_hard_negative=pair

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from arm_records import read_measured, trained_summary
from rich.console import Console
from rich.table import Table

console = Console()
METRICS = ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100")


def run_setting(name: str, args, overrides: list[str]) -> dict:
    """Train one setting (or read its finished run) and return its dev and test metrics.

    Each run is its own ``tapt train`` process (the same command a user types; an
    interrupted run resumes from its checkpoint when the comparison is started again)."""
    output = args.out / name
    results = output / "results.json"
    command = [sys.executable, "-m", "tapt", "train", str(args.recipe), "--test",
               f"data.path={args.data}", f"output_dir={output}", "eval.zero_shot=false",
               *args.set, *overrides]
    summary = trained_summary(results, lambda: subprocess.run(command, check=True))
    dev = next((v for k, v in summary.items() if k.startswith("best dev")), None)
    if dev is None or "TAPT test" not in summary:
        raise SystemExit(f"{results}: field 'summary' holds no 'best dev' or 'TAPT test' "
                         f"(was it trained with --test and a dev split?); remove {output}")
    return {"setting": name, "dev": dev, "test": summary["TAPT test"]}


def mine(name: str, args, retriever: str, per_query: int, skip_top: int = 0) -> Path:
    from tapt.cli import main

    path = args.out / f"{name}.jsonl"
    if not path.is_file():
        command = ["mine", "--data", str(args.data), "--retriever", retriever, "--output",
                   str(path), "--per-query", str(per_query), "--depth", str(args.depth),
                   "--margin", str(args.margin), "--sampling", args.sampling,
                   "--seed", str(args.seed), "--skip-top", str(skip_top), "--quiet"]
        if args.lenient:
            command.append("--lenient")
        if main(command) != 0:
            raise SystemExit(f"mining {name} failed")
    return path


def zero_shot(args) -> dict:
    """The base model's dev (recipe's dev sub-corpus) and test metrics."""
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.recipe import load_recipe
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.evaluate import evaluate
    from tapt.training.inputs import load_recipe_data

    cached = args.out / "zero-shot.json"
    if cached.is_file():  # checked: a damaged record is named, not tabulated
        return read_measured(cached, "the zero-shot record of compare_negatives.py")
    recipe = load_recipe(args.recipe, [f"data.path={args.data}", "output_dir=unused",
                                       *args.set])
    data = recipe.data
    dataset = load_recipe_data(recipe, with_test=True)  # a carved dev split as training's
    spec = ModelSpec.from_settings(recipe.model)
    retriever = DenseRetriever(SentenceTransformerEncoder.load(spec),
                               batch_size=recipe.eval.batch_size, progress=False)
    dev_ids = subcorpus_ids(dataset, data.dev_split, distractors=data.dev_distractors,
                            seed=data.dev_seed)
    result = {"setting": "zero-shot",
              "dev": evaluate(retriever, dataset, data.dev_split, corpus_ids=dev_ids).metrics,
              "test": evaluate(retriever, dataset, data.test_split).metrics}
    args.out.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps(result, indent=2) + "\n")
    return result


def compare(args) -> list[dict]:
    rows = [zero_shot(args), run_setting("mnrl", args, []),
            run_setting("mnrl+soft", args, ["data.soft_negative=true"])]
    round1 = []
    for k in args.k:
        mined = mine(f"bm25-k{k}", args, "bm25", k)
        round1.append(run_setting(f"bm25-k{k}", args, [f"data.mined_negatives={mined}",
                                                       f"data.negatives_per_query={k}"]))
    rows += round1
    best = max(round1, key=lambda row: row["dev"][args.metric])
    k = int(best["setting"].rsplit("k", 1)[1])
    teacher = args.out / best["setting"] / "final"
    mined = mine(f"round2-k{k}", args, str(teacher), k)
    rows.append(run_setting(f"round2-k{k}", args, [f"data.mined_negatives={mined}",
                                                   f"data.negatives_per_query={k}"]))
    return rows


def print_rows(rows: list[dict], metric: str, title: str) -> str:
    """A rich table and the same as Markdown (returned)."""
    winner = max(rows[1:], key=lambda row: row["dev"][metric])["setting"]
    table = Table(title=title)
    table.add_column("setting")
    table.add_column(f"dev {metric}", justify="right")
    for key in METRICS:
        table.add_column(f"test {key}", justify="right")
    lines = [f"| setting | dev {metric} | " + " | ".join(f"test {k}" for k in METRICS) + " |",
             "|---|---:|" + "---:|" * len(METRICS)]
    for row in rows:
        mark = " (chosen on dev)" if row["setting"] == winner else ""
        cells = [f"{row['dev'][metric]:.4f}", *(f"{row['test'][k]:.4f}" for k in METRICS)]
        table.add_row(row["setting"] + mark, *cells)
        lines.append(f"| {row['setting']}{mark} | " + " | ".join(cells) + " |")
    console.print(table)
    return "\n".join(lines) + "\n"


def base_parser() -> argparse.ArgumentParser:
    """The flags every comparison script shares: data, base recipe, output, overrides."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--recipe", type=Path, required=True, help="the base TAPT recipe")
    parser.add_argument("--out", type=Path, required=True, help="runs and mined files go here")
    parser.add_argument("--set", nargs="*", default=[], metavar="key=value",
                        help="recipe overrides for every run")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = base_parser()
    parser.add_argument("--lenient", action="store_true", help="mine with --lenient")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3, 7])
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--margin", default="0.05")
    parser.add_argument("--sampling", choices=("random", "top"), default="random")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metric", default="binary_ndcg@10")
    args = parser.parse_args(argv)
    rows = compare(args)
    markdown = print_rows(rows, args.metric, f"negatives on {args.data}")
    (args.out / "comparison.md").write_text(markdown, encoding="utf-8")
    (args.out / "comparison.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
