"""Serving exports that are used the wrong way: a folder ``tapt export`` wrote
for ONNX evaluated with torch, an export asked to write into its own source, a backend
whose packages are missing, and quantised-index flags that do not combine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

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


def serving_export(model, folder, source: str = "runs/scifact/final"):
    """A folder that stands for a tapt export of ``source``: its manifest (with the source
    record) beside a copy of a model's files."""
    import shutil

    shutil.copytree(model, folder)
    (folder / "tapt_export.json").write_text(json.dumps(
        {"format": 1, "backend": "onnx", "source": {"name": source, "revision": None}}),
        encoding="utf-8")
    return folder


@pytest.mark.reliability(
    area="messages", reader="tapt train / merge / export (tapt.encoders.loading)",
    fault="a tapt serving export (ONNX graph) given as model.name, as a tapt merge model and "
          "as tapt export's model: commands without --backend",
    behaviour="refused before loading, exit 2, one line saying what the command needs and "
              "naming the torch model the export was made from (its manifest's source); "
              "no 'pass --backend'")
def test_a_serving_export_given_to_a_torch_command_names_its_source(
        model_copy, make_recipe, tmp_path, quiet_cli, capsys):
    folder = serving_export(model_copy, tmp_path / "exported")
    recipe, output = make_recipe("from-export", model_path=folder)
    cases = {"tapt train fine-tunes torch weights": ["train", str(recipe)],
             "tapt merge averages torch weights": ["merge", str(folder), str(model_copy),
                                                   "--output", str(tmp_path / "merged")],
             "tapt export converts a torch model": ["export", str(folder), "--backend",
                                                    "onnx", "--output", str(tmp_path / "o")]}
    for doing, argv in cases.items():
        code = main(argv)
        message = " ".join(capsys.readouterr().out.split())
        assert code == 2, (argv[0], message)
        assert "serving export (ONNX graph, tapt_export.json)" in message and doing in message
        assert "made from: runs/scifact/final" in message and "--backend" not in message
    assert not output.exists() and not (tmp_path / "merged").exists()
    assert not (tmp_path / "o").exists()


@pytest.mark.reliability(
    area="messages", reader="tapt export (tapt.encoders.loading.refuse_run_folder)",
    fault="tapt export RUN_DIR: a tapt run folder (recipe.yaml, final/) instead of "
          "RUN_DIR/final",
    behaviour="refused before loading, exit 2, one line: a tapt run folder; export "
              "RUN_DIR/final (no transformers 'Unrecognized model')")
def test_export_of_a_run_folder_names_its_final_model(model_copy, tmp_path, quiet_cli,
                                                      capsys):
    import shutil

    run = tmp_path / "runs" / "scifact"
    shutil.copytree(model_copy, run / "final")
    (run / "recipe.yaml").write_text("model: {name: x}\n", encoding="utf-8")
    code = main(["export", str(run), "--backend", "onnx", "--output", str(tmp_path / "o")])
    message = " ".join(capsys.readouterr().out.split())
    assert code == 2 and "is a tapt run folder" in message
    assert f"export its trained model, {run / 'final'}" in message
    assert "Unrecognized" not in message and not (tmp_path / "o").exists()


@pytest.mark.reliability(
    area="messages", reader="tapt push (tapt.hub.push.check_not_serving_export)",
    fault="tapt push --dry-run of a tapt export folder (ONNX graph, tapt_export.json)",
    behaviour="refused, exit 2: tapt push does not publish serving exports; names the model "
              "it was made from (no 'push a tapt export (OUTPUT/final)')")
def test_push_of_a_serving_export_says_it_is_not_published(model_copy, tmp_path, quiet_cli,
                                                           capsys):
    folder = serving_export(model_copy, tmp_path / "exported")
    (folder / "model.safetensors").unlink()  # as tapt export writes it: a graph, no weights
    (folder / "model.onnx").write_bytes(b"graph")
    code = main(["push", str(folder), "--repo-id", "org/tiny", "--dry-run"])
    message = " ".join(capsys.readouterr().out.split())
    assert code == 2 and "does not publish serving exports" in message
    assert "push the model it was made from (runs/scifact/final)" in message
    assert "push a tapt export" not in message


@pytest.fixture(scope="module")
def onnx_exports(tiny_bert_path, tiny_beir_path, tmp_path_factory) -> dict[str, Path]:
    """A float32 and a static int8 ONNX export of the tiny BERT (max length 128)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    root = tmp_path_factory.mktemp("exports")
    made = {"float32": root / "onnx", "int8": root / "onnx-int8"}
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--output",
                 str(made["float32"]), "--quiet"]) == 0
    assert main(["export", str(tiny_bert_path), "--backend", "onnx", "--quantize", "int8",
                 "--calibration-data", str(tiny_beir_path), "--calibration-size", "10",
                 "--output", str(made["int8"]), "--quiet"]) == 0
    return made


EXPORT_FLAGS = [
    ("float32", ["--max-seq-length", "8"],
     "--max-seq-length 8: the export was made with max length 128 ("),
    ("float32", ["--family", "qwen3"],
     ("--family qwen3: the export's preset was fixed when it was made (query prompt '', "
      "passage prompt '', mean pooling, max length 128;")),
    ("float32", ["--device", "cuda:3"], "--device cuda:3: an onnx export runs on the CPU"),
    ("float32", ["--trust-remote-code"], "--trust-remote-code: an export runs no model code"),
    ("float32", ["--dtype", "bfloat16"],
     "--dtype bfloat16: the export runs in the precision it was made in, float32 ("),
    ("int8", ["--dtype", "float32"],
     "--dtype float32: the export runs in the precision it was made in, int8 static ("),
]


@pytest.mark.reliability(
    area=AREA, reader="tapt eval / mine / score --backend onnx (tapt.encoders.exported."
                      "check_export_options)",
    fault="torch loading flags an export fixed when it was made: --max-seq-length 8 (made "
          "with 128), --family qwen3, --device cuda:3, --trust-remote-code, --dtype "
          "bfloat16, --dtype float32 on an int8 export",
    behaviour="each refused before the data is read, exit 2, one line naming the flag and "
              "the export's own setting (its max length, prompts and pooling, precision) and "
              "tapt_export.json; nothing written (they were silently ignored: same metrics)")
@pytest.mark.parametrize("command", ["eval", "mine", "score"])
@pytest.mark.parametrize("precision, flags, expected", EXPORT_FLAGS,
                         ids=[" ".join(case[1]) for case in EXPORT_FLAGS])
def test_a_flag_an_export_fixed_is_refused_naming_its_setting(
        command, precision, flags, expected, onnx_exports, tiny_beir_path, tmp_path,
        quiet_cli, capsys):
    folder = onnx_exports[precision]
    output = tmp_path / "out.json"
    model = {"eval": ["--model"], "mine": ["--retriever"], "score": ["--teacher"]}[command]
    data = ["--data", str(tiny_beir_path), "--cache-dir", str(tmp_path / "cache")]
    if command != "eval":
        data += ["--split", "train"]
    code = main([command, *model, str(folder), "--backend", "onnx", *flags, *data,
                 "--output", str(output), "--quiet"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert expected in lines[0] and "tapt_export.json" in lines[0], lines[0]
    assert not output.exists() and not (tmp_path / "cache").exists()


@pytest.mark.reliability(
    area=AREA, reader="tapt eval --backend onnx (tapt.encoders.exported.check_export_options)",
    fault="the export's own settings given as flags (--max-seq-length 128, its length; "
          "--device cpu; --dtype float32 on a float32 export; --family auto), then "
          "--max-seq-length 64",
    behaviour="the first accepted, with the same metrics as without them; the second "
              "refused, exit 2, naming max length 128")
def test_an_exports_own_settings_pass_and_others_are_refused(onnx_exports, tiny_beir_path,
                                                             tmp_path, quiet_cli, capsys):
    def evaluate(name: str, *flags: str) -> int:
        return main(["eval", "--model", str(onnx_exports["float32"]), "--backend", "onnx",
                     "--data", str(tiny_beir_path), "--no-cache", "--output",
                     str(tmp_path / f"{name}.json"), "--quiet", *flags])

    def metrics(name: str) -> dict:
        return json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))

    assert evaluate("plain") == 0
    assert evaluate("same", "--max-seq-length", "128", "--device", "cpu", "--dtype",
                    "float32", "--family", "auto") == 0
    assert metrics("same")["per_query"] == metrics("plain")["per_query"]
    capsys.readouterr()
    assert evaluate("shorter", "--max-seq-length", "64") == 2
    assert "the export was made with max length 128" in capsys.readouterr().out
    assert not (tmp_path / "shorter.json").exists()


@pytest.mark.reliability(
    area=AREA, reader="tapt eval --backend onnx (tapt.encoders.factory.EncoderLoader)",
    fault="--long-passages chunk-mean with an ONNX export (made with max length 128)",
    behaviour="refused before the data is read, exit 2, one line naming the export's 128 "
              "tokens and --long-passages truncate; nothing written")
def test_chunked_long_passages_on_an_export_name_its_max_length(onnx_exports, tiny_beir_path,
                                                                tmp_path, quiet_cli, capsys):
    output = tmp_path / "out.json"
    code = main(["eval", "--model", str(onnx_exports["float32"]), "--backend", "onnx",
                 "--long-passages", "chunk-mean", "--data", str(tiny_beir_path),
                 "--cache-dir", str(tmp_path / "cache"), "--output", str(output), "--quiet"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, lines
    assert "keeps the first 128 tokens of a text" in lines[0], lines[0]
    assert "--long-passages truncate" in lines[0]
    assert not output.exists() and not (tmp_path / "cache").exists()
