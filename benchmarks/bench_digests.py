"""What checking stored files costs: the content digests a warm ``tapt eval`` verifies
(``tapt.util.digests``) against that run's total time.

A warm ``tapt eval --corpus-store arrow --corpus-cache C --cache-dir E`` reads back three
stored things, and checks each before it is used: ``corpus.jsonl`` is digested for the
Arrow cache's key, the cached ``.arrow`` file against its digest record, and every
embedding shard's rows and digests files against their manifest. This script generates N
FormBench-length passages and the tiny random model of ``bench_scale.py`` (so the pipeline
is measured, not a model), runs ``tapt eval`` cold (fills both caches) and warm as child
processes, then times the same three verifications here, best of three, with the files in
the page cache as the warm run had them. Printed: bytes and seconds per part, GB/s, and the
total as a share of the warm run's wall time (the target: at most 10 %).

Usage::

    nice -n 19 python benchmarks/bench_digests.py --sizes 2000 --dim 64      # a smoke run
    nice -n 10 python benchmarks/bench_digests.py --sizes 100000             # the figure

Generated data and the model go under ``--folder`` (default /tmp/tapt-bench-digests) and are
reused. A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import build_model, generate  # the same data and model
from rich.console import Console
from rich.table import Table

console = Console()


def tapt_eval(model: Path, data: Path, corpora: Path, embeddings: Path, out: Path) -> dict:
    """One ``tapt eval`` child process: its wall seconds and result JSON."""
    command = [sys.executable, "-m", "tapt", "eval", "--model", str(model), "--data",
               str(data), "--split", "test", "--corpus-store", "arrow", "--corpus-cache",
               str(corpora), "--cache-dir", str(embeddings), "--device", "cpu",
               "--output", str(out), "--overwrite", "--quiet"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TAPT_EMBEDDING_CACHE": "1"}
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"tapt eval failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return {"wall_s": wall, "result": json.loads(out.read_text()),
            "command": " ".join(command)}


def best_of(function, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def verification_parts(data: Path, corpora: Path, embeddings: Path) -> list[tuple]:
    """``(part, bytes, seconds)`` of each check a warm run makes; each check gives the
    problems it found (none, or the figures would mean nothing)."""
    from tapt.data.arrow_corpus import CACHED_NAME
    from tapt.util.digests import check_sidecar, file_digest, mismatch

    corpus = data / "corpus.jsonl"
    (arrow,) = [p for p in corpora.glob("*.arrow") if CACHED_NAME.fullmatch(p.name)]
    shards = []
    for manifest in sorted(embeddings.glob("local/*/shard-*.json")):
        stem = manifest.name[:-len(".json")]
        shards += [(manifest.with_name(f"{stem}.{name}"), record)
                   for name, record in json.loads(manifest.read_text())["files"].items()]
    checks = [
        ("corpus.jsonl digest (the Arrow key)", corpus.stat().st_size,
         lambda: [] if file_digest(corpus) else ["no digest"]),
        ("Arrow file against its record", arrow.stat().st_size,
         lambda: [problem for problem in [check_sidecar(arrow)] if problem]),
        ("embedding shards against their manifests",
         sum(path.stat().st_size for path, _ in shards),
         lambda: [f"{path}: {problem}" for path, record in shards
                  if (problem := mismatch(path, record))])]
    for name, _, check in checks:
        problems = check()
        if problems:
            raise RuntimeError(f"{name}: {problems[:3]}")
    return [(name, size, best_of(check)) for name, size, check in checks]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/tapt-bench-digests"))
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--dim", type=int, default=1024, help="embedding dimensions")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = []
    for size in args.sizes:
        root = args.folder / f"{size}"
        data = generate(root / "data", size, args.queries)
        model = build_model(root / f"model-{args.dim}", data / "corpus.jsonl", args.dim,
                            layers=0)
        corpora, embeddings = root / "corpora", root / "embeddings"
        for folder in (corpora, embeddings):
            shutil.rmtree(folder, ignore_errors=True)
        cold = tapt_eval(model, data, corpora, embeddings, root / "cold.json")
        warm = tapt_eval(model, data, corpora, embeddings, root / "warm.json")
        from_cache = warm["result"]["evaluated"]["search"]["passages_from_cache"]
        parts = verification_parts(data, corpora, embeddings)
        verify = sum(seconds for _, _, seconds in parts)
        table = Table(title=f"{size:,} passages, {args.dim} dimensions: warm tapt eval "
                            f"{warm['wall_s']:.1f} s ({from_cache:,} passages from the "
                            f"cache), cold {cold['wall_s']:.1f} s")
        for column in ("check", "bytes", "seconds", "GB/s", "% of the warm run"):
            table.add_column(column, justify="left" if column == "check" else "right")
        for name, nbytes, seconds in parts:
            table.add_row(name, f"{nbytes:,}", f"{seconds:.3f}",
                          f"{nbytes / seconds / 1e9:.2f}" if seconds else "-",
                          f"{100 * seconds / warm['wall_s']:.2f}")
        table.add_row("total", f"{sum(n for _, n, _ in parts):,}", f"{verify:.3f}", "",
                      f"{100 * verify / warm['wall_s']:.2f}")
        console.print(table)
        console.print(f"command: {warm['command']}", highlight=False)
        rows.append({"passages": size, "dim": args.dim, "warm_wall_s": warm["wall_s"],
                     "cold_wall_s": cold["wall_s"], "passages_from_cache": from_cache,
                     "verify_s": verify, "share_of_warm": verify / warm["wall_s"],
                     "parts": [{"check": n, "bytes": b, "seconds": s} for n, b, s in parts]})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
