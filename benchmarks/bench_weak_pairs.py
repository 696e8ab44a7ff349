"""Peak memory of building training's weak pairs (``data.weak_pairs``), by corpus size.

Two ways, each in a fresh process so that one's peak does not hide the other's:

- ``lists``: the pairs as Python lists, then ``Dataset.from_dict`` (an in-memory Arrow
  table): what tapt did before the pairs were streamed;
- ``streamed``: :func:`tapt.data.weak_pairs.weak_pairs_dataset`, Arrow files written a
  batch at a time into a scratch folder and memory-mapped (what training does now).

Each process first builds a synthetic corpus of N passages of about ``--chars`` characters
(five sentences each, titled), resets its peak resident memory (``VmHWM``, by writing 5
to ``/proc/self/clear_refs``) and reads its resident memory; the figure is the peak
above that, so neither the corpus nor its building is counted. Also
printed: seconds to build and the pairs' bytes of text. Run it alone on a quiet machine::

    python benchmarks/bench_weak_pairs.py --sizes 20000 50000 100000 --kind ict
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def status_kib(field: str) -> int:
    """A memory field of this process's /proc/self/status (VmRSS, VmHWM), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def reset_peak() -> None:
    """Start the peak (VmHWM) again from the resident memory now (Linux clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def synthetic_corpus(size: int, chars: int) -> dict:
    """``size`` titled passages of about ``chars`` characters, five sentences each."""
    from tapt.data.beir import Passage

    sentence = max(10, chars // 5 - 2)
    return {f"p{i}": Passage(
        title=f"Passage {i}: a binder grade {i % 97}",
        text=" ".join(f"Sentence {s} of passage {i} " + "x" * sentence + "." for s in range(5)))
        for i in range(size)}


def measure(way: str, size: int, chars: int, kind: str) -> dict:
    """One build, in this process (the child of :func:`main`)."""
    from datasets import Dataset

    from tapt.data.weak_pairs import weak_pairs, weak_pairs_dataset

    corpus = synthetic_corpus(size, chars)
    reset_peak()  # the corpus's own building does not count
    before = status_kib("VmRSS")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-weak-pairs-") as folder:
        if way == "lists":
            pairs = weak_pairs(corpus, kind)
            table = Dataset.from_dict({"query": pairs["query"], "positive": pairs["positive"]})
        else:
            table = weak_pairs_dataset(corpus, kind, folder=Path(folder))
        seconds = time.perf_counter() - start
        text_bytes = sum(len(q) + len(p) for q, p in zip(table["query"][:1000],
                                                        table["positive"][:1000]))
        rows = len(table)
    peak = status_kib("VmHWM")
    return {"way": way, "passages": size, "rows": rows, "seconds": round(seconds, 2),
            "peak_above_corpus_mib": round((peak - before) / 1024, 1),
            "text_mib": round(text_bytes / min(rows, 1000) * rows / 2**20, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 50000])
    parser.add_argument("--chars", type=int, default=5000, help="characters per passage")
    parser.add_argument("--kind", choices=["title", "ict"], default="ict")
    parser.add_argument("--child", nargs=2, metavar=("WAY", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]), args.chars, args.kind)))
        return 0
    print("load average {:.2f} {:.2f} {:.2f}; ".format(*os.getloadavg())
          + f"{args.kind} pairs of {args.chars}-character passages")
    print("| passages | way | rows | seconds | peak above corpus (MiB) | pairs' text (MiB) |")
    print("|---:|---|---:|---:|---:|---:|")
    for size in args.sizes:
        for way in ("lists", "streamed"):
            done = subprocess.run([sys.executable, __file__, "--chars", str(args.chars),
                                   "--kind", args.kind, "--child", way, str(size)],
                                  capture_output=True, text=True, check=False)
            if done.returncode:
                print(f"| {size:,} | {way} | failed: {done.stderr.strip()[-200:]} |||")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"| {size:,} | {way} | {row['rows']:,} | {row['seconds']} | "
                  f"{row['peak_above_corpus_mib']} | {row['text_mib']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
