"""Evaluation refuses non-finite embeddings instead of scoring them as zeros."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tapt import DenseRetriever, Encoder, evaluate
from tapt.cli import main
from tapt.retrieval.sharding import share
from tapt.util.finite import NonFiniteEmbeddingsError


class PoisonedEncoder(Encoder):
    """One-hot of the text's first letter; NaN for texts containing ``poison``."""

    name = "poisoned"

    def __init__(self, poison: str) -> None:
        self.poison = poison

    @property
    def embedding_dim(self) -> int:
        return 26

    def _vectors(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), 26), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row, (ord(text[0].lower()) - 97) % 26] = 1
            if self.poison in text:
                vectors[row, 3] = np.nan
        return vectors

    encode_queries = encode_corpus = lambda self, texts, batch_size=32: self._vectors(texts)


def test_one_broken_passage_fails_with_its_id_and_the_count(tiny_beir_path):
    from tapt.data.beir import load_beir_folder

    dataset = load_beir_folder(tiny_beir_path, ["test"])
    target_id, target = next(iter(dataset.corpus.items()))
    with pytest.raises(NonFiniteEmbeddingsError) as caught:
        evaluate(DenseRetriever(PoisonedEncoder(target.text), progress=False), dataset, "test")
    err = caught.value
    assert (err.kind, err.count, err.total) == ("passages", 1, len(dataset.corpus))
    assert err.examples == [target_id]
    assert f"1 of {len(dataset.corpus)} passages" in str(err) and "poisoned" in str(err)


def test_broken_queries_fail_before_the_corpus_is_encoded(tiny_beir_path):
    from tapt.data.beir import load_beir_folder

    dataset = load_beir_folder(tiny_beir_path, ["test"])
    encoder = PoisonedEncoder("")  # every text is poisoned
    seen = []
    encoder.encode_corpus = lambda texts, batch_size=32: seen.append(texts)
    with pytest.raises(NonFiniteEmbeddingsError, match="queries"):
        evaluate(DenseRetriever(encoder, progress=False), dataset, "test")
    assert seen == []


@pytest.fixture
def nan_minilm(minilm_path, tmp_path):
    """all-MiniLM-L6-v2 saved with one NaN weight (every embedding becomes NaN)."""
    folder = tmp_path / "nan-minilm"
    shutil.copytree(minilm_path, folder)
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    name = next(key for key in tensors if "LayerNorm.weight" in key)
    tensors[name] = tensors[name].clone()
    tensors[name][0] = torch.nan
    save_file(tensors, weights, metadata={"format": "pt"})
    return folder


def test_tapt_eval_refuses_a_nan_model(nan_minilm, tiny_beir_path, tmp_path, capsys):
    out = tmp_path / "m.json"
    code = main(["eval", "--model", str(nan_minilm), "--data", str(tiny_beir_path),
                 "--split", "test", "--output", str(out), "--quiet"])
    message = " ".join(capsys.readouterr().out.split())
    assert code == 2
    assert "non-finite embeddings" in message and str(nan_minilm.name) in message
    assert "3 of 3 queries" in message
    assert not out.exists()


def test_sharing_covers_every_text_once_and_balances_length():
    lengths = np.array([5, 90, 12, 40, 41, 7, 300, 2, 60])
    shares = [share(lengths, rank, 3) for rank in range(3)]
    assert sorted(np.concatenate(shares).tolist()) == list(range(len(lengths)))
    totals = [int(lengths[s].sum()) for s in shares]
    assert max(len(s) for s in shares) - min(len(s) for s in shares) <= 1
    assert totals[0] == max(totals)  # rank 0 takes the longest of each round


def test_result_json_records_the_dtype(minilm_path, tiny_beir_path, tmp_path):
    results = {}
    for dtype in ("float32", "bfloat16"):
        out = tmp_path / f"{dtype}.json"
        assert main(["eval", "--model", str(minilm_path), "--data", str(tiny_beir_path),
                     "--split", "test", "--dtype", dtype, "--output", str(out),
                     "--quiet"]) == 0
        results[dtype] = json.loads(out.read_text())
        assert results[dtype]["evaluated"]["dtype"] == dtype
    auto = tmp_path / "auto.json"
    assert main(["eval", "--model", str(minilm_path), "--data", str(tiny_beir_path),
                 "--split", "test", "--output", str(auto), "--quiet"]) == 0
    expected = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() \
        else "float32"
    assert json.loads(auto.read_text())["evaluated"]["dtype"] == expected
    # bf16 rounding moves scores a little; on 3 queries the ranking barely changes.
    assert results["bfloat16"]["binary_ndcg@10"] == pytest.approx(
        results["float32"]["binary_ndcg@10"], abs=0.1)
