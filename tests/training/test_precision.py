"""Evaluation precision in a training run, the dtype of the export, and what ``auto``
(``training.bf16``, ``eval.dtype``, ``tapt eval --dtype``) chooses: bf16 where the device
computes it natively (a CUDA GPU with bf16, a CPU with AMX or AVX512-BF16), float32
elsewhere. The devices are monkeypatched: no GPU, no real CPU feature is needed."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from sentence_transformers import SentenceTransformer

from tapt.encoders.precision import CPU_BF16_VARIABLE, native_bf16, resolve_dtype
from tapt.recipe import load_recipe
from tapt.recipe.schema import EvalSettings, TrainingSettings
from tapt.training.arguments import common_arguments, training_bf16
from tapt.training.contrastive import train

REPO = Path(__file__).resolve().parents[2]
AVX2_ONLY = {"architecture": "x86_64", "avx2": True, "avx512_f": False, "avx512_bf16": False,
             "amx_bf16": False, "amx_tile": False}
"""The features of a CPU without native bf16 (this project's 2-core AMD EPYC, as documented)."""


@pytest.fixture
def device(monkeypatch):
    """``device(cpu=FEATURES, gpu=None | "ampere" | "emulated")``: the machine tapt sees,
    as torch reports it; the test suite's own answer for the CPU (TAPT_CPU_BF16) unset."""
    monkeypatch.delenv(CPU_BF16_VARIABLE, raising=False)

    def make(cpu: dict = AVX2_ONLY, gpu: str | None = None) -> None:
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: dict(cpu))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu is not None)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                            lambda including_emulation=True: gpu == "ampere" or (
                                gpu is not None and including_emulation))
    return make


def test_auto_is_the_default_of_training_and_evaluation():
    assert TrainingSettings().bf16 == "auto" and EvalSettings().dtype == "auto"


@pytest.mark.parametrize(("cpu", "gpu", "bf16"), [
    (AVX2_ONLY, None, False),
    ({**AVX2_ONLY, "avx512_f": True}, None, False),  # AVX-512 without its BF16 extension
    ({**AVX2_ONLY, "avx512_bf16": True}, None, True),
    ({**AVX2_ONLY, "amx_bf16": True, "amx_tile": True}, None, True),
    ({"architecture": "arm64", "bf16": True}, None, True),
    (AVX2_ONLY, "ampere", True),
    (AVX2_ONLY, "emulated", False),  # a GPU before Ampere: bf16 only emulated
], ids=["avx2", "avx512", "avx512-bf16", "amx", "arm-bf16", "cuda-bf16", "cuda-emulated"])
def test_auto_is_bf16_only_where_the_device_runs_it_natively(device, cpu, gpu, bf16):
    device(cpu, gpu)
    assert resolve_dtype("auto") == ("bfloat16" if bf16 else "float32")
    assert training_bf16("auto")[0] is bf16
    assert (native_bf16() is not None) is bf16
    assert resolve_dtype("float32") == "float32" and training_bf16(True) == (
        True, "training.bf16: true")  # an explicit setting is kept


def test_the_cpu_answer_can_be_given(device, monkeypatch):
    device({**AVX2_ONLY, "avx512_bf16": True})
    monkeypatch.setenv(CPU_BF16_VARIABLE, "0")
    assert resolve_dtype("auto", "cpu") == "float32" and training_bf16("auto")[0] is False
    device(AVX2_ONLY)
    monkeypatch.setenv(CPU_BF16_VARIABLE, "1")
    assert resolve_dtype("auto", "cpu") == "bfloat16"


def test_the_cpu_quickstart_trains_in_float32_here_and_bf16_on_a_gpu(device, synth_path,
                                                                     tmp_path, caplog):
    """recipes/quickstart-best.yaml, no override: float32 on a CPU without native bf16,
    bf16 autocast (and bf16 evaluation) on a GPU that has it. No model is trained."""
    recipe = load_recipe(REPO / "recipes" / "quickstart-best.yaml", [f"data.path={synth_path}"])
    assert (recipe.training.bf16, recipe.eval.dtype) == ("auto", "auto")
    device(AVX2_ONLY)
    with caplog.at_level(logging.INFO, logger="tapt.training.arguments"):
        assert common_arguments(recipe, tmp_path, resuming=False)["bf16"] is False
    assert resolve_dtype(recipe.eval.dtype) == "float32"
    assert ("training precision: float32 (training.bf16: auto, a CPU without AMX or "
            "AVX512-BF16)") in caplog.text
    device(AVX2_ONLY, gpu="ampere")
    assert common_arguments(recipe, tmp_path, resuming=False)["bf16"] is True
    assert resolve_dtype(recipe.eval.dtype) == "bfloat16"


def test_every_cpu_recipe_leaves_the_choice_to_auto():
    """A recipe whose header's hardware line names a CPU sets no bf16 of its own: auto
    decides (the GPU recipes keep bf16: true, see docs/training.md)."""
    import yaml

    for path in sorted((REPO / "recipes").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        hardware = text.split("# Hardware:", 1)[-1].split("\n", 1)[0] if "# Hardware:" in \
            text else ""
        if "CPU" not in hardware:
            continue
        recipe = yaml.safe_load(text)
        assert (recipe.get("training") or {}).get("bf16", "auto") == "auto", path.name
        assert (recipe.get("eval") or {}).get("dtype", "auto") == "auto", path.name
        assert "bf16=false" not in text and "dtype=float32" not in text, path.name


def test_a_run_records_the_precision_auto_chose(make_recipe):
    recipe_file, output = make_recipe("auto", training={"bf16": "auto", "max_steps": 2,
                                                        "eval_steps": 2})
    train(load_recipe(recipe_file))  # the suite's CPU answer: no native bf16
    results = json.loads((output / "results.json").read_text())
    assert results["training_bf16"] is False and results["eval_dtype"] == "float32"
    card = (output / "final" / "README.md").read_text()
    assert "| bf16 | false (training.bf16: auto, a CPU without AMX or AVX512-BF16) |" in card


def test_bf16_evaluation_and_export_keep_float32_master_weights(make_recipe, tiny_texts):
    recipe_file, output = make_recipe("bf16", training={"max_steps": 2, "eval_steps": 2},
                                      eval={"dtype": "bfloat16", "max_tokens_per_batch": 256},
                                      export={"dtype": "bfloat16"})
    result = train(load_recipe(recipe_file))
    history = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert [entry["dtype"] for entry in history] == ["bfloat16", "bfloat16"]
    assert json.loads((output / "results.json").read_text())["eval_dtype"] == "bfloat16"

    checkpoint = load_file(output / "checkpoints" / "checkpoint-2" / "model.safetensors")
    exported = load_file(result.final_dir / "model.safetensors")
    assert {t.dtype for t in checkpoint.values() if t.is_floating_point()} == {torch.float32}
    assert {t.dtype for t in exported.values() if t.is_floating_point()} == {torch.bfloat16}
    for name, tensor in exported.items():
        torch.testing.assert_close(tensor, checkpoint[name].to(torch.bfloat16), rtol=0, atol=0)
    assert json.loads((result.final_dir / "config.json").read_text())["dtype"] == "bfloat16"

    loaded = SentenceTransformer(str(result.final_dir))
    assert next(loaded.parameters()).dtype == torch.bfloat16
    full = SentenceTransformer(str(output / "checkpoints" / "checkpoint-2"))
    a = loaded.encode(tiny_texts[:8])
    b = full.encode(tiny_texts[:8])
    assert np.isfinite(a).all() and (a * b).sum(1).min() > 0.98  # normalised: cosine
