"""tapt export's refusals and its missing-extra line: flags that do not combine, outputs on
inputs, an existing output, a calibration sample that streams, a folder loaded with the
wrong backend. They need no conversion, so they run everywhere (an extra is hidden from
the import system, so they run with it installed too). The conversions themselves are in
``test_exported_encoders.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

from tapt.cli import main
from tapt.encoders.backends import EXPORT_MODULES, EXTRAS, REQUIRED_MODULES
from tapt.serving.export_folder import ExportSettings, check_export_output
from tapt.serving.graph import ExportError


def hide(monkeypatch, backend: str) -> None:
    """Make the backend's packages fail to import, as when the extra is not installed."""
    for module in {*REQUIRED_MODULES[backend], *EXPORT_MODULES[backend]} - {"tokenizers"}:
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


def test_an_extra_whose_runtime_cannot_load_is_the_same_one_line(tiny_bert_path, tmp_path,
                                                                 monkeypatch, capsys):
    """A runtime that is installed but fails while importing (a wheel for another CPU or
    glibc raises at import) is named as a missing one is, with why."""
    import importlib

    real = importlib.import_module

    def failing(name, *args, **kwargs):
        if name == "onnxruntime":
            raise RuntimeError("onnxruntime_pybind11_state: undefined symbol")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", failing)
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--output",
                 str(tmp_path / "out")]) == 2
    line = one_line(capsys)
    assert 'pip install "tapt[onnx]"' in line and "undefined symbol" in line


def test_an_output_inside_the_source_or_holding_it_is_refused(tiny_bert_path, tmp_path):
    from tapt.util.outputs import OutputOnInputError

    parent = tmp_path / "parent"
    source = parent / "model"
    shutil.copytree(tiny_bert_path, source)
    for output, how in ((source, "is"), (source / "onnx-export", "is inside")):
        with pytest.raises(OutputOnInputError, match=f": {how} the model input"):
            check_export_output(output, str(source), overwrite=True)
    (parent / "tapt_export.json").write_text("{}", encoding="utf-8")  # looks like an export
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
    (ExportSettings("onnx", quantize="int8-weights"), "onnx backend quantises int8 or int8-dynamic"),
    (ExportSettings("openvino", quantize="int8-dynamic"), "quantises int8 or int8-weights"),
    (ExportSettings("openvino", quantize="int4"), "openvino backend quantises int8 or "),
    (ExportSettings("openvino", quantize="int8"), "give --calibration-data"),
    (ExportSettings("onnx", quantize="int8"), "give --calibration-data .* int8-dynamic"),
    (ExportSettings("openvino", quantize="int8-weights", per_tensor=True),
     "--per-tensor applies to --backend onnx --quantize int8 or int8-dynamic only"),
    (ExportSettings("onnx", per_tensor=True), "--per-tensor applies"),
    (ExportSettings("onnx", calibration_source="data"), "--quantize int8 \\(static\\) only"),
    (ExportSettings("onnx", quantize="int8-dynamic", calibration_source="data"),
     "--quantize int8 \\(static\\) only"),
    (ExportSettings("openvino", quantize="int8-weights", calibration_source="data"),
     "--quantize int8 \\(static\\) only"),
    (ExportSettings("openvino", quantize="int8", calibration_source="data",
                    calibration_texts=(" ", "")), "no non-empty passage"),
    (ExportSettings("torch"), "--backend must be onnx or openvino"),
])
def test_export_settings_that_cannot_be_made_are_refused(settings, message):
    with pytest.raises(ExportError, match=message):
        settings.check()


@pytest.mark.parametrize("argv, message", [
    (["--backend", "onnx", "--quantize", "int8-weights"], "onnx backend quantises int8"),
    (["--backend", "onnx", "--quantize", "int8"], "give --calibration-data"),
    (["--backend", "openvino", "--per-tensor"], "--per-tensor applies"),
    (["--backend", "openvino", "--quantize", "int8"], "give --calibration-data"),
])
def test_export_flags_that_cannot_be_made_stop_before_any_work(argv, message, tiny_bert_path,
                                                               tmp_path, capsys):
    output = tmp_path / "out"
    assert main(["export", str(tiny_bert_path), *argv, "--output", str(output)]) == 2
    line = one_line(capsys)
    assert line.startswith("error:") and message in line
    assert not output.exists() and not output.with_name("out.partial").exists()


def test_a_folder_that_is_not_a_model_is_one_line(tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("not a model", encoding="utf-8")
    assert main(["export", str(notes), "--backend", "onnx", "--output",
                 str(tmp_path / "out")]) == 2
    line = one_line(capsys)
    assert line.startswith("error:") and str(notes) in line
    assert not (tmp_path / "out").exists()


def test_pooling_that_needs_the_prompt_length_is_not_exported(tiny_bert_path):
    from sentence_transformers import SentenceTransformer

    from tapt.serving.graph import check_exportable

    model = SentenceTransformer(str(tiny_bert_path), device="cpu")
    check_exportable(model)
    model[1].include_prompt = False
    with pytest.raises(ExportError, match="include_prompt"):
        check_exportable(model)


def test_a_tapt_export_is_not_loaded_with_torch_nor_a_model_with_a_runtime(
        tiny_bert_path, tiny_beir_path, tmp_path, capsys):
    """An export folder without --backend names the backend to pass; a torch model with
    --backend onnx says to export it first; --threads without a runtime is refused."""
    from tapt.encoders.loading import ModelSpec, load_sentence_transformer

    folder = tmp_path / "onnx-export"
    shutil.copytree(tiny_bert_path, folder)
    (folder / "tapt_export.json").write_text(json.dumps({"format": 1, "backend": "onnx"}),
                                             encoding="utf-8")
    with pytest.raises(ValueError, match="pass --backend onnx"):
        load_sentence_transformer(ModelSpec(str(folder)))
    data = ["--data", str(tiny_beir_path), "--quiet"]
    assert main(["eval", "--model", str(tiny_bert_path), "--backend", "onnx", *data]) == 2
    line = one_line(capsys)
    assert "not a tapt export" in line and "tapt export MODEL --backend" in line
    assert main(["eval", "--model", str(tiny_bert_path), "--threads", "2", *data]) == 2
    assert "--threads sets ONNX Runtime's or OpenVINO's threads" in one_line(capsys)


def folder_digest(folder) -> dict[str, str]:
    return {str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def test_the_source_record_is_the_model_as_given(tiny_bert_path, tmp_path, monkeypatch):
    """A local folder is recorded by its path as given (a secret in it redacted), a Hub id
    and a package model as they are, a Hub cache snapshot as its Hub id and commit."""
    from tapt.serving.export_folder import source_record

    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / commit
    secret = tmp_path / "hf_abcdefghijklmnopqrstuvwxyz" / "final"
    for folder in (snapshot, secret):
        shutil.copytree(tiny_bert_path, folder)
    monkeypatch.chdir(tmp_path)
    shutil.copytree(tiny_bert_path, tmp_path / "runs" / "a" / "final")
    assert source_record("runs/a/final", None, "w")["name"] == "runs/a/final"
    assert source_record("acme/tiny", "main", "w") == {"name": "acme/tiny", "revision": "main",
                                                        "weights_blake2b": "w"}
    assert source_record(str(snapshot), None, "w") == {"name": "acme/tiny", "revision": commit,
                                                        "weights_blake2b": "w"}
    assert source_record("package:some_pkg/model", None, "w")["name"] == "package:some_pkg/model"
    recorded = source_record(str(secret), None, "w")["name"]
    assert "hf_abc" not in recorded and recorded.endswith("***/final")
