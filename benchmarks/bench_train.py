"""Training throughput and memory of ``tapt train``: triplets/s, tokens/s, peak memory.

Each configuration (sequence length x gradient checkpointing x batch size) runs tapt's own
training (:func:`tapt.training.contrastive.train`) for ``--warmup + --steps`` optimizer steps in
this process. Only the steps after the warm-up are timed, from the start to the end of each
optimizer step (the device synchronised at both ends), so evaluation, checkpointing and
export are excluded. Tokens are the real (non-padding) tokens the loss saw. A configuration
that runs out of memory is reported as OOM and the next one runs.

Model FLOPs utilisation counts 6 x (non-embedding parameters) FLOPs per token (8x with
gradient checkpointing, which recomputes the forward pass).

Example (one H200, the random Qwen3-0.6B-shaped model, passages of >= 512 tokens)::

    python benchmarks/bench_train.py --model /tmp/q3 --data data/synth-512 --seq 512 \\
        --batch-sizes 8 32 --checkpointing on off --steps 6

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from transformers import TrainerCallback

console = Console()
KNOWN_PEAKS_TFLOPS = {"H200": 790.0, "H100": 790.0, "A100": 312.0}


class StepTimer(TrainerCallback):
    """Wall time of every optimizer step, device synchronised at both ends."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.cpu_seconds: list[float] = []  # this process's CPU time (all threads)
        self._start = self._cpu_start = 0.0

    @staticmethod
    def _sync() -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def on_step_begin(self, args, state, control, **kwargs):
        self._sync()
        self._start, self._cpu_start = time.perf_counter(), time.process_time()

    def on_step_end(self, args, state, control, **kwargs):
        self._sync()
        self.seconds.append(time.perf_counter() - self._start)
        self.cpu_seconds.append(time.process_time() - self._cpu_start)


def counting_losses(counts: list[int]):
    """Patch tapt's loss builder so every training forward records its real tokens."""
    from tapt.training import losses

    build = losses.build_loss

    def building(model, settings):
        loss = build(model, settings)
        forward = loss.forward

        def counted(features, labels=None, *args, **kwargs):
            if loss.training:
                counts.append(int(sum(int(f["attention_mask"].sum()) for f in features)))
            return forward(features, labels, *args, **kwargs)
        loss.forward = counted
        return loss
    losses.build_loss = building
    return build


def recipe_for(args, seq: int, batch: int, checkpointing: bool, output: Path):
    import torch

    from tapt.recipe import Recipe

    steps = args.warmup + args.steps
    return Recipe.model_validate({
        "model": {"name": args.model, "family": args.family, "max_seq_length": seq},
        "data": {"path": str(args.data), "dev_distractors": 20},
        "training": {"max_steps": steps, "eval_steps": steps, "save_total_limit": 1,
                     "per_device_batch_size": batch, "learning_rate": 1e-5,
                     "warmup_ratio": 0.0, "bf16": torch.cuda.is_available(),
                     "gradient_checkpointing": checkpointing, "logging_steps": 1000,
                     "on_nonfinite": "skip", "max_nonfinite_steps": steps},
        "eval": {"zero_shot": False, "batch_size": 16},
        "output_dir": str(output),
    })


def non_embedding_parameters(model_path: str) -> int:
    import torch

    from tapt.encoders.loading import ModelSpec, load_sentence_transformer

    model = load_sentence_transformer(ModelSpec(model_path, device="cpu"))
    embedding = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Embedding))
    count = sum(p.numel() for p in model.parameters()) - embedding
    del model
    return count


def run_one(args, seq: int, batch: int, checkpointing: bool, workdir: Path) -> dict:
    import torch

    from tapt.training.contrastive import train

    row = {"seq": seq, "batch": batch, "checkpointing": checkpointing}
    counts: list[int] = []
    original = counting_losses(counts)
    timer = StepTimer()
    output = workdir / f"run-{seq}-{batch}-{int(checkpointing)}"
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    try:
        train(recipe_for(args, seq, batch, checkpointing, output), callbacks=[timer])
        timed = timer.seconds[args.warmup:]
        tokens = sum(counts[args.warmup * args.accumulation:])
        seconds = sum(timed)
        row.update(status="ok", step_s=seconds / len(timed),
                   triplets_per_s=batch * len(timed) / seconds, tokens_per_s=tokens / seconds,
                   triplets_per_cpu_s=batch * len(timed) / sum(timer.cpu_seconds[args.warmup:]))
    except torch.OutOfMemoryError:
        row["status"] = "OOM"
    except RuntimeError as err:  # some OOMs surface as plain RuntimeErrors
        if "out of memory" not in str(err).lower():
            raise
        row["status"] = "OOM"
    finally:
        from tapt.training import losses

        losses.build_loss = original
        shutil.rmtree(output, ignore_errors=True)
        gc.collect()
    if torch.cuda.is_available():
        row["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.empty_cache()
    return row


def print_rows(rows: list[dict], mfu_peak: float | None) -> None:
    table = Table(title="tapt train throughput (evaluation and checkpoints excluded)")
    for column in ("seq", "batch", "grad ckpt", "status", "s/step", "triplets/s", "tokens/s",
                   "MFU", "peak GiB"):
        table.add_column(column, justify="right")
    for row in rows:
        ok = row["status"] == "ok"
        table.add_row(str(row["seq"]), str(row["batch"]), "on" if row["checkpointing"] else "off",
                      row["status"], f"{row['step_s']:.3f}" if ok else "-",
                      f"{row['triplets_per_s']:,.1f}" if ok else "-",
                      f"{row['tokens_per_s']:,.0f}" if ok else "-",
                      f"{row['mfu']:.1%}" if ok and row.get("mfu") is not None else "-",
                      f"{row['peak_gib']:.1f}" if "peak_gib" in row else "-")
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--family", default="auto")
    parser.add_argument("--data", type=Path, required=True, help="BEIR folder with a train split")
    parser.add_argument("--seq", type=int, nargs="+", required=True)
    parser.add_argument("--batch-sizes", type=int, nargs="+", required=True,
                        help="per device; the same list for every --seq")
    parser.add_argument("--checkpointing", nargs="+", choices=["on", "off"], default=["on", "off"])
    parser.add_argument("--steps", type=int, default=6, help="timed optimizer steps")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.accumulation = 1
    import torch

    peak = args.peak_tflops
    if peak is None and torch.cuda.is_available():
        peak = next((v for k, v in KNOWN_PEAKS_TFLOPS.items()
                     if k in torch.cuda.get_device_name()), None)
    params = non_embedding_parameters(args.model)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tapt-bench-train-"))
    rows = []
    for seq in args.seq:
        for checkpointing in [c == "on" for c in args.checkpointing]:
            out_of_memory = False
            for batch in sorted(args.batch_sizes):
                if out_of_memory:  # a bigger batch of the same kind cannot fit either
                    rows.append({"seq": seq, "batch": batch, "checkpointing": checkpointing,
                                 "status": "OOM (skipped)"})
                    continue
                row = run_one(args, seq, batch, checkpointing, workdir)
                out_of_memory = row["status"] == "OOM"
                if row["status"] == "ok" and peak:
                    row["mfu"] = row["tokens_per_s"] * (8 if checkpointing else 6) * params \
                        / (peak * 1e12)
                rows.append(row)
                console.print(row)
    print_rows(rows, peak)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"non_embedding_parameters": params,
                                         "peak_tflops": peak, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
