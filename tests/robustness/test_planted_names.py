"""A token planted in every input name reaches no output: not a file or folder name, not a
file's bytes, not a title or label of a figure. An input path holding one (the data folder,
the model folder, a query set's file, a recipe's paths) is refused before any work, since
results, run folders and cards record their inputs' paths; so is a label holding one (a
cases or compare system, a map panel, a query set). The run's name, a recipe label, is
accepted and masked: the commands a user chains after training (eval with a saved run and a
query set, BM25, cases, a map, mining) write into one output tree, which is then read
whole."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text

TOKEN = "hf_" + "Pl4nt3dT0k3nInEv3ryN4m3xyzQ"
MARK = "Pl4nt3dT0k3n"
"""What must not appear: the token's body (redaction leaves the ``hf_`` prefix's
neighbourhood as ``***``)."""


@pytest.fixture
def planted(tmp_path, tiny_bert_path, synth_path) -> tuple[Path, Path, Path]:
    """(data folder, model folder, query-set file), each named with the token."""
    inputs = tmp_path / "inputs"
    data = inputs / f"data-{TOKEN}"
    model = inputs / f"model-{TOKEN}"
    shutil.copytree(synth_path, data)
    shutil.copytree(tiny_bert_path, model)
    query_set = inputs / f"queries-{TOKEN}.jsonl"
    tested = {line.split("\t")[0] for line in
              (data / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    lines = [line for line in (data / "queries.jsonl").read_text().splitlines()
             if json.loads(line)["_id"] in tested]
    query_set.write_text("\n".join(lines) + "\n")
    return data, model, query_set


def leaks(root: Path) -> list[str]:
    """Every path under ``root`` whose name or bytes hold the token."""
    found = []
    for path in sorted(root.rglob("*")):
        if MARK in path.name:
            found.append(f"name: {path}")
        elif path.is_file() and MARK.encode() in path.read_bytes():
            found.append(f"content: {path}")
    return found


@pytest.mark.reliability(
    area="secrets", reader="eval, bm25, cases, analyze map, mine, train (input paths)",
    fault="a token in the data folder's, the model folder's or a query set file's name, on "
          "the command line or in a recipe",
    behaviour="refused before any work, naming the input without the token; nothing is "
              "written")
def test_an_input_path_holding_a_token_is_refused(planted, synth_path, tiny_bert_path,
                                                  make_recipe, tmp_path, quiet_cli, capsys):
    data, model, query_set = planted
    out = tmp_path / "out"
    main = quiet_cli.main
    tested = ["--split", "test", "--output", str(out / "r.json")]
    for argv, named in [
        (["eval", "--model", str(model), "--data", str(synth_path), *tested], "--model"),
        (["eval", "--model", str(tiny_bert_path), "--data", str(data), *tested], "--data"),
        (["eval", "--model", str(tiny_bert_path), "--data", str(synth_path), *tested,
          "--queries", f"extra={query_set}"], "--queries"),
        (["bm25", "--data", str(data), *tested], "--data"),
        (["mine", "--data", str(data), "--retriever", "bm25",
          "--output", str(out / "m.jsonl")], "--data"),
        (["analyze", "map", "--model", str(model), "--data", str(synth_path),
          "--color-by", "domain", "--output", str(out / "map.json")], "--model"),
    ]:
        assert main(argv) == 2, argv
        message = " ".join(capsys.readouterr().out.split())
        assert named in message and "token-shaped" in message, message
        assert MARK not in message
    for key, value in [("data.path", data), ("model.name", model)]:
        recipe_file, _ = make_recipe(f"planted-{key}", **{f"{key.split('.')[0]}_path": value})
        assert main(["train", str(recipe_file), f"output_dir={out / 'run'}"]) == 2
        message = " ".join(capsys.readouterr().out.split())
        assert key in message and "token-shaped" in message and MARK not in message, message
    assert not out.exists()


@pytest.mark.reliability(
    area="secrets", reader="eval --queries, cases, compare, analyze map (labels)",
    fault="a token in a query set's name, a cases or compare label, a map panel's label",
    behaviour="refused before any work, the label shown masked; nothing is written")
def test_a_label_holding_a_token_is_refused(synth_path, tiny_bert_path, tmp_path, quiet_cli,
                                            capsys):
    data, model, out = synth_path, tiny_bert_path, tmp_path / "out"
    main = quiet_cli.main
    result = tmp_path / "bm25.json"
    assert main(["bm25", "--data", str(data), "--split", "test", "--output", str(result)]) == 0
    capsys.readouterr()
    for argv in [
        ["eval", "--model", str(model), "--data", str(data), "--split", "test",
         "--output", str(out / "r.json"), "--queries", f"set-{TOKEN}={data / 'queries.jsonl'}"],
        ["cases", f"dense-{TOKEN}={result}", f"bm25={result}", "--data", str(data),
         "--output", str(out / "cases.md")],
        ["compare", f"a-{TOKEN}={result}", f"b={result}"],
        ["analyze", "map", "--model", f"panel-{TOKEN}={model}", "--data", str(data),
         "--color-by", "domain", "--output", str(out / "map.json")],
    ]:
        assert main(argv) == 2, argv
        message = " ".join(capsys.readouterr().out.split())
        assert "***" in message and "token-shaped" in message and MARK not in message, message
    assert not out.exists()


@pytest.mark.reliability(
    area="secrets", reader="eval (query set), bm25, cases, analyze map, mine, train --test",
    fault="a token in the run's name (tracking.run_name), the one label tapt accepts with a "
          "token (it is masked in every record)",
    behaviour="no file or folder name, no file's bytes and no figure title, label, legend "
              "or annotation in the output tree holds it")
def test_a_token_in_the_run_name_reaches_no_output(synth_path, tiny_bert_path, make_recipe,
                                                   tmp_path, quiet_cli, capsys, monkeypatch):
    data, model = synth_path, tiny_bert_path
    query_set = tmp_path / "queries.jsonl"
    tested = {line.split("\t")[0] for line in
              (data / "qrels" / "test.tsv").read_text().splitlines()[1:]}
    query_set.write_text("".join(line + "\n" for line in
                                 (data / "queries.jsonl").read_text().splitlines()
                                 if json.loads(line)["_id"] in tested))
    out = tmp_path / "out"
    cache = ["--cache-dir", str(out / "cache")]
    drawn: list[str] = []
    save_figure = Figure.savefig

    def recording_savefig(figure, *args, **kwargs):
        drawn.extend(text.get_text() for text in figure.findobj(Text))
        return save_figure(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", recording_savefig)
    main = quiet_cli.main
    recipe_file, _ = make_recipe("planted", training={"max_steps": 2, "eval_steps": 2})
    assert main(["train", str(recipe_file), "--test", f"output_dir={out / 'run'}",
                 f"tracking.run_name=run-{TOKEN}"]) == 0
    trained = out / "run" / "final"
    assert main(["eval", "--model", str(trained), "--data", str(data), "--split", "test",
                 "--output", str(out / "eval.json"), "--save-run", "10",
                 "--queries", f"rewrites={query_set}", *cache]) == 0
    assert main(["bm25", "--data", str(data), "--split", "test",
                 "--output", str(out / "bm25.json"), "--save-run", "10"]) == 0
    assert main(["cases", f"dense={out / 'eval.json'}", f"bm25={out / 'bm25.json'}",
                 "--data", str(data), "--output", str(out / "cases.md")]) == 0
    assert main(["analyze", "map", "--model", f"trained={trained}", "--model", str(model),
                 "--data", str(data), "--color-by", "domain", "--sample", "20",
                 "--output", str(out / "map.json"), *cache]) == 0
    assert main(["mine", "--data", str(data), "--retriever", str(trained),
                 "--output", str(out / "mined.jsonl"), *cache]) == 0
    printed = capsys.readouterr()

    made = {path.name for path in out.iterdir()}
    assert {"eval.json", "bm25.json", "cases.md", "map.json", "map.png", "mined.jsonl",
            "run", "cache"} <= made, made
    assert leaks(out) == [], "\n".join(leaks(out))
    assert "run-***" in (out / "run" / "recipe.yaml").read_text()  # recorded, masked
    assert drawn and not [text for text in drawn if MARK in text]
    assert MARK not in printed.out + printed.err
