"""An int8 export embeds a passage the same whatever it is batched with: alone, inside any
set of other texts, at any ``--max-tokens-per-batch``; so ``tapt eval`` scores the same
with a cold, a partly warm or no embedding cache (issue 46: ONNX Runtime's dynamic
quantisation took each activation's range from the whole padded batch, and one
evaluation scored nDCG@10 0.597 cold, 0.515 with 17 passages cached).

Static int8 (``--quantize int8``, ONNX Runtime's ``quantize_static`` or NNCF) fixes the
ranges in the graph; ``--quantize int8-dynamic`` is run one text per run.
"""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import numpy as np
import pytest

from tapt.cli import main
from tapt.encoders.export_manifest import MANIFEST_FILE
from tapt.encoders.exported import ExportedEncoder

needs_onnx = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("onnx", "onnxscript", "onnxruntime")),
    reason="tapt[onnx] (onnx, onnxscript, onnxruntime) not installed")
needs_openvino = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("openvino", "nncf")),
    reason="tapt[openvino] (openvino, nncf) not installed")
SAME = 1e-6
"""Largest difference between two embeddings of one passage (float32 sums in another
order: about 1e-7)."""
FLAGS = {"onnx int8": ["--backend", "onnx", "--quantize", "int8", "--calibration-size", "20"],
         "onnx int8-dynamic": ["--backend", "onnx", "--quantize", "int8-dynamic"],
         "openvino int8": ["--backend", "openvino", "--quantize", "int8",
                           "--calibration-size", "20"]}
ARMS = [pytest.param("onnx int8", marks=needs_onnx),
        pytest.param("onnx int8-dynamic", marks=needs_onnx),
        pytest.param("openvino int8", marks=needs_openvino)]


@pytest.fixture(scope="module")
def int8_exports(tiny_bert_path, tiny_beir_path, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("int8")
    made = {}
    for label, flags in FLAGS.items():
        backend = flags[1]
        if not importlib.util.find_spec("onnxruntime" if backend == "onnx" else "nncf"):
            continue
        calibration = ["--calibration-data", str(tiny_beir_path)] if "--calibration-size" \
            in flags else []
        output = root / label.replace(" ", "-")
        assert main(["export", str(tiny_bert_path), *flags, *calibration, "--output",
                     str(output), "--quiet"]) == 0
        made[label] = output
    return made


def embed(folder: Path, texts: list[str], **options) -> np.ndarray:
    with ExportedEncoder(folder, **options) as encoder:
        return encoder.encode_corpus(texts)


@pytest.mark.parametrize("label", ARMS)
def test_an_int8_passage_embeds_the_same_alone_and_in_any_batch(label, int8_exports,
                                                                tiny_texts):
    folder = int8_exports[label]
    alone = embed(folder, tiny_texts, max_tokens_per_batch=1)  # one text per run
    for budget in (24, 64, 256, 100_000):  # --max-tokens-per-batch
        batched = embed(folder, tiny_texts, max_tokens_per_batch=budget)
        assert np.abs(batched - alone).max() <= SAME, budget
    draw = random.Random(0)
    for _ in range(4):  # a passage among other texts: other lengths, other batches
        picked = draw.sample(range(len(tiny_texts)), 12)
        found = embed(folder, [tiny_texts[i] for i in picked])
        assert np.abs(found - alone[picked]).max() <= SAME
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    check = manifest["check"]
    assert check["max_batch_difference"] <= SAME and check["alone_and_batched"] >= 20
    assert check["passages"] >= 200  # fixed texts of mixed length and the calibration sample


@needs_onnx
@pytest.mark.parametrize("label", ["onnx int8", "onnx int8-dynamic"])
def test_a_cold_a_warm_and_no_cache_score_the_same(label, int8_exports, tiny_beir_path,
                                                   tmp_path):
    """The same tapt eval three ways: a cold cache; a cache that another evaluation (a
    sub-corpus) filled in part, so the other passages are batched otherwise; no cache at
    --max-tokens-per-batch 32. The metrics are equal and each passage's scores too."""
    folder = str(int8_exports[label])

    def evaluate(name: str, *flags: str) -> tuple[dict, dict]:
        output, run = tmp_path / f"{name}.json", tmp_path / f"{name}.run"
        assert main(["eval", "--model", folder, "--backend", "onnx", "--data",
                     str(tiny_beir_path), "--quiet", "--output", str(output), "--run",
                     str(run), *flags]) == 0
        scores = {}
        for line in run.read_text(encoding="utf-8").splitlines():
            query, _, doc, _, score, _ = line.split()
            scores[query, doc] = float(score)
        return json.loads(output.read_text(encoding="utf-8")), scores

    cold, cold_scores = evaluate("cold", "--cache-dir", str(tmp_path / "cold"))
    evaluate("part", "--cache-dir", str(tmp_path / "warm"), "--distractors", "3")
    warm, warm_scores = evaluate("warm", "--cache-dir", str(tmp_path / "warm"))
    bare, bare_scores = evaluate("bare", "--no-cache", "--max-tokens-per-batch", "32")
    passages = cold["evaluated"]["corpus_size"]
    assert 0 < warm["timings"]["corpus_from_cache"] < passages  # partly warm
    for result, scores in ((warm, warm_scores), (bare, bare_scores)):
        assert result["per_query"] == cold["per_query"]
        assert scores.keys() == cold_scores.keys()
        assert max(abs(scores[key] - cold_scores[key]) for key in scores) <= SAME
