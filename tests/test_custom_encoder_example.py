"""``examples/custom_encoder.py``: the documented way to plug a new encoder into tapt."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tapt
from tapt.retrieval.metrics import METRIC_KEYS

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_encoder.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("custom_encoder_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class ConstantEncoder(tapt.Encoder):
    name = "constant"
    embedding_dim = 8

    def encode_queries(self, texts, batch_size=32):
        return np.ones((len(texts), 8), dtype=np.float32)

    encode_corpus = encode_queries


def test_example_runs_as_a_script(tiny_beir_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "COLUMNS": "160"}
    command = [sys.executable, str(EXAMPLE), "--data", str(tiny_beir_path), "--split", "test"]
    result = subprocess.run(command, check=False, capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    for key in METRIC_KEYS:
        assert key in result.stdout
    assert "hashing-" in result.stdout and "passages_per_s" in result.stdout


def test_example_rejects_a_missing_folder(tmp_path):
    result = subprocess.run([sys.executable, str(EXAMPLE), "--data", str(tmp_path / "none")],
                            check=False, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2
    assert "no such folder" in result.stderr and "Traceback" not in result.stderr


def test_hashing_encoder_is_a_valid_encoder(example):
    encoder = example.HashingEncoder(dim=256)
    assert isinstance(encoder, tapt.Encoder) and encoder.embedding_dim == 256
    texts = ["Hand cream with xanthan gum", "", "shampoo"]
    first = encoder.encode_corpus(texts)
    assert first.shape == (3, 256) and first.dtype == np.float32
    np.testing.assert_array_equal(first, encoder.encode_corpus(texts))  # deterministic
    np.testing.assert_array_equal(encoder.encode_queries(texts[:1]), first[:1])
    assert not first[1].any()  # no features, no signal
    assert encoder.count_tokens(texts) == 6


def test_hashing_encoder_similarity_follows_shared_words(example):
    encoder = example.HashingEncoder(dim=4096)
    query, close, far = encoder.encode_queries(
        ["xanthan gum thickener", "the hand cream uses xanthan gum as thickener",
         "a fertilizer coated with sulfur"])

    def cosine(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    assert cosine(query, close) > cosine(query, far) + 0.3


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_hashing_encoder_beats_a_constant_encoder(example, tiny_beir_path, split):
    dataset = tapt.load_data(tiny_beir_path, splits=[split])
    hashing = tapt.evaluate(tapt.DenseRetriever(example.HashingEncoder(), progress=False),
                            dataset, split)
    constant = tapt.evaluate(tapt.DenseRetriever(ConstantEncoder(), progress=False),
                             dataset, split)
    assert hashing.metrics["binary_ndcg@10"] >= 0.9
    assert hashing.metrics["mrr@10"] > constant.metrics["mrr@10"] + 0.4
    assert hashing.metrics["binary_ndcg@10"] > constant.metrics["binary_ndcg@10"] + 0.4
    assert hashing.timings["tokens_per_s"] > 0
