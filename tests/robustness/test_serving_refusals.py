"""Serving exports that are used the wrong way: a folder ``tapt export`` wrote
for ONNX evaluated with torch, an export asked to write into its own source, a backend
whose packages are missing, and quantised-index flags that do not combine."""

from __future__ import annotations

import json
import sys

import pytest

from tapt.cli import main

AREA = "wrong results"


def digest(folder) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.reliability(
    area=AREA, reader="model loading (tapt.encoders.loading) of a tapt export folder",
    fault="an ONNX export (tapt_export.json backend: onnx) evaluated without --backend onnx",
    behaviour="refused before encoding, exit 2, one line naming the model and --backend onnx")
def test_an_onnx_export_evaluated_with_torch_is_refused(model_copy, tiny_beir_path,
                                                        tmp_path, quiet_cli, capsys):
    folder = model_copy  # stands for an export folder: it has the manifest
    (folder / "tapt_export.json").write_text(json.dumps({"format": 1, "backend": "onnx"}),
                                             encoding="utf-8")
    output = tmp_path / "metrics.json"
    code = main(["eval", "--model", str(folder), "--data", str(tiny_beir_path), "--quiet",
                 "--output", str(output)])
    message = capsys.readouterr().out
    assert code == 2 and not output.exists()
    assert str(folder) in message and "pass --backend onnx" in message
    assert "Traceback" not in message


@pytest.mark.reliability(
    area=AREA, reader="tapt export --output (tapt.serving.export_folder)",
    fault="--output the source model folder itself, a folder inside it, and (with "
          "--overwrite) a folder that is not a tapt export",
    behaviour="each refused before loading, exit 2, one line; the source and the folder "
              "are unchanged")
def test_an_export_never_writes_into_its_source(model_copy, tmp_path, quiet_cli, capsys):
    source = model_copy
    before = digest(source)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep", encoding="utf-8")
    never = "never writes on, inside or around an input"  # tapt.util.outputs.check_apart
    for output, extra, expected in ((source, ["--overwrite"], never),
                                    (source / "onnx", [], never),
                                    (mine, ["--overwrite"], "not a tapt export")):
        code = main(["export", str(source), "--backend", "onnx", "--output", str(output),
                     *extra])
        message = capsys.readouterr().out
        assert code == 2 and expected in message and "Traceback" not in message
    assert digest(source) == before and (mine / "notes.txt").read_text() == "keep"


@pytest.mark.reliability(
    area=AREA, reader="tapt export / tapt eval --backend (tapt.encoders.backends)",
    fault="--backend onnx and openvino with their packages missing (hidden from the import "
          "system)",
    behaviour="exit 2 before loading, one line naming tapt[onnx] / tapt[openvino]")
@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_a_missing_backend_is_one_line(backend, tiny_bert_path, tmp_path, monkeypatch,
                                       quiet_cli, capsys):
    from tapt.encoders.backends import EXPORT_MODULES, EXTRAS

    for module in EXPORT_MODULES[backend]:
        monkeypatch.setitem(sys.modules, module, None)
    code = main(["export", str(tiny_bert_path), "--backend", backend, "--output",
                 str(tmp_path / "out")])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and f'"{EXTRAS[backend]}"' in lines[0]
    assert not (tmp_path / "out").exists()
