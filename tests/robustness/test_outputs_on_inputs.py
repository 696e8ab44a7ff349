"""An output may not land on an input.

Every command that writes is tried with each of its outputs on each kind of input it reads
(the data folder's files, a model folder, a result file, a mined file, a run folder, the
recipe, the dev and guard data), ``--overwrite`` given: each is refused (exit 2) before any
work, naming the output's flag and path and the input, and every file of the workspace is
left byte-identical (no file changed, none added). Paths are compared resolved: through a
symlinked folder, with ``..`` and with ``~``. A sweep writes only into a new or empty
folder or one a sweep created.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tapt.training import contrastive

AREA = "outputs over inputs"


@dataclass
class Workspace:
    root: Path
    data: Path
    model: Path
    model_b: Path
    result: Path
    mined: Path
    run: Path
    run_b: Path
    queries_v2: Path


def tree_digest(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (symlinks by their target, folders by name), to
    show that nothing changed and nothing was added."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):  # does not follow symlinks
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key = str(path.relative_to(root))
            if path.is_symlink():
                found[key] = "-> " + os.readlink(path)
            elif path.is_file():
                found[key] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[key] = "folder"
    return found


def quietly(argv: list[str]) -> int:
    """``tapt.cli.main(argv)``, undoing its logging set-up (outside the ``quiet_cli``
    fixture: the workspace is built once per module)."""
    from tapt.cli import main

    root, tapt_logger = logging.getLogger(), logging.getLogger("tapt")
    handlers, level, tapt_level = root.handlers[:], root.level, tapt_logger.level
    try:
        return main(argv)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        tapt_logger.setLevel(tapt_level)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_bert_path, synth_tiny) -> Workspace:
    """Data (tapt data synth), two model folders, a bm25 result file, a mined file, two
    finished-looking run folders whose recipe reads the data (``final/`` a copy of the
    model), a copy of the queries (a ``--queries`` file), ``link`` -> the data folder and
    ``guard``, a copy of the data."""
    root = tmp_path_factory.mktemp("outputs-on-inputs")
    data = Path(shutil.copytree(synth_tiny, root / "data"))
    model = Path(shutil.copytree(tiny_bert_path, root / "model"))
    model_b = Path(shutil.copytree(tiny_bert_path, root / "model-b"))
    result, mined = root / "results" / "bm25.json", root / "mined.jsonl"
    assert quietly(["bm25", "--data", str(data), "--output", str(result), "--quiet"]) == 0
    assert quietly(["mine", "--data", str(data), "--retriever", "bm25", "--output", str(mined),
                    "--per-query", "1", "--quiet"]) == 0
    run = root / "run"
    run.mkdir()
    recipe = {"model": {"name": str(model)}, "data": {"path": str(data), "dev_split": "dev"},
              "eval": {"metric": "binary_ndcg@10"}, "output_dir": str(run)}
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    history = [{"step": s, "epoch": s / 10, "binary_ndcg@10": v, "graded_ndcg@10": v,
                "mrr@10": v, "recall@100": 1.0} for s, v in ((0, 0.3), (2, 0.5))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history),
                                       encoding="utf-8")
    (run / "results.json").write_text(json.dumps({"status": "finished", "best_step": 2,
                                                  "summary": {"best dev": history[-1]}}),
                                      encoding="utf-8")
    shutil.copytree(tiny_bert_path, run / "final")
    run_b = Path(shutil.copytree(run, root / "run-b"))  # tapt soup's second ingredient
    queries_v2 = Path(shutil.copy(data / "queries.jsonl", root / "rewritten.jsonl"))
    (root / "link").symlink_to(data, target_is_directory=True)
    shutil.copytree(data, root / "guard")  # tapt merge --guard-data
    return Workspace(root, data, model, model_b, result, mined, run, run_b, queries_v2)


@pytest.fixture
def ws(workspace, tmp_path_factory):
    """The module's workspace, put back as it was after a test that changed it (so that on
    code without the check each case fails for its own reason, not a previous one's)."""
    backup = workspace.root.with_name(workspace.root.name + "-pristine")
    if not backup.exists():
        shutil.copytree(workspace.root, backup, symlinks=True)
    pristine = tree_digest(backup)
    yield workspace
    if tree_digest(workspace.root) != pristine:
        shutil.rmtree(workspace.root)
        shutil.copytree(backup, workspace.root, symlinks=True)


def _data(ws: Workspace) -> list[str]:
    return ["--data", str(ws.data)]


# (case id, argv, the output flag, the output as given, the input the error must name)
def matrix(ws: Workspace) -> dict[str, tuple[list[str], str, str, Path]]:
    d, m = ws.data, ws.model
    corpus, queries, test_qrels = d / "corpus.jsonl", d / "queries.jsonl", d / "qrels" / "test.tsv"
    train_qrels = d / "qrels" / "train.tsv"
    report = ["report", str(ws.run), "--no-bm25"]
    cases = {
        # the two
        "score --output on corpus.jsonl": (
            ["score", *_data(ws), "--teacher", "bm25", "--output", str(corpus), "--overwrite"],
            "--output", str(corpus), corpus),
        "bm25 --output on queries.jsonl": (
            ["bm25", *_data(ws), "--output", str(queries), "--overwrite"],
            "--output", str(queries), queries),
        # every other command and output flag
        "bm25 --run on qrels/test.tsv": (
            ["bm25", *_data(ws), "--run", str(test_qrels), "--overwrite"],
            "--run", str(test_qrels), test_qrels),
        "eval --output in the model folder": (
            ["eval", "--model", str(m), *_data(ws), "--output", str(m / "config.json"),
             "--overwrite"], "--output", str(m / "config.json"), m),
        "eval --run on corpus.jsonl": (
            ["eval", "--model", str(m), *_data(ws), "--run", str(corpus), "--overwrite"],
            "--run", str(corpus), corpus),
        "mine --output on qrels/train.tsv": (
            ["mine", *_data(ws), "--retriever", "bm25", "--output", str(train_qrels),
             "--overwrite"], "--output", str(train_qrels), train_qrels),
        "mine --output in the --retriever model": (
            ["mine", *_data(ws), "--retriever", str(m), "--output", str(m / "modules.json"),
             "--overwrite"], "--output", str(m / "modules.json"), m),
        "score --output on the --mined file": (
            ["score", *_data(ws), "--teacher", "bm25", "--mined", str(ws.mined), "--output",
             str(ws.mined), "--overwrite"], "--output", str(ws.mined), ws.mined),
        "score --output in the --teacher model": (
            ["score", *_data(ws), "--teacher", str(m), "--output", str(m / "config.json"),
             "--overwrite"], "--output", str(m / "config.json"), m),
        "compare --output on a result file": (
            ["compare", str(ws.result), "--output", str(ws.result), "--overwrite"],
            "--output", str(ws.result), ws.result),
        "compare --markdown on a NAME=result file": (
            ["compare", f"bm25={ws.result}", "--markdown", str(ws.result), "--overwrite"],
            "--markdown", str(ws.result), ws.result),
        "compare --plot on a result file": (
            ["compare", str(ws.result), "--output", str(ws.root / "cmp.json"), "--plot",
             str(ws.result), "--overwrite"], "--plot", str(ws.result), ws.result),
        "ablate corpus-size --output on queries.jsonl": (
            ["ablate", "corpus-size", "--model", "bm25", *_data(ws), "--fractions", "0.5",
             "--output", str(queries), "--overwrite"], "--output", str(queries), queries),
        "ablate corpus-size --plot on corpus.jsonl": (
            ["ablate", "corpus-size", "--model", "bm25", *_data(ws), "--fractions", "0.5",
             "--output", str(ws.root / "abl.json"), "--plot", str(corpus), "--overwrite"],
            "--plot", str(corpus), corpus),
        "analyze geometry --output in the model folder": (
            ["analyze", "geometry", "--model", str(m), *_data(ws), "--distractors", "5",
             "--output", str(m / "config.json"), "--overwrite"],
            "--output", str(m / "config.json"), m),
        "probe --output on corpus.jsonl (a NAME=model)": (
            ["probe", "--model", f"tiny={m}", *_data(ws), "--output", str(corpus),
             "--overwrite"], "--output", str(corpus), corpus),
        "report --output on the run's recipe.yaml": (
            [*report, "--output", str(ws.run / "recipe.yaml")],
            "--output", str(ws.run / "recipe.yaml"), ws.run / "recipe.yaml"),
        "report --output RUN/results.md (its data file is RUN/results.json)": (
            [*report, "--output", str(ws.run / "results.md")],
            "--output's data file", str(ws.run / "results.json"), ws.run / "results.json"),
        "report --output on the data the BM25 reference reads": (
            ["report", str(ws.run), "--output", str(queries)],
            "--output", str(queries), queries),
        "cases --output on a RESULT file": (
            ["cases", str(ws.result), *_data(ws), "--output", str(ws.result), "--overwrite"],
            "--output", str(ws.result), ws.result),
        "cases --output on queries.jsonl (--data)": (
            ["cases", str(ws.result), *_data(ws), "--output", str(queries), "--overwrite"],
            "--output", str(queries), queries),
        "export --output inside the source model": (
            ["export", str(m), "--backend", "onnx", "--output", str(m / "onnx"),
             "--overwrite"], "--output", str(m / "onnx"), m),
        "export --output on the --calibration-data folder": (
            ["export", str(m), "--backend", "openvino", "--quantize", "int8",
             "--calibration-data", str(d), "--output", str(d), "--overwrite"],
            "--output", str(d), corpus),
        "soup --output inside a RUN folder": (
            ["soup", str(ws.run), str(ws.run_b), "--output", str(ws.run / "soup"),
             "--overwrite"], "--output", str(ws.run / "soup"), ws.run),
        "soup --output inside the runs' data": (
            ["soup", str(ws.run), str(ws.run_b), "--output", str(d / "soup"), "--overwrite"],
            "--output", str(d / "soup"), d),
        "merge --output inside the --pick-on-dev RUN folder": (
            ["merge", str(m), str(ws.model_b), "--pick-on-dev", str(ws.run), "--grid", "0.5",
             "--output", str(ws.run / "merged"), "--overwrite"],
            "--output", str(ws.run / "merged"), ws.run),
        "merge --output inside the --pick-on-dev RUN's data": (
            ["merge", str(m), str(ws.model_b), "--pick-on-dev", str(ws.run), "--grid", "0.5",
             "--output", str(d / "merged"), "--overwrite"], "--output", str(d / "merged"), d),
        "analyze map --output in the model folder": (
            ["analyze", "map", "--model", str(m), *_data(ws), "--color-by", "domain",
             "--output", str(m / "config.json"), "--overwrite"],
            "--output", str(m / "config.json"), m),
        "analyze map --plot on corpus.jsonl": (
            ["analyze", "map", "--model", str(m), *_data(ws), "--color-by", "domain",
             "--output", str(ws.root / "map.json"), "--plot", str(corpus), "--overwrite"],
            "--plot", str(corpus), corpus),
        "eval --output on a --queries file": (
            ["eval", "--model", str(m), *_data(ws), "--queries", f"v2={ws.queries_v2}",
             "--output", str(ws.queries_v2), "--overwrite"],
            "--output", str(ws.queries_v2), ws.queries_v2),
        "bm25 --run on a --queries file": (
            ["bm25", *_data(ws), "--queries", f"v2={ws.queries_v2}", "--run",
             str(ws.queries_v2), "--overwrite"], "--run", str(ws.queries_v2), ws.queries_v2),
        "eval --format mteb --mteb-dir inside the model folder": (
            ["eval", "--model", str(m), *_data(ws), "--format", "mteb", "--mteb-dir",
             str(m / "mteb")], "--mteb-dir", str(m / "mteb"), m),
        "bm25 --format mteb --mteb-dir holding the data": (
            ["bm25", *_data(ws), "--format", "mteb", "--mteb-dir", str(ws.root)],
            "--mteb-dir", str(ws.root), corpus),
        # the paths as a user may write them: resolved before they are compared
        "bm25 --output through a symlinked folder": (
            ["bm25", *_data(ws), "--output", str(ws.root / "link" / "corpus.jsonl"),
             "--overwrite"], "--output", str(ws.root / "link" / "corpus.jsonl"), corpus),
        "bm25 --run with '..' in the path": (
            ["bm25", *_data(ws), "--run", str(d / "qrels" / ".." / "queries.jsonl"),
             "--overwrite"], "--run", str(d / "qrels" / ".." / "queries.jsonl"), queries),
        "bm25 --output with '~' (HOME is the workspace)": (
            ["bm25", *_data(ws), "--output", "~/data/corpus.jsonl", "--overwrite"],
            "--output", "~/data/corpus.jsonl", corpus),
    }
    return cases


CASES = list(matrix(Workspace(*[Path()] * 9)))


@pytest.mark.parametrize("case", CASES)
def test_an_output_on_an_input_is_refused_and_every_input_is_unchanged(
        case, ws, reliability_case, quiet_cli, capsys, monkeypatch, tmp_path):
    workspace = ws
    argv, flag, shown, source = matrix(workspace)[case]
    monkeypatch.setenv("HOME", str(workspace.root))
    monkeypatch.chdir(tmp_path)  # a '~' taken literally lands here, not in the checkout
    before = tree_digest(workspace.root)
    outcome = reliability_case(f"tapt {argv[0]}", case, area=AREA).cli(
        argv, capsys, watch=[workspace.root], timeout=120)
    outcome.assert_refused(contains=f"{flag} {shown}")
    printed = " ".join(outcome.printed.split())
    assert str(source.resolve()) in printed, printed  # the input it collides with
    assert tree_digest(workspace.root) == before
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- tapt merge

@pytest.mark.parametrize("where", ["inside the first source (A/sub)", "the --pick-on-dev data",
                                   "inside the --guard-data folder"])
def test_merge_never_writes_inside_a_source_or_its_data(where, ws, reliability_case,
                                                        quiet_cli, capsys):
    workspace = ws
    a, b = workspace.model, workspace.model_b
    guard = workspace.root / "guard"
    output, source = {
        "inside the first source (A/sub)": (a / "sub", a),
        "the --pick-on-dev data": (workspace.data, workspace.data / "corpus.jsonl"),
        "inside the --guard-data folder": (guard / "qrels" / "merged",
                                           guard / "qrels")}[where]
    argv = ["merge", str(a), str(b), "--output", str(output), "--overwrite"]
    if where != "inside the first source (A/sub)":
        argv += ["--pick-on-dev", str(workspace.data), "--grid", "0.5", "--guard-data",
                 str(guard), "--guard-split", "test"]
    before = tree_digest(workspace.root)
    outcome = reliability_case("tapt merge", f"--output {where}", area=AREA).cli(
        argv, capsys, watch=[workspace.root], timeout=120)
    outcome.assert_refused(output)
    assert str(source.resolve()) in " ".join(outcome.printed.split())
    assert tree_digest(workspace.root) == before


# --------------------------------------------------------------------------- tapt train

@pytest.mark.reliability(
    area=AREA, reader="tapt train output_dir",
    fault="tapt train DIR/recipe.yaml, the user's own recipe, whose output_dir is DIR (the "
          "folder holds the recipe file)",
    behaviour="refused (exit 2) naming output_dir and the recipe; the recipe is "
              "byte-identical (it was rewritten as the run's record before); a run's own "
              "recipe.yaml, as tapt wrote it, still resumes")
def test_train_refuses_an_output_dir_that_holds_the_users_recipe(make_recipe, tmp_path,
                                                                 quiet_cli, capsys,
                                                                 monkeypatch):
    from tapt.recipe import load_recipe
    from tapt.run_folder.start import check_output_dir

    recipe_file, output = make_recipe("mine")
    output.mkdir()
    users = output / "recipe.yaml"
    text = "# my recipe, with my comments\n" + recipe_file.read_text(encoding="utf-8")
    users.write_text(text, encoding="utf-8")
    assert quiet_cli.main(["train", str(users)]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert f"output_dir {output}: holds the recipe input ({users})" in printed
    assert users.read_text(encoding="utf-8") == text and sorted(os.listdir(output)) == [
        "recipe.yaml"]

    # A run's own record (with its inputs' fingerprint) is tapt's file: resuming from it is fine.
    record = yaml.safe_load(text)
    record["fingerprint"] = {"data": {}}
    users.write_text(yaml.safe_dump(record), encoding="utf-8")
    check_output_dir(load_recipe(users), recipe_file=users)


@pytest.mark.reliability(
    area=AREA, reader="tapt train output_dir",
    fault="output_dir = the folder of loss.teacher_scores (a teacher file of tapt score)",
    behaviour="refused (exit 2) naming output_dir and loss.teacher_scores; nothing written")
def test_train_refuses_an_output_dir_around_the_teacher_file(make_recipe, tmp_path, quiet_cli,
                                                             capsys, synth_path):
    teachers = tmp_path / "teachers"
    assert quiet_cli.main(["score", "--data", str(synth_path), "--teacher", "bm25",
                           "--output", str(teachers / "scores.jsonl"), "--quiet"]) == 0
    recipe_file, _ = make_recipe("distil", loss={
        "name": "margin_mse", "teacher_scores": str(teachers / "scores.jsonl")},
        output_dir=str(teachers))
    capsys.readouterr()
    before = tree_digest(teachers)
    assert quiet_cli.main(["train", str(recipe_file)]) == 2
    printed = " ".join(capsys.readouterr().out.split())
    assert f"holds the loss.teacher_scores input ({teachers / 'scores.jsonl'})" in printed
    assert tree_digest(teachers) == before


# --------------------------------------------------------------------------- tapt sweep

def no_training(*args, **kwargs):
    raise AssertionError("a trial was trained")


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep --output",
    fault="--output a folder holding the user's own sweep.json and sweep.md; a folder "
          "holding the recipe itself; a folder holding a user's notes",
    behaviour="refused (exit 2) before any trial, naming --output and what is in the way; "
              "the user's files byte-identical, no trial folder made")
@pytest.mark.parametrize("content", ["the user's sweep.json and sweep.md", "the recipe",
                                     "a user's notes.txt"])
def test_a_sweep_writes_only_into_an_empty_folder_or_its_own(content, make_recipe, tmp_path,
                                                             quiet_cli, capsys, monkeypatch):
    recipe_file, _ = make_recipe("grid", training={"max_steps": 2})
    folder = tmp_path / "mine"
    folder.mkdir()
    if content == "the recipe":
        recipe_file = Path(shutil.move(recipe_file, folder / "base.yaml"))
        expected = f"--output {folder}: holds the recipe input ({recipe_file})"
    elif content == "a user's notes.txt":
        (folder / "notes.txt").write_text("mine", encoding="utf-8")
        expected = f"--output {folder} holds files that are no tapt sweep's (notes.txt)"
    else:
        (folder / "sweep.json").write_text('{"my": "own sweep"}\n', encoding="utf-8")
        (folder / "sweep.md").write_text("# my notes\n", encoding="utf-8")
        expected = f"--output {folder} holds files that are no tapt sweep's (sweep.json, sweep.md)"
    monkeypatch.setattr(contrastive, "train", no_training)
    before = tree_digest(folder)
    assert quiet_cli.main(["sweep", str(recipe_file), "--seeds", "0,1", "--output",
                           str(folder)]) == 2
    assert expected in " ".join(capsys.readouterr().out.split())
    assert tree_digest(folder) == before


def test_a_sweep_folder_is_one_that_holds_the_marker(make_recipe, tmp_path):
    """sweep.json of a sweep's shape, sweep.md and a trial folder without tapt-sweep.json
    are not a sweep's folder (a sweep writes the marker before anything else): refused,
    naming them; the same folder with the marker is planned into, and planning reads only."""
    from tapt.recipe import RecipeError
    from tapt.selection.sweep import MARKER_FILE, plan_sweep

    recipe_file, _ = make_recipe("unmarked", training={"max_steps": 2})
    folder = tmp_path / "unmarked-sweep"
    plan = plan_sweep(recipe_file, [], seeds=[0, 1], output=folder)
    folder.mkdir()
    state = {"recipe": str(recipe_file), "metric": plan.metric, "test": False,
             "grid": [{"key": "training.seed", "values": ["0", "1"]}],
             "trials": [trial.record() for trial in plan.trials]}
    (folder / "sweep.json").write_text(json.dumps(state), encoding="utf-8")
    (folder / "sweep.md").write_text("| setting |\n", encoding="utf-8")
    (folder / plan.trials[0].name).mkdir()
    with pytest.raises(RecipeError, match=r"holds files that are no tapt sweep's \(.*sweep\.json"):
        plan_sweep(recipe_file, [], seeds=[0, 1], output=folder)
    (folder / MARKER_FILE).write_text(json.dumps({"tapt": "sweep"}), encoding="utf-8")
    assert [t.name for t in plan_sweep(recipe_file, [], seeds=[0, 1], output=folder).trials] \
        == [t.name for t in plan.trials]
    assert sorted(os.listdir(folder)) == sorted([plan.trials[0].name, MARKER_FILE,
                                                  "sweep.json", "sweep.md"])
