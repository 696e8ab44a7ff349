"""tapt export (ONNX / OpenVINO through sentence-transformers' backend functions) and
tapt eval --backend.

The tests that convert a model need the extras (tapt[onnx]: optimum-onnx + onnxruntime;
tapt[openvino]) and are skipped without them; the refusals and the missing-extra line run
everywhere (the extra is hidden from the import system, so they run with it installed too).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tapt.cli import main
from tapt.encoders.backends import EXTRAS, REQUIRED_MODULES
from tapt.training.backend_export import (
    ExportError,
    ExportSettings,
    check_export_output,
)

ONNX_TOLERANCE = 1e-4
"""Largest absolute difference allowed between torch and float32 ONNX embeddings of the tiny
model (unit-length vectors; the ONNX graph runs the same float32 operations, fused)."""


def hide(monkeypatch, backend: str) -> None:
    """Make the backend's packages fail to import, as when the extra is not installed."""
    for module in REQUIRED_MODULES[backend]:
        monkeypatch.setitem(sys.modules, module, None)


def one_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_a_missing_extra_is_one_line_naming_it(backend, tiny_bert_path, tiny_beir_path,
                                               tmp_path, monkeypatch, capsys):
    hide(monkeypatch, backend)
    argv = ["export", str(tiny_bert_path), "--backend", backend, "--output",
            str(tmp_path / "out")]
    assert main(argv) == 2
    line = one_line(capsys)
    assert line.startswith("error:") and f'pip install "{EXTRAS[backend]}"' in line
    assert not (tmp_path / "out").exists()
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--backend", backend, "--quiet"]) == 2
    line = one_line(capsys)
    assert line.startswith("error:") and f'pip install "{EXTRAS[backend]}"' in line


class BrokenLazyModule(types.ModuleType):
    """Imports, then fails when a class is read: what an Optimum release built for another
    transformers does (its classes are imported lazily)."""

    def __getattr__(self, name: str):
        raise ImportError(f"cannot import name 'get_parameter_dtype' (reading {name})")


def test_an_extra_installed_at_a_version_that_cannot_import_is_the_same_one_line(
        tiny_bert_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", types.ModuleType("onnxruntime"))
    monkeypatch.setitem(sys.modules, "optimum.onnxruntime",
                        BrokenLazyModule("optimum.onnxruntime"))
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--output",
                 str(tmp_path / "out")]) == 2
    line = one_line(capsys)
    assert 'pip install "tapt[onnx]"' in line and "get_parameter_dtype" in line


def test_an_output_inside_the_source_or_holding_it_is_refused(tiny_bert_path, tmp_path):
    from tapt.util.outputs import OutputOnInputError

    parent = tmp_path / "parent"
    source = parent / "model"
    shutil.copytree(tiny_bert_path, source)
    for output, how in ((source, "is"), (source / "onnx-export", "is inside")):
        with pytest.raises(OutputOnInputError, match=f": {how} the model input"):
            check_export_output(output, str(source), overwrite=True)
    for name in ("tapt_preset.json", "modules.json"):  # parent looks like a tapt export
        (parent / name).write_text("{}", encoding="utf-8")
    with pytest.raises(OutputOnInputError, match="holds the model input"):
        check_export_output(parent, str(source), overwrite=True)


def test_the_export_output_check_is_the_shared_one(tiny_bert_path, tiny_beir_path, tmp_path,
                                                   monkeypatch, capsys):
    """tapt export's --output goes through tapt.util.outputs.check_apart: the --calibration-data
    corpus is an input, and a path holding a secret is refused (its own check knew
    neither)."""
    token = "hf_" + "kQ7vX2mB9pL4nR8tW1yZ3cF6hJ0dS5gAeU"
    monkeypatch.setenv("HF_TOKEN", token)
    data = Path(shutil.copytree(tiny_beir_path, tmp_path / "data"))
    before = folder_digest(data)
    calibrate = ["--backend", "openvino", "--quantize", "int8", "--calibration-data", str(data)]
    assert main(["export", str(tiny_bert_path), *calibrate, "--output", str(data),
                 "--overwrite"]) == 2
    line = one_line(capsys)
    assert f"--output {data}: holds the --calibration-data input" in line, line
    assert folder_digest(data) == before
    secret = tmp_path / f"export-{token}"
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--output",
                 str(secret)]) == 2
    line = one_line(capsys)
    assert "holds the value of HF_TOKEN" in line and token not in line, line
    assert not secret.exists()


def test_calibration_passages_are_sampled_while_the_corpus_streams(tmp_path):
    """--calibration-data is sampled as corpus.jsonl streams by (a seeded reservoir): the
    memory it takes is the sample's, not the corpus's; the sample draws from the whole
    file and depends on the seed only."""
    import argparse
    import tracemalloc

    from tapt.cli.serving import calibration_texts

    data = tmp_path / "data"
    data.mkdir()
    passages = 6000
    filler = "binder pigment solvent coating " * 60
    with (data / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for number in range(passages):
            handle.write(json.dumps({"_id": f"p{number}", "title": "",
                                     "text": f"passage {number} {filler}"}) + "\n")
    size = (data / "corpus.jsonl").stat().st_size

    def sample(seed: int, count: int = 8) -> tuple[str, ...]:
        return calibration_texts(argparse.Namespace(calibration_data=data,
                                                    calibration_size=count, seed=seed))

    tracemalloc.start()
    try:
        first = sample(0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size / 4, (peak, size)  # the corpus as a dict took more than the file
    numbers = [int(text.split()[1]) for text in first]
    assert len(set(numbers)) == 8 and max(numbers) >= passages // 2
    assert sample(0) == first and sample(1) != first
    assert len(sample(0, count=passages + 5)) == passages  # fewer than asked: all of them


def test_an_existing_output_is_replaced_only_when_it_is_a_tapt_export(tiny_bert_path, tmp_path,
                                                                      capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--output",
                 str(taken)]) == 2
    assert "exists; pass --overwrite" in one_line(capsys)
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--output", str(taken),
                 "--overwrite"]) == 2
    assert "not a tapt export" in one_line(capsys)
    assert (taken / "notes.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("settings, message", [
    (ExportSettings("openvino", optimize="O2"), "apply to --backend onnx only"),
    (ExportSettings("onnx", quantize="int8", optimize="O1"), "give one"),
    (ExportSettings("openvino", quantize="int8"), "give --calibration-data"),
    (ExportSettings("onnx", calibration_source="data"), "openvino --quantize int8 only"),
    (ExportSettings("onnx", onnx_target="avx2"), "--quantize-for applies"),
    (ExportSettings("torch"), "--backend must be onnx or openvino"),
])
def test_export_settings_that_cannot_be_made_are_refused(settings, message):
    with pytest.raises(ExportError, match=message):
        settings.check()


def test_a_tapt_export_for_onnx_is_not_loaded_with_torch(tiny_bert_path, tmp_path):
    from tapt.encoders.loading import ModelSpec, load_sentence_transformer

    folder = tmp_path / "onnx-export"
    shutil.copytree(tiny_bert_path, folder)
    (folder / "tapt_preset.json").write_text(json.dumps({"family": "default", "stage": "export",
                                                         "backend": "onnx"}), encoding="utf-8")
    with pytest.raises(ValueError, match="pass --backend onnx"):
        load_sentence_transformer(ModelSpec(str(folder)))


class FakeOnnxModel:
    """A torch SentenceTransformer standing in for one loaded with backend="onnx": its save
    also writes the float32 graph, as sentence-transformers' ONNX save does."""

    def __init__(self, model) -> None:
        self.model = model

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def __iter__(self):
        return iter(self.model)

    def save(self, path: str, **kwargs) -> None:
        self.model.save(path, **kwargs)
        (Path(path) / "onnx").mkdir()
        (Path(path) / "onnx" / "model.onnx").write_bytes(b"float32 graph")


def test_the_export_puts_the_converted_file_in_place_and_describes_it(
        tiny_bert_path, tmp_path, monkeypatch):
    """tapt's part of an export, with sentence-transformers' conversion faked: the
    quantised file replaces the float32 one, the card and the record say what was done,
    an earlier export is replaced with overwrite, the source is untouched."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import backend as st_backend

    from tapt.encoders import factory
    from tapt.encoders.loading import ModelSpec
    from tapt.training import backend_export

    calls = []

    def fake_quantize(model, config, path, file_suffix=None):
        calls.append((config, file_suffix))
        (Path(path) / "onnx" / f"model_{file_suffix}.onnx").write_bytes(b"int8 graph")

    torch_model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    monkeypatch.setattr(backend_export, "require_backend", lambda backend: None)
    monkeypatch.setattr(factory, "load_model", lambda name, options: (
        FakeOnnxModel(torch_model), ModelSpec(name, backend=options.backend)))
    monkeypatch.setattr(st_backend, "export_dynamic_quantized_onnx_model", fake_quantize)
    before = folder_digest(tiny_bert_path)
    output = tmp_path / "exports" / "int8"
    settings = ExportSettings("onnx", quantize="int8", onnx_target="avx2")
    for overwrite in (False, True):  # the second replaces the first (a tapt export)
        backend_export.export_for_serving(str(tiny_bert_path), output, settings,
                                          overwrite=overwrite)
    assert calls == [("avx2", "qint8_avx2")] * 2
    assert sorted(p.name for p in (output / "onnx").iterdir()) == ["model.onnx"]
    assert (output / "onnx" / "model.onnx").read_bytes() == b"int8 graph"
    card = (output / "README.md").read_text(encoding="utf-8")
    assert "| quantisation | int8 |" in card and "configuration avx2" in card
    assert f"`{tiny_bert_path.name}`" in card and str(tmp_path) not in card  # no local path
    record = json.loads((output / "tapt_preset.json").read_text(encoding="utf-8"))
    assert record["stage"] == "export" and record["backend"] == "onnx"
    assert record["export"]["quantize"] == "int8"
    assert record["export"]["weights_files"] == ["onnx/model.onnx"]
    assert [p.name for p in output.parent.iterdir()] == ["int8"]  # no staging folder left
    assert folder_digest(tiny_bert_path) == before


# ---------------------------------------------------------------- with tapt[onnx] installed


def onnx_installed() -> bool:
    try:
        for module in REQUIRED_MODULES["onnx"]:
            importlib.import_module(module)
    except ImportError:
        return False
    return True


needs_onnx = pytest.mark.skipif(not onnx_installed(),
                                reason="tapt[onnx] (optimum-onnx, onnxruntime) not importable")


def folder_digest(folder) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def export(source, output, *extra) -> None:
    assert main(["export", str(source), "--backend", "onnx", "--output", str(output),
                 "--quiet", *extra]) == 0


@pytest.fixture(scope="module")
def onnx_exports(tiny_bert_path, tmp_path_factory):
    """The tiny model exported as float32 and as int8 ONNX; the source's files before."""
    root = tmp_path_factory.mktemp("onnx")
    before = folder_digest(tiny_bert_path)
    export(tiny_bert_path, root / "fp32")
    export(tiny_bert_path, root / "int8", "--quantize", "int8", "--quantize-for", "avx2")
    return {"fp32": root / "fp32", "int8": root / "int8", "source_before": before}


@needs_onnx
def test_an_onnx_export_reloads_and_matches_torch(onnx_exports, tiny_bert_path, tiny_texts):
    from sentence_transformers import SentenceTransformer

    torch_model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    onnx_model = SentenceTransformer(str(onnx_exports["fp32"]), backend="onnx", device="cpu")
    texts = tiny_texts[:16]
    difference = np.abs(torch_model.encode_document(texts) - onnx_model.encode_document(texts))
    assert difference.max() <= ONNX_TOLERANCE
    assert folder_digest(tiny_bert_path) == onnx_exports["source_before"]  # never written to


@needs_onnx
def test_an_int8_export_changes_the_weights_file_and_its_card_says_so(onnx_exports):
    fp32, int8 = onnx_exports["fp32"], onnx_exports["int8"]
    assert [p.name for p in (int8 / "onnx").glob("*.onnx")] == ["model.onnx"]
    assert (int8 / "onnx" / "model.onnx").read_bytes() != (fp32 / "onnx" / "model.onnx"
                                                           ).read_bytes()
    card = (int8 / "README.md").read_text(encoding="utf-8")
    assert "| quantisation | int8 |" in card and "avx2" in card
    assert "| quantisation | none |" in (fp32 / "README.md").read_text(encoding="utf-8")
    record = json.loads((int8 / "tapt_preset.json").read_text(encoding="utf-8"))
    assert record["backend"] == "onnx" and record["export"]["quantize"] == "int8"


@needs_onnx
def test_eval_backend_onnx_ranks_like_torch(onnx_exports, tiny_bert_path, tiny_beir_path,
                                            tmp_path):
    results = {}
    for name, model, extra in (("torch", tiny_bert_path, ()),
                               ("onnx", onnx_exports["fp32"], ("--backend", "onnx"))):
        out = tmp_path / f"{name}.json"
        assert main(["eval", "--model", str(model), "--data", str(tiny_beir_path), "--quiet",
                     "--no-cache", *extra, "--output", str(out)]) == 0
        results[name] = json.loads(out.read_text())
    assert results["onnx"]["evaluated"]["backend"] == "onnx"
    assert abs(results["onnx"]["binary_ndcg@10"] - results["torch"]["binary_ndcg@10"]) < 1e-3
