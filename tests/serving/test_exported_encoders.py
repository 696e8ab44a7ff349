"""ONNX and OpenVINO exports of tiny random models: what the graph computes is what torch
computes (pooling, normalisation, prompts and padding side inside or around it), int8
stays close, the folder is checked on load, the card's ten lines run without tapt, and
``tapt eval`` / ``tapt mine`` take an export as they take a model.

Skipped without the extras (``tapt[onnx]``, ``tapt[openvino]``); CI installs both.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tapt.cli import main
from tapt.encoders.export_manifest import MANIFEST_FILE, ExportFolderError
from tapt.encoders.exported import ExportedEncoder
from tapt.encoders.factory import EncoderLoader, ModelOptions

needs_onnx = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("onnx", "onnxscript", "onnxruntime")),
    reason="tapt[onnx] (onnx, onnxscript, onnxruntime) not installed")
needs_openvino = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("openvino", "nncf")),
    reason="tapt[openvino] (openvino, nncf) not installed")
FLOAT32_TOLERANCE = 1e-4
"""Largest absolute difference between torch's and a float32 export's unit-length
embeddings (the same float32 operations, fused differently)."""
QUERIES = ["Which binder does the epoxy primer use?", "silicone sealant cure",
           "pigment dispersion in a waterborne coating"]


def export(model: Path, output: Path, *argv: str) -> Path:
    assert main(["export", str(model), *argv, "--output", str(output), "--quiet"]) == 0
    return output


def torch_embeddings(model: Path, texts, kind: str, family: str = "auto") -> np.ndarray:
    with EncoderLoader(str(model), ModelOptions(family=family, dtype="float32"))() as encoder:
        method = encoder.encode_queries if kind == "query" else encoder.encode_corpus
        return method(texts)


def exported_embeddings(folder: Path, texts, kind: str, **options) -> np.ndarray:
    with ExportedEncoder(folder, **options) as encoder:
        method = encoder.encode_queries if kind == "query" else encoder.encode_corpus
        return method(texts)


def rankings(queries: np.ndarray, passages: np.ndarray) -> list[list[int]]:
    return np.argsort(-(queries @ passages.T), axis=1, kind="stable").tolist()


def folder_digest(folder: Path) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def bert_exports(tiny_bert_path, tiny_beir_path, tmp_path_factory) -> dict[str, Path]:
    """Every kind of export of the tiny BERT the installed extras can make."""
    root = tmp_path_factory.mktemp("exports")
    before = folder_digest(tiny_bert_path)
    made = {}
    if importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnxscript"):
        made["onnx"] = export(tiny_bert_path, root / "onnx", "--backend", "onnx")
        made["onnx int8"] = export(tiny_bert_path, root / "onnx-int8", "--backend", "onnx",
                                   "--quantize", "int8", "--calibration-data",
                                   str(tiny_beir_path), "--calibration-size", "20",
                                   "--seed", "3")
    if importlib.util.find_spec("openvino") and importlib.util.find_spec("nncf"):
        made["openvino"] = export(tiny_bert_path, root / "openvino", "--backend", "openvino")
        made["openvino int8"] = export(tiny_bert_path, root / "openvino-int8", "--backend",
                                       "openvino", "--quantize", "int8", "--calibration-data",
                                       str(tiny_beir_path), "--calibration-size", "20",
                                       "--seed", "3")
        made["openvino int8-weights"] = export(tiny_bert_path, root / "openvino-w8",
                                               "--backend", "openvino", "--quantize",
                                               "int8-weights")
    assert folder_digest(tiny_bert_path) == before  # the source is never written to
    return made


@pytest.mark.parametrize("label", [pytest.param("onnx", marks=needs_onnx),
                                   pytest.param("openvino", marks=needs_openvino)])
def test_a_float32_export_embeds_as_torch_does(label, bert_exports, tiny_bert_path, tiny_texts):
    folder = bert_exports[label]
    for kind, texts in (("document", tiny_texts), ("query", QUERIES)):
        expected = torch_embeddings(tiny_bert_path, texts, kind)
        for threads in (1, 2):
            found = exported_embeddings(folder, texts, kind, threads=threads,
                                        max_tokens_per_batch=64)  # many batches
            assert found.shape == expected.shape
            assert np.abs(found - expected).max() < FLOAT32_TOLERANCE
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["quantization"] is None and manifest["check"]["min_cosine_to_torch"] > 0.9999
    assert manifest["source"]["name"] == str(tiny_bert_path)  # the path as given
    assert manifest["preset"]["inputs"] == ["input_ids", "attention_mask", "token_type_ids"]


@needs_onnx
def test_batch_size_caps_the_texts_of_a_batch(bert_exports, tiny_texts):
    """``--batch-size`` means what it means for a torch model: at most that many texts a
    batch, within the token budget, and the embeddings do not change with it."""
    with ExportedEncoder(bert_exports["onnx"]) as encoder:
        wide = list(encoder.encode_stream(tiny_texts, "document", batch_size=len(tiny_texts)))
        narrow = list(encoder.encode_stream(tiny_texts, "document", batch_size=3))
        with pytest.raises(ValueError, match="batch_size"):
            list(encoder.encode_stream(tiny_texts, "document", batch_size=0))
    assert max(len(batch.positions) for batch in wide) > 3
    assert max(len(batch.positions) for batch in narrow) == 3
    assert len(narrow) >= -(-len(tiny_texts) // 3)
    order = np.concatenate([batch.positions for batch in narrow])
    assert sorted(order.tolist()) == list(range(len(tiny_texts)))
    by_position = {int(p): e for batch in narrow for p, e in zip(batch.positions, batch.embeddings)}
    for batch in wide:
        for position, embedding in zip(batch.positions, batch.embeddings):
            assert np.abs(by_position[int(position)] - embedding).max() < FLOAT32_TOLERANCE


@pytest.mark.parametrize("label", [pytest.param("onnx int8", marks=needs_onnx),
                                   pytest.param("openvino int8", marks=needs_openvino),
                                   pytest.param("openvino int8-weights", marks=needs_openvino)])
def test_an_int8_export_stays_close_and_says_how_it_was_made(label, bert_exports,
                                                             tiny_bert_path, tiny_texts):
    folder = bert_exports[label]
    expected = torch_embeddings(tiny_bert_path, tiny_texts, "document")
    found = exported_embeddings(folder, tiny_texts, "document")
    cosine = (found * expected).sum(1) / np.linalg.norm(found, axis=1)
    assert cosine.min() > 0.95 and np.abs(found - expected).max() > 1e-6  # changed, close
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    quantization = manifest["quantization"]
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert quantization["method"] in card and "base_model_relation" not in card  # local base
    if label == "onnx int8":
        assert quantization["per_channel"] is True and quantization["label"] == "int8 static"
        assert "quantize_static, QDQ" in quantization["method"]
    if label in ("onnx int8", "openvino int8"):
        calibration = quantization["calibration"]
        assert (calibration["source"], calibration["passages"], calibration["seed"]) == (
            "tiny-beir", 20, 3)
        assert re.fullmatch(r"[0-9a-f]{64}", calibration["sample_sha256"])


@needs_openvino
def test_the_calibration_sample_is_the_seeds_and_is_recorded(tiny_bert_path, tiny_beir_path,
                                                             bert_exports, tmp_path):
    again = export(tiny_bert_path, tmp_path / "again", "--backend", "openvino", "--quantize",
                   "int8", "--calibration-data", str(tiny_beir_path), "--calibration-size",
                   "20", "--seed", "3")
    other = export(tiny_bert_path, tmp_path / "other", "--backend", "openvino", "--quantize",
                   "int8", "--calibration-data", str(tiny_beir_path), "--calibration-size",
                   "20", "--seed", "4")

    def sample(folder: Path) -> str:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
        return manifest["quantization"]["calibration"]["sample_sha256"]

    assert sample(again) == sample(bert_exports["openvino int8"]) != sample(other)


@pytest.mark.parametrize("backend", [pytest.param("onnx", marks=needs_onnx),
                                     pytest.param("openvino", marks=needs_openvino)])
def test_last_token_pooling_and_the_query_prompt_survive_the_export(backend, tiny_qwen3_path,
                                                                   tiny_texts, tmp_path):
    """Qwen3-Embedding's setting: left padding, the last token pooled, an instruction before
    queries only. The export ranks the passages for each query as torch does."""
    folder = export(tiny_qwen3_path, tmp_path / backend, "--backend", backend, "--family",
                    "qwen3")
    preset = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))["preset"]
    assert preset["pooling"] == "lasttoken" and preset["padding_side"] == "left"
    assert preset["query_prompt"].startswith("Instruct:") and preset["document_prompt"] == ""
    torch_passages = torch_embeddings(tiny_qwen3_path, tiny_texts, "document", "qwen3")
    torch_queries = torch_embeddings(tiny_qwen3_path, QUERIES, "query", "qwen3")
    passages = exported_embeddings(folder, tiny_texts, "document", max_tokens_per_batch=128)
    queries = exported_embeddings(folder, QUERIES, "query")
    assert np.abs(passages - torch_passages).max() < FLOAT32_TOLERANCE
    assert np.abs(queries - torch_queries).max() < FLOAT32_TOLERANCE
    assert rankings(queries, passages) == rankings(torch_queries, torch_passages)
    unprompted = exported_embeddings(folder, QUERIES, "document")
    assert np.abs(unprompted - queries).max() > 1e-3  # the prompt is applied, to queries only


@needs_onnx
def test_a_tampered_graph_is_refused_naming_the_file(bert_exports, tiny_beir_path, tmp_path,
                                                     capsys):
    import shutil

    folder = Path(shutil.copytree(bert_exports["onnx"], tmp_path / "copy"))
    graph = folder / "model.onnx"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one weight's byte: the size stays
    graph.write_bytes(bytes(data))
    with pytest.raises(ExportFolderError, match=re.escape(str(graph))):
        ExportedEncoder(folder)
    output = tmp_path / "m.json"
    assert main(["eval", "--model", str(folder), "--backend", "onnx", "--data",
                 str(tiny_beir_path), "--quiet", "--output", str(output)]) == 2
    out = capsys.readouterr().out
    assert str(graph) in out and "not the file tapt_export.json records" in out
    assert not output.exists()
    (folder / "tokenizer.json").unlink()  # a missing file is named too
    graph.write_bytes((bert_exports["onnx"] / "model.onnx").read_bytes())
    with pytest.raises(ExportFolderError, match="tokenizer.json: the file is missing"):
        ExportedEncoder(folder)
    with pytest.raises(ExportFolderError, match="pass --backend onnx"):
        ExportedEncoder(bert_exports["onnx"], "openvino")


BLOCKER = """
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"tapt", "torch", "transformers", "sentence_transformers"}:
            raise ImportError(f"{name} is blocked: the card's code must not need it")
sys.meta_path.insert(0, Blocked())
"""


@pytest.mark.parametrize("label", [pytest.param("onnx", marks=needs_onnx),
                                   pytest.param("openvino int8", marks=needs_openvino)])
def test_the_cards_ten_lines_run_without_tapt(label, bert_exports, tmp_path):
    folder = bert_exports[label]
    card = (folder / "README.md").read_text(encoding="utf-8")
    snippet = card.split("```python\n", 1)[1].split("```", 1)[0]
    assert len(snippet.strip().splitlines()) <= 16  # imports, preset, tokenizer, run, use
    script = tmp_path / "card.py"
    script.write_text(BLOCKER + snippet, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=folder, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = float(re.findall(r"-?\d+\.\d+(?:e-?\d+)?", done.stdout)[0])
    with ExportedEncoder(folder) as encoder:
        query = encoder.encode_queries(["Which binder does the primer use?"])
        passage = encoder.encode_corpus(["The primer comprises a polyvinyl acetate binder."])
    assert printed == pytest.approx((query @ passage.T).item(), abs=1e-5)


@needs_onnx
def test_eval_and_mine_take_an_export_and_cache_on_its_graph(bert_exports, tiny_bert_path,
                                                             tiny_beir_path, tmp_path):
    """The same retrieval, metrics and cache path as a torch model; the result says which
    backend and precision ran, and a changed export is a cache miss, not a stale hit."""
    cache = tmp_path / "cache"

    def evaluate(model: str, name: str, *backend: str) -> dict:
        output = tmp_path / f"{name}.json"
        assert main(["eval", "--model", model, *backend, "--data", str(tiny_beir_path),
                     "--quiet", "--output", str(output), "--cache-dir", str(cache)]) == 0
        return json.loads(output.read_text(encoding="utf-8"))

    reference = evaluate(str(tiny_bert_path), "torch")
    first = evaluate(str(bert_exports["onnx"]), "onnx", "--backend", "onnx", "--threads", "1")
    again = evaluate(str(bert_exports["onnx"]), "again", "--backend", "onnx")
    quantized = evaluate(str(bert_exports["onnx int8"]), "int8", "--backend", "onnx")
    metric = "binary_ndcg@10"
    assert abs(first[metric] - reference[metric]) < 1e-3
    assert again[metric] == first[metric] and again["per_query"] == first["per_query"]
    assert first["evaluated"]["backend"] == "onnx"
    assert first["evaluated"]["export"]["precision"] == "float32"
    assert quantized["evaluated"]["export"]["precision"] == "int8 static"
    timings = [result["timings"] for result in (first, again, quantized)]
    passages = first["evaluated"]["corpus_size"]
    assert [timing["corpus_from_cache"] for timing in timings] == [0, passages, 0]
    mined = tmp_path / "mined.jsonl"
    assert main(["mine", "--data", str(tiny_beir_path), "--retriever",
                 str(bert_exports["onnx"]), "--backend", "onnx", "--split", "train",
                 "--per-query", "2", "--output", str(mined), "--quiet"]) == 0
    assert mined.read_text(encoding="utf-8").count("\n") > 0


@needs_onnx
def test_a_runs_export_names_the_run_and_its_weights(tiny_bert_path, tmp_path, monkeypatch):
    """Every run's model is ``RUN/final``: the manifest and the card name the source as it
    was given (not its last part, ``final``) and the digest of the weights converted."""
    from sentence_transformers import SentenceTransformer

    from tapt.encoders.model_digest import weights_digest

    shutil.copytree(tiny_bert_path, tmp_path / "runs" / "scifact" / "final")
    monkeypatch.chdir(tmp_path)
    folder = export(Path("runs/scifact/final"), tmp_path / "exported", "--backend", "onnx")
    source = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))["source"]
    digest = weights_digest(SentenceTransformer(str(tiny_bert_path), device="cpu"))
    assert source == {"name": "runs/scifact/final", "revision": None,
                      "weights_blake2b": digest}
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "| source model | `runs/scifact/final` |" in card
    assert f"BLAKE2b `{digest}`" in card


@needs_openvino
def test_quiet_silences_nncf_too(tiny_bert_path, tiny_beir_path, tmp_path, capsys):
    """tapt export --quiet and tapt eval --quiet print their results only: NNCF's progress
    bars ("Statistics collection", "Applying Smooth Quant") drawn on rich's global console
    are off too."""
    folder = tmp_path / "openvino-int8"
    assert main(["export", str(tiny_bert_path), "--backend", "openvino", "--quantize", "int8",
                 "--calibration-data", str(tiny_beir_path), "--calibration-size", "10",
                 "--output", str(folder), "--quiet"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("openvino int8 export of"), lines
    assert main(["eval", "--model", str(folder), "--backend", "openvino", "--data",
                 str(tiny_beir_path), "--quiet", "--no-cache"]) == 0
    captured = capsys.readouterr()
    assert "100%" not in captured.out + captured.err  # no bar, rich's or tqdm's
