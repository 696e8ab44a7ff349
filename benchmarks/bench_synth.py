"""How long ``tapt data synth`` takes to build a dataset in memory, by size.

    python benchmarks/bench_synth.py --sizes 600 2000 20000

Prints one row per size (queries, distractors = 10/3 x queries): seconds, passages, and
the 1-minute load average. A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import time

from tapt.data.synth import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[600, 2000])
    args = parser.parse_args(argv)
    print("| queries | distractors | passages | seconds | load |")
    print("|---:|---:|---:|---:|---:|")
    for queries in args.sizes:
        distractors = queries * 10 // 3
        start = time.perf_counter()
        dataset = build(queries=queries, distractors=distractors, seed=0)
        seconds = time.perf_counter() - start
        print(f"| {queries:,} | {distractors:,} | {len(dataset.docs):,} | {seconds:.2f} | "
              f"{os.getloadavg()[0]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
