"""Messages and small wrongs. ``tapt report`` names
the training length the run had; a cache flag on a file is refused naming the flag; one
reading of numbers for every recipe key; ``data.batch_by=label:`` says what YAML made of it;
``--by`` never merges different label values into one group; ``tapt data synth`` refuses
sizes beyond its stated maximum at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from robustness.conftest import QUERIES, jsonl_lines, write_dataset
from tapt.data.beir import DataError

AREA = "messages"


def mark(reader: str, fault: str, behaviour: str):
    return pytest.mark.reliability(area=AREA, reader=reader, fault=fault, behaviour=behaviour)


def out_text(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


# --------------------------------------------------------------------------- tapt report

def run_folder(root: Path, data: Path, training: dict | None) -> Path:
    """A finished run folder as tapt train leaves it (recipe, dev history, results)."""
    root.mkdir(parents=True)
    recipe = {"model": {"name": "tiny"}, "loss": {"name": "mnrl"},
              "data": {"path": str(data), "dev_split": "dev", "dev_distractors": 2},
              "output_dir": str(root)}
    if training is not None:
        recipe["training"] = training
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    values = {"binary_ndcg@10": 0.5, "graded_ndcg@10": 0.4, "mrr@10": 0.5, "recall@100": 1.0}
    history = [{"step": s, "epoch": e, "seconds": 1.0, "dtype": "float32", **values}
               for s, e in ((0, 0.0), (2, 0.5), (4, 1.0))]
    (root / "metrics.jsonl").write_text("".join(json.dumps(h) + "\n" for h in history),
                                        encoding="utf-8")
    (root / "results.json").write_text(json.dumps({"status": "finished", "summary": {},
                                                   "best_step": 4, "history": history}),
                                       encoding="utf-8")
    return root


@mark("tapt report", "a run of training.max_steps: 4 (epochs 5.0 in its recipe) reported as "
      "'5.0 epochs'", "the report says '4 steps (training.max_steps)'")
def test_report_names_max_steps_when_they_set_the_length(dataset_dir, tmp_path, quiet_cli,
                                                         capsys):
    run = run_folder(tmp_path / "run", dataset_dir, {"epochs": 5.0, "max_steps": 4,
                                                     "learning_rate": 5e-5})
    assert quiet_cli.main(["report", str(run), "--no-bm25"]) == 0
    text = (run / "report.md").read_text(encoding="utf-8")
    assert "4 steps (training.max_steps)" in text and "5.0 epochs" not in text


def test_report_shows_the_defaults_a_recipe_left_out(dataset_dir, tmp_path, quiet_cli):
    """A recipe without a training section trained with the defaults: 5 epochs at 2e-05,
    not '? epochs'."""
    run = run_folder(tmp_path / "run", dataset_dir, None)
    assert quiet_cli.main(["report", str(run), "--no-bm25"]) == 0
    text = (run / "report.md").read_text(encoding="utf-8")
    assert "5 epochs, learning rate 2e-05, batch 32 per device" in text
    assert "? epochs" not in text and "learning rate ?" not in text


@mark("tapt report (caches)", "tapt report was said to write embeddings into the default "
      "cache with no --cache-dir", "a guard: tapt report (BM25 reference computed) writes "
      "nothing under TAPT_CACHE_DIR; it encodes nothing, so it has no cache to redirect")
def test_report_writes_nothing_into_the_caches(dataset_dir, tmp_path, quiet_cli,
                                               monkeypatch):
    cache = tmp_path / "cache-home"
    monkeypatch.setenv("TAPT_CACHE_DIR", str(cache))
    monkeypatch.setenv("TAPT_EMBEDDING_CACHE", "1")
    run = run_folder(tmp_path / "run", dataset_dir, {"max_steps": 4})
    assert quiet_cli.main(["report", str(run)]) == 0
    assert not cache.exists() or not any(cache.rglob("*"))


# --------------------------------------------------------------------------- cache flags

@mark("--corpus-cache (eval, bm25, mine, score, analyses, cache ls/prune)",
      "--corpus-cache naming an existing file: a raw '[Errno 17] File exists' after the "
      "data loaded; tapt cache ls --corpus-cache FILE lists '0 corpora' (rc 0)",
      "refused with exit 2 before anything loads, naming the flag and the path")
@pytest.mark.parametrize("argv", [
    ["bm25", "--corpus-store", "arrow", "--quiet"],
    ["cache", "ls"],
    ["cache", "prune", "--older-than-days", "1"],
], ids=["bm25", "cache ls", "cache prune"])
def test_a_cache_flag_on_a_file_is_refused_naming_the_flag(argv, dataset_dir, tmp_path,
                                                           reliability_case, quiet_cli,
                                                           capsys):
    taken = tmp_path / "not-a-folder"
    taken.write_text("precious\n", encoding="utf-8")
    data = ["--data", str(dataset_dir)] if argv[0] == "bm25" else []
    case = reliability_case(f"tapt {' '.join(argv[:2])} --corpus-cache", "an existing file",
                            area=AREA)
    outcome = case.cli([*argv, *data, "--corpus-cache", str(taken)], capsys,
                       watch=[tmp_path])
    outcome.assert_refused(contains=f"--corpus-cache {taken}")
    assert "Errno" not in outcome.printed and "give a folder" in outcome.printed
    assert taken.read_text(encoding="utf-8") == "precious\n"


def test_the_library_names_the_corpus_cache_too(dataset_dir, tmp_path):
    import tapt

    taken = tmp_path / "file"
    taken.write_text("x", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        tapt.load_data(dataset_dir, corpus_store="arrow", corpus_cache=taken / "sub")
    assert caught.value.path == str(taken / "sub") and "must be a folder" in str(caught.value)


# --------------------------------------------------------------------------- numbers

def load(tmp_path: Path, overrides: list[str], loss: dict | None = None):
    from tapt.recipe import load_recipe

    data = {"model": {"name": "m"}, "data": {"path": "d"}, "output_dir": "run"}
    if loss is not None:
        data["loss"] = loss
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_recipe(path, overrides)


DISTILL = ["loss.name=margin_mse", "loss.grade_weight=1"]


@mark("recipe numbers", "loss.grade_targets: {3: 1e0} refused while learning_rate: 2e-5 is "
      "accepted (YAML 1.1 reads both as strings)", "one reading of numbers written as text "
      "for every key: both accepted, as the numbers they spell")
def test_one_number_reading_for_every_key(tmp_path):
    recipe = load(tmp_path, [*DISTILL, "loss.grade_targets={3: 1e0, 2: 5e-1}",
                             "training.learning_rate=2e-5"])
    assert recipe.loss.grade_targets == {3: 1.0, 2: 0.5}
    assert recipe.training.learning_rate == 2e-5


def test_numbers_as_text_read_alike_in_files_and_for_integers(tmp_path):
    """In a YAML file too, and for whole-number keys (1e1 is 10 for a batch size, as 10.0
    is); text that is no number stays refused."""
    from tapt.recipe import RecipeError

    recipe = load(tmp_path, ["training.per_device_batch_size=1e1"],
                  loss={"name": "distill_kl", "grade_weight": 1,
                        "grade_targets": {3: "1e0", 1: "2E-1"}})
    assert recipe.training.per_device_batch_size == 10
    assert recipe.loss.grade_targets == {3: 1.0, 1: 0.2}
    with pytest.raises(RecipeError, match="loss.grade_targets"):
        load(tmp_path, [*DISTILL, "loss.grade_targets={3: 1e0x}"])


@mark("recipe data.batch_by", "data.batch_by=label: (YAML reads a mapping): 'Input should be a "
      "valid string (got {'label': None})'", "says YAML read a mapping and how to write "
      "label:FIELD; 'label: domain' (a space) too")
@pytest.mark.parametrize("value,shown", [("label:", "'label:'"),
                                         ("label: domain", "'label: domain'")],
                         ids=["label:", "label: domain"])
def test_batch_by_label_without_a_field_says_what_yaml_read(value, shown, tmp_path):
    from tapt.recipe import RecipeError

    with pytest.raises(RecipeError) as caught:
        load(tmp_path, [f"data.batch_by={value}"])
    message = str(caught.value)
    assert "  data.batch_by:" in message and f"{shown} was read as a YAML mapping" in message
    assert "label:FIELD" in message and "valid string" not in message
    with pytest.raises(RecipeError, match="names no label field"):
        load(tmp_path, ["data.batch_by='label:'"])


# --------------------------------------------------------------------------- --by labels

def labelled(folder: Path, labels: dict[str, object]) -> Path:
    """The tiny dataset with ``labels.domain`` of the given queries."""
    queries = [{**q, **({"labels": {"domain": labels[q["_id"]]}} if q["_id"] in labels
                        else {})} for q in QUERIES]
    return write_dataset(folder, queries=b"\n".join(jsonl_lines(queries)) + b"\n")


@mark("tapt eval/bm25 --by", "a query labelled literally '(none)' merged with the queries "
      "without a label; labels 5 and \"5\" merged into one group",
      "refused naming queries.jsonl, the line and labels.domain")
@pytest.mark.parametrize("labels,line", [
    ({"q4": "(none)", "q5": "paint"}, 4),
    ({"q4": 5, "q5": "5"}, 5),
], ids=["(none)", "5 and '5'"])
def test_by_never_merges_different_labels(labels, line, tmp_path, reliability_case,
                                          quiet_cli, capsys):
    folder = labelled(tmp_path / "data", labels)
    case = reliability_case("tapt bm25 --by", f"labels {labels}", area=AREA)
    outcome = case.cli(["bm25", "--data", str(folder), "--by", "domain", "--quiet",
                        "--output", str(tmp_path / "by.json")], capsys, watch=[tmp_path],
                       must_not_exist=[tmp_path / "by.json"])
    outcome.assert_refused(folder / "queries.jsonl", line, "labels.domain")


def test_by_numbers_are_grouped_by_value(tmp_path, quiet_cli):
    """5 and 5.0 are one JSON number: one group "5" (not "5" and "5.0"); true is "true"."""
    folder = labelled(tmp_path / "data", {"q4": 5, "q5": 5.0, "q6": 2.5})
    output = tmp_path / "by.json"
    assert quiet_cli.main(["bm25", "--data", str(folder), "--by", "domain", "--quiet",
                           "--output", str(output)]) == 0
    groups = json.loads(output.read_text(encoding="utf-8"))["by_group"]["groups"]
    assert {name: group["queries"] for name, group in groups.items()} == {"2.5": 1, "5": 2}


def test_passage_labels_follow_the_same_rule(dataset_dir, tmp_path):
    """tapt probe and data.batch_by=label:FIELD read passage labels the same way: a list is
    refused (it was grouped as the text "['a', 'b']"), as are two kinds in one field."""
    from tapt.data.labels import read_labels

    lines = (dataset_dir / "corpus.jsonl").read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    records[1]["labels"] = {"domain": ["a", "b"]}
    folder = write_dataset(tmp_path / "lists", corpus=b"\n".join(jsonl_lines(records)) + b"\n")
    with pytest.raises(DataError) as caught:
        read_labels(folder, ["domain"])
    assert (caught.value.line, caught.value.field) == (2, "labels.domain")
    records[1]["labels"] = {"domain": 7}
    records[2]["labels"] = {"domain": "7"}
    folder = write_dataset(tmp_path / "kinds", corpus=b"\n".join(jsonl_lines(records)) + b"\n")
    with pytest.raises(DataError) as caught:
        read_labels(folder, ["domain"])
    assert (caught.value.line, caught.value.field) == (3, "labels.domain")


# --------------------------------------------------------------------------- data synth

@mark("tapt data synth", "--queries 1000000000000: memory grows without bound and without "
      "progress", "refused at once by argparse (exit 2), naming the flag and the stated "
      "maximum (20,000 queries, 200,000 distractors: the dataset is built in memory)")
@pytest.mark.parametrize("flag,value,maximum", [("--queries", "1000000000000", "20000"),
                                                ("--distractors", "1000000000", "200000")])
def test_synth_refuses_sizes_beyond_its_maximum(flag, value, maximum, tmp_path, capsys):
    from robustness.reliability import hard_timeout
    from tapt.cli import main

    with pytest.raises(SystemExit) as exited, hard_timeout(20):
        main(["data", "synth", str(tmp_path / "out"), flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: must be in [" in err and f"{maximum}]" in err
    assert "in memory" in err and not (tmp_path / "out").exists()


# ----------------------------------------------------- data stats, faiss: say it first

@mark("tapt data stats (tapt.cli.data.check_decontamination)",
      "--decontaminate dev with --dev-from-train 50: a dev carved from train",
      "refused before reading, exit 2, the recipe check's message with the flags' names (not "
      "\"split(s) ['dev'] not loaded\")")
def test_stats_will_not_decontaminate_against_a_carved_dev(dataset_dir, quiet_cli, capsys):
    from tapt.recipe.schema import DataSettings

    argv = ["data", "stats", str(dataset_dir), "--decontaminate", "dev", "--dev-from-train",
            "2"]
    assert quiet_cli.main(argv) == 2
    message = out_text(capsys)
    assert ("--decontaminate names 'dev', which is carved from train (--dev-from-train): the "
            "group carve already keeps its relevant passages out of training") in message
    assert "not loaded" not in message
    with pytest.raises(ValueError, match="data.decontaminate names 'dev', which is carved "
                                         r"from train \(data.dev_from_train\)"):
        DataSettings(path=str(dataset_dir), decontaminate=["dev"], dev_from_train=2)


@mark("tapt eval (tapt.retrieval.search.require_search)",
      "faiss not installed, tapt eval of a local model on the CPU (faiss search)",
      "refused before the model loads, exit 2, one line naming tapt[cpu] / tapt[gpu]")
def test_torch_search_ranks_without_faiss(monkeypatch):
    """The torch index normalises its rows without faiss (numpy's division), as the faiss
    check before loading promises: --search-backend torch needs no faiss."""
    import numpy as np

    from tapt.retrieval import faiss_extra
    from tapt.retrieval.search import make_index

    monkeypatch.setattr(faiss_extra, "faiss", faiss_extra._NoFaiss())
    index = make_index(4, backend="torch", use_gpu=False)
    index.add(np.eye(4, dtype=np.float32) * 3)
    scores, ids = index.search(np.array([[0, 2, 0, 0], [5, 0, 0, 1]], dtype=np.float32), 1)
    assert [int(row[0]) for row in ids] == [1, 0]
    assert float(scores[0][0]) == pytest.approx(1.0)


def test_eval_without_faiss_says_so_before_loading_the_model(tiny_bert_path, dataset_dir,
                                                             monkeypatch, quiet_cli, capsys):
    import sentence_transformers

    from tapt.retrieval import faiss_extra

    monkeypatch.setattr(faiss_extra, "faiss", faiss_extra._NoFaiss())

    class Loaded(Exception):
        """The model began to load."""

    def loading(*args, **kwargs):
        raise Loaded

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", loading)
    argv = ["eval", "--model", str(tiny_bert_path), "--data", str(dataset_dir), "--quiet",
            "--no-cache"]
    assert quiet_cli.main(argv) == 2  # before loading: Loaded would propagate
    message = out_text(capsys)
    assert "faiss is not installed" in message and 'pip install "tapt[cpu]"' in message
    with pytest.raises(Loaded):  # torch's search needs no faiss: the model loads
        quiet_cli.main([*argv, "--search-backend", "torch"])
