"""How fast the CLI reports a mistake: wall time of ``tapt`` commands that must fail at once
(a missing recipe, a bad key, a bad flag), each in a fresh interpreter, as a user types it.

For each case: the exit code, the best and the median wall time over ``--repeats`` runs,
and whether torch / transformers / peft were imported by the time of the error (they
should not be: the training code loads inside the handlers, after the recipe).

Example::

    python benchmarks/bench_cli_errors.py --repeats 5

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HEAVY = ("torch", "transformers", "peft", "sentence_transformers")
PROBE = f"""
import json, sys
from tapt.cli import main
code = main(sys.argv[1:])
print(json.dumps({{"code": code, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def cases(folder: Path) -> dict[str, list[str]]:
    bad = folder / "bad.yaml"
    bad.write_text("model:\n  name: x\n  no_such_key: 1\n", encoding="utf-8")
    return {
        "train missing.yaml": ["train", str(folder / "missing.yaml")],
        "train bad.yaml (unknown key)": ["train", str(bad)],
        "dapt missing.yaml": ["dapt", str(folder / "missing.yaml")],
        "validate missing.yaml": ["validate", str(folder / "missing.yaml")],
        "validate bad.yaml (unknown key)": ["validate", str(bad)],
        "eval --batch-size 0 (parse error)": ["eval", "--model", "x", "--data", "y",
                                              "--batch-size", "0"],
    }


def time_case(argv: list[str], repeats: int, cwd: Path) -> dict:
    seconds, code, heavy = [], None, None
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=cwd,
                              capture_output=True, text=True, check=False)
        seconds.append(time.perf_counter() - start)
        lines = done.stdout.strip().splitlines()
        try:
            probe = json.loads(lines[-1])
            code, heavy = probe["code"], probe["heavy"]
        except (IndexError, ValueError):  # argparse exits before the probe prints
            code, heavy = done.returncode, None
    return {"code": code, "best_s": min(seconds), "median_s": statistics.median(seconds),
            "heavy": heavy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per case (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"{'case':<36} {'exit':>4} {'best s':>7} {'median s':>8}  heavy imports")
        for name, argv in cases(folder).items():
            row = time_case(argv, max(1, args.repeats), folder)
            heavy = "n/a (argparse exit)" if row["heavy"] is None else (
                ", ".join(row["heavy"]) or "none")
            print(f"{name:<36} {row['code']!s:>4} {row['best_s']:>7.2f} "
                  f"{row['median_s']:>8.2f}  {heavy}")


if __name__ == "__main__":
    main()
