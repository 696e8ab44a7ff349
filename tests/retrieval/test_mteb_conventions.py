"""MTEB's conventions: a tapt model evaluated by the mteb library on a local BEIR folder gives
tapt eval's nDCG@10, and ``tapt eval --format mteb`` writes MTEB's results layout."""

from __future__ import annotations

import json
import sys

import pytest

from tapt.cli import main

mteb = pytest.importorskip("mteb")

MTEB_DIGITS = 5e-6  # mteb rounds its retrieval scores to 5 decimals


def tapt_eval(model, data, output, *extra) -> dict:
    assert main(["eval", "--model", str(model), "--data", str(data), "--split", "test",
                 "--output", str(output), "--quiet", *extra]) == 0
    return json.loads(output.read_text())


def mteb_scores(model_path, task) -> dict:
    """mteb's own encode, search and scoring of the SentenceTransformer folder."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path), device="cpu")
    result = mteb.evaluate(model, task, cache=None, show_progress_bar=False)
    return result.task_results[0].scores["test"][0]


def test_mteb_library_and_tapt_eval_agree(tiny_bert_path, tiny_beir_path, tmp_path):
    """Graded qrels as given (MTEB's convention) against tapt's graded nDCG@10, and the
    binary task (grade >= 2 relevant) against tapt's binary nDCG@10 with --relevant-from 2."""
    from tapt.retrieval.mteb_results import folder_task

    tapt = tapt_eval(tiny_bert_path, tiny_beir_path, tmp_path / "graded.json")
    assert 0.05 < tapt["graded_ndcg@10"] < 0.95  # a ranking with mistakes: a real check
    graded = mteb_scores(tiny_bert_path, folder_task(tiny_beir_path, "test", name="Tiny"))
    assert graded["ndcg_at_10"] == pytest.approx(tapt["graded_ndcg@10"], abs=MTEB_DIGITS)

    tapt2 = tapt_eval(tiny_bert_path, tiny_beir_path, tmp_path / "binary.json",
                      "--relevant-from", "2")
    assert 0.05 < tapt2["binary_ndcg@10"] < 0.95
    binary = mteb_scores(tiny_bert_path, folder_task(tiny_beir_path, "test", name="Tiny",
                                                     relevant_from=2, relevance="binary"))
    assert binary["ndcg_at_10"] == pytest.approx(tapt2["binary_ndcg@10"], abs=MTEB_DIGITS)
    assert binary["ndcg_at_10"] != pytest.approx(graded["ndcg_at_10"], abs=1e-3)


def test_format_mteb_writes_mteb_layout(tiny_bert_path, tiny_beir_path, tmp_path):
    from tapt.retrieval.mteb_results import folder_task

    tapt = tapt_eval(tiny_bert_path, tiny_beir_path, tmp_path / "tapt.json", "--format", "mteb",
                     "--mteb-dir", str(tmp_path / "mteb"), "--mteb-task", "Synth")
    revision = tapt["evaluated"]["mteb"]["revision"]
    assert revision.startswith("tapt-")
    folder = tmp_path / "mteb" / "results" / "local__tiny-bert" / revision
    assert (folder / "model_meta.json").is_file()
    loaded = mteb.ResultCache(tmp_path / "mteb").load_task_result(
        "Synth", "local/tiny-bert", revision, raise_if_not_found=True)
    assert loaded.task_name == "Synth"
    scores = loaded.scores["test"][0]
    own = mteb_scores(tiny_bert_path, folder_task(tiny_beir_path, "test", name="Synth"))
    assert scores["main_score"] == pytest.approx(own["ndcg_at_10"], abs=MTEB_DIGITS)
    assert scores["ndcg_at_10"] == pytest.approx(tapt["graded_ndcg@10"], abs=MTEB_DIGITS)
    assert "ndcg_at_100" in scores and "ndcg_at_1000" not in scores  # the run is 100 deep
    assert tapt["evaluated"]["mteb"]["main_score"] == scores["main_score"]


def test_format_mteb_without_mteb_is_one_line(tiny_bert_path, synth_path, tmp_path, capsys,
                                              monkeypatch):
    monkeypatch.setitem(sys.modules, "mteb", None)  # import mteb raises ImportError
    code = main(["eval", "--model", str(tiny_bert_path), "--data", str(synth_path),
                 "--format", "mteb", "--mteb-dir", str(tmp_path / "m"), "--quiet"])
    shown = capsys.readouterr().out
    assert code == 2
    assert 'pip install "tapt[mteb]"' in shown and len(shown.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_different_evaluations_never_share_an_mteb_file(tiny_bert_path, tiny_beir_path,
                                                        tmp_path):
    """Another split, another sub-corpus, or another model folder of the same name (every
    export is called final/) is another revision folder; the same evaluation again is the
    same file."""
    import shutil

    other = tmp_path / "b" / "tiny-bert"
    shutil.copytree(tiny_bert_path, other)
    mteb_dir = ["--format", "mteb", "--mteb-dir", str(tmp_path / "mteb"), "--mteb-task", "T"]
    files = []
    for model, extra in ((tiny_bert_path, ()), (tiny_bert_path, ("--distractors", "3")),
                         (other, ()), (tiny_bert_path, ())):
        out = tmp_path / f"r{len(files)}.json"
        result = tapt_eval(model, tiny_beir_path, out, *mteb_dir, *extra)
        files.append(result["evaluated"]["mteb"]["file"])
    assert len(set(files[:3])) == 3 and files[3] == files[0]
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--split", "dev", "--quiet", *mteb_dir, "--output",
                 str(tmp_path / "dev.json")]) == 0
    dev = json.loads((tmp_path / "dev.json").read_text())["evaluated"]["mteb"]["file"]
    assert dev not in files


@pytest.mark.parametrize("task", ["../../victim/config", "a/b", ".", "..", "a\\b", "t\x00",
                                  "hf_" + "A1b2C3d4E5" * 3])
def test_an_mteb_task_name_is_one_file_name(tiny_bert_path, tiny_beir_path, tmp_path, task,
                                            capsys):
    """Refused before anything loads; a token given as the name is not echoed."""
    victim = tmp_path / "victim" / "config.json"
    victim.parent.mkdir()
    victim.write_text("{}")
    assert main(["eval", "--model", str(tiny_bert_path), "--data", str(tiny_beir_path),
                 "--format", "mteb", "--mteb-dir", str(tmp_path / "m" / "n"), "--mteb-task",
                 task, "--output", str(tmp_path / "out.json"), "--quiet"]) == 2
    shown = capsys.readouterr().out
    assert "--mteb-task" in shown and "A1b2C3d4E5" not in shown
    assert victim.read_text() == "{}" and not (tmp_path / "m").exists()
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("case", ["top-k", "token folder", "file in the way"])
def test_mteb_problems_stop_before_the_evaluation(tiny_bert_path, tiny_beir_path, tmp_path,
                                                  case, capsys):
    """What would fail after an hour of encoding fails first, with one message: a ranking
    too short for ndcg_at_10, a model folder whose name holds a token (it would name MTEB's
    folder), a file where MTEB's layout needs a folder."""
    import shutil

    model, mteb_dir, extra = tiny_bert_path, tmp_path / "m", []
    if case == "top-k":
        extra = ["--top-k", "5"]
    elif case == "token folder":
        model = tmp_path / ("hf_" + "Z9y8X7w6V5" * 3)
        shutil.copytree(tiny_bert_path, model)
    else:
        mteb_dir.mkdir()
        (mteb_dir / "results").write_text("not a folder")
    code = main(["eval", "--model", str(model), "--data", str(tiny_beir_path), "--format",
                 "mteb", "--mteb-dir", str(mteb_dir), "--mteb-task", "T", "--output",
                 str(tmp_path / "out.json"), "--quiet", *extra])
    shown = capsys.readouterr().out
    assert code == 2 and not (tmp_path / "out.json").exists()
    assert {"top-k": "--top-k 5", "token folder": "token-shaped",
            "file in the way": "is a file"}[case] in shown
    assert "Z9y8X7w6V5" not in shown
