"""Stored artefacts read back without a check, and cache writes under concurrency:
embedding shards, Arrow corpora, teacher scores, mined negatives and
checkpoints carry a content digest checked when read (``tapt.util.digests``); a failed cache write
never aborts the work it was caching; ``tapt cache prune`` keeps off a folder in use."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from transformers import TrainerCallback

from tapt.data.beir import DataError
from tapt.data.sources import load_data
from tapt.recipe import RecipeError, load_recipe
from tapt.run_folder import input_fingerprint as fingerprint
from tapt.run_folder.layout import RunDir, mark_complete, write_recipe
from tapt.run_folder.start import prepare_run_dir

AREA = "stored artefacts"
CONCURRENCY = "cache concurrency"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false", "PYTHONDONTWRITEBYTECODE": "1"}


def run_eval(name: str, model: Path, data: Path, cache: Path, tmp_path: Path) -> dict:
    from tapt.cli import main

    out = tmp_path / f"{name}.json"
    assert main(["eval", "--model", str(model), "--data", str(data), "--split", "test",
                 "--cache-dir", str(cache), "--output", str(out), "--quiet"]) == 0
    return json.loads(out.read_text())


def shard_files(cache: Path, suffix: str) -> list[Path]:
    return sorted((cache / "local").glob(f"*/shard-*.{suffix}.npy"))


METRICS = ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100")


def assert_same_run(a: dict, b: dict) -> None:
    """The same ranking, scores equal to float32 rounding (a passage encoded alone may differ
    in the last bits from one encoded in a batch)."""
    assert a.keys() == b.keys()
    for query_id, row in a.items():
        assert sorted(row) == sorted(b[query_id])
        for doc_id, value in row.items():
            assert value == pytest.approx(b[query_id][doc_id], abs=1e-5)


def same_results(a: dict, b: dict) -> None:
    for key in METRICS:
        assert a[key] == b[key], key
    assert a["per_query"] == b["per_query"]


# ------------------------------------------------------------ 1a. embedding-cache shards

@pytest.mark.parametrize("damage", ["nan rows", "rows reversed", "digests swapped"])
def test_a_shard_changed_in_place_is_re_encoded_not_scored(damage, tiny_bert_path,
                                                           tiny_beir_path, tmp_path, caplog,
                                                           reliability_case, quiet_cli):
    """``tapt eval --cache-dir`` twice with the shard changed in between (NaN rows: nDCG
    0.41 instead of 0.63 before; reversed rows: 0.16): the second run equals the first."""
    case = reliability_case("embedding cache (tapt eval --cache-dir)",
                            f"a cached shard changed in place: {damage}",
                            expected="re-encoded with a warning, the cold run's metrics",
                            area=AREA)
    cache = tmp_path / "cache"
    cold = run_eval("cold", tiny_bert_path, tiny_beir_path, cache, tmp_path)
    (rows_file,) = shard_files(cache, "rows")
    if damage == "digests swapped":
        (digests_file,) = shard_files(cache, "digests")
        digests = np.load(digests_file)
        digests[[0, 1]] = digests[[1, 0]]
        np.save(digests_file, digests)
    else:
        rows = np.load(rows_file)
        rows = rows[::-1].copy() if damage == "rows reversed" else rows
        if damage == "nan rows":
            rows[::3] = np.nan
        np.save(rows_file, rows)  # same size, same header: only the content differs
    with caplog.at_level(logging.WARNING, logger="tapt"):
        warm = run_eval("warm", tiny_bert_path, tiny_beir_path, cache, tmp_path)
    same_results(warm, cold)
    assert warm["evaluated"]["search"]["passages_from_cache"] == 0  # all encoded again
    assert "damaged" in caplog.text and rows_file.name.split(".")[0] in caplog.text
    again = run_eval("again", tiny_bert_path, tiny_beir_path, cache, tmp_path)
    assert again["evaluated"]["search"]["passages_from_cache"] == cold["evaluated"][
        "corpus_size"]  # the re-encoded rows were stored: the cache healed
    case.record("re-encoded", message=caplog.text.splitlines()[0] if caplog.text else "")


def test_tapt_score_never_writes_nan_from_a_damaged_cache(tiny_bert_path, tiny_beir_path,
                                                           tmp_path, reliability_case,
                                                           quiet_cli, capsys):
    """``tapt score --teacher MODEL --cache-dir``: NaN rows in a shard used to become
    ``NaN`` scores in the JSON file."""
    case = reliability_case("embedding cache (tapt score --cache-dir)",
                            "rows of a cached shard set to NaN between two tapt score runs",
                            expected="the second file equals the first, no NaN", area=AREA)
    cache = tmp_path / "cache"
    outputs = []
    for number in range(2):
        output = tmp_path / f"scores-{number}.jsonl"
        case.cli(["score", "--data", str(tiny_beir_path), "--teacher", str(tiny_bert_path),
                  "--cache-dir", str(cache), "--output", str(output), "--quiet"],
                 capsys).assert_accepted()
        outputs.append(output.read_text())
        if number == 0:
            (rows_file,) = shard_files(cache, "rows")
            rows = np.load(rows_file)
            rows[:] = np.nan
            np.save(rows_file, rows)
    assert "NaN" not in outputs[1]
    assert outputs[1] == outputs[0]


@pytest.mark.reliability(
    area=AREA, reader="embedding cache (finiteness of hits)",
    fault="a shard whose manifest matches its rows but whose rows hold NaN (written outside "
          "tapt's writer)",
    behaviour="the NaN rows are misses: encoded again with a warning, the cold run's ranking")
def test_cached_rows_get_the_finiteness_check_fresh_rows_get(tiny_bert_path, tmp_path,
                                                               caplog):
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder
    from tapt.retrieval.dense import DenseRetriever

    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu"))
    ids = [f"d{i}" for i in range(30)]
    texts = [f"passage {i}: a binder and a solvent, grade {i % 7}" for i in range(30)]
    queries = (["q0", "q1"], ["binder grade 3", "solvent grade 5"])
    retriever = DenseRetriever(encoder, top_k=30, progress=False, cache_dir=str(tmp_path))
    cold = retriever.retrieve(ids, texts, *queries)
    (rows_file,) = sorted(tmp_path.glob("*/shard-*.rows.npy"))
    rows = np.load(rows_file)
    rows[5] = np.nan
    np.save(rows_file, rows)
    manifest = rows_file.with_name(rows_file.name.replace(".rows.npy", ".json"))
    record = json.loads(manifest.read_text())
    record.setdefault("files", {})["rows.npy"] = {  # a digest record that agrees with the NaN
        "bytes": rows_file.stat().st_size,
        "sha256": hashlib.sha256(rows_file.read_bytes()).hexdigest()}
    manifest.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="tapt"):
        warm = retriever.retrieve(ids, texts, *queries)
    assert_same_run(warm.run, cold.run)
    assert all(np.isfinite(list(row.values())).all() for row in warm.run.values())
    assert warm.timings["corpus_from_cache"] == 29  # the NaN row was encoded again
    assert "not finite" in caplog.text


@pytest.mark.reliability(
    area=AREA, reader="embedding cache (float16 storage)",
    fault="a finite float32 row beyond float16's range (65504) stored with "
          "--cache-storage float16",
    behaviour="not stored (it would read back as inf), with a warning; the other rows are")
def test_a_row_that_overflows_float16_storage_is_not_cached(tmp_path, caplog):
    from tapt.retrieval.embedding_cache import EmbeddingCache

    rows = np.ones((4, 8), dtype=np.float32)
    rows[2, 3] = 1e5  # finite in float32, inf in float16
    cache = EmbeddingCache(tmp_path, {"model": "m"}, storage_dtype="float16")
    with caplog.at_level(logging.WARNING, logger="tapt"):
        cache.put(["a", "b", "c", "d"], rows)
    got, found = EmbeddingCache(tmp_path, {"model": "m"}, storage_dtype="float16").get(
        ["a", "b", "c", "d"])
    assert found.tolist() == [True, True, False, True]
    assert np.isfinite(got).all()
    assert "not finite in float16" in caplog.text


# ------------------------------------------------------------------ 1b. Arrow corpus cache

def corpus_texts(dataset) -> dict[str, str]:
    return {doc_id: passage.text for doc_id, passage in dataset.corpus.items()}


def copy_data(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@pytest.mark.reliability(
    area=AREA, reader="Arrow corpus cache (--corpus-store arrow)",
    fault="corpus.jsonl edited keeping its size and mtime (letters changed byte for byte, "
          "then touch -d / cp -p)",
    behaviour="a new cache key (the file's content digest): the edited texts are served")
def test_an_edit_that_keeps_size_and_mtime_is_a_new_corpus(tiny_beir_path, tmp_path):
    data = copy_data(tiny_beir_path, tmp_path / "data")
    corpus_file = data / "corpus.jsonl"
    before = load_data(data, corpus_store="arrow", corpus_cache=tmp_path / "cache")
    stat = corpus_file.stat()
    raw = corpus_file.read_bytes()
    old_word = before.corpus["t00-anchor"].text.split()[0].encode()
    new_word = bytes(b ^ 0x20 if chr(b).isalpha() else b for b in old_word)  # swap case
    corpus_file.write_bytes(raw.replace(old_word, new_word))
    os.utime(corpus_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert corpus_file.stat().st_size == stat.st_size
    after = load_data(data, corpus_store="arrow", corpus_cache=tmp_path / "cache")
    assert corpus_texts(after) == corpus_texts(load_data(data))  # the memory store's
    assert after.corpus["t00-anchor"].text.startswith(new_word.decode())
    assert len(list((tmp_path / "cache").glob("*.arrow"))) == 1  # the old version is gone


@pytest.mark.parametrize("damage", ["garbled", "truncated", "no digest record"])
def test_a_damaged_arrow_file_is_rebuilt_with_a_warning(damage, tiny_beir_path, tmp_path,
                                                        caplog, reliability_case):
    """A garbled ``.arrow`` was served as it was; a truncated one failed with "Not an Arrow
    file" naming no file, every time."""
    case = reliability_case("Arrow corpus cache (--corpus-store arrow)",
                            f"the cached .arrow file {damage}",
                            expected="a miss: rebuilt from corpus.jsonl, a warning naming "
                                     "the file", area=AREA)
    data = copy_data(tiny_beir_path, tmp_path / "data")
    cache = tmp_path / "cache"
    expected = corpus_texts(load_data(data))
    load_data(data, corpus_store="arrow", corpus_cache=cache)
    (arrow_file,) = cache.glob("*.arrow")
    raw = arrow_file.read_bytes()
    if damage == "garbled":
        word = expected["t03-anchor"].split()[1].encode()
        assert raw.count(word) >= 1
        arrow_file.write_bytes(raw.replace(word, b"#" * len(word)))
    elif damage == "truncated":
        arrow_file.write_bytes(raw[:len(raw) // 2])
    else:
        arrow_file.with_name(arrow_file.name + ".digest.json").unlink()
    with caplog.at_level(logging.WARNING, logger="tapt"):
        outcome = case.api(load_data, data, corpus_store="arrow", corpus_cache=cache)
        outcome.assert_accepted()
    assert corpus_texts(load_data(data, corpus_store="arrow", corpus_cache=cache)) == expected
    assert f"corpus cache {arrow_file}" in caplog.text and "rebuilt" in caplog.text
    assert arrow_file.read_bytes() == raw  # healed: the same file as first written


DISK_FULL = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))
if sys.argv[4] == "arrow":
    from tapt.data.sources import load_data
    data = load_data(sys.argv[1], corpus_store="arrow", corpus_cache=sys.argv[2])
    print(json.dumps({doc_id: p.text for doc_id, p in data.corpus.items()}))
else:
    import numpy as np
    from tapt.retrieval.embedding_cache import EmbeddingCache
    cache = EmbeddingCache(sys.argv[2], {"model": "m"})
    cache.put([f"text {i}" for i in range(200)], np.ones((200, 64), dtype=np.float32))
    print(json.dumps({"unstored": cache.unstored}))
"""


@pytest.mark.parametrize("store", ["arrow", "embeddings"])
def test_a_cache_write_on_a_full_disk_warns_and_the_work_goes_on(store, tiny_beir_path,
                                                                 tmp_path, reliability_case):
    """The disk fills while a cache file is written (a file-size limit: EFBIG)."""
    case = reliability_case(f"{store} cache write", "the disk fills while the cache is "
                            "written (RLIMIT_FSIZE: EFBIG)", expected="a warning; the corpus "
                            "is read (in memory) or the rows stay uncached; exit 0",
                            area=CONCURRENCY)
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", DISK_FULL, str(tiny_beir_path), str(cache),
                           "2048", store], env={**ENV, "PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    if store == "arrow":
        assert result == corpus_texts(load_data(tiny_beir_path))
        assert "cannot be written" in done.stderr and "held in memory" in done.stderr
        assert not list(cache.glob("*.arrow")) and not list(cache.glob("*.partial"))
    else:
        assert result == {"unstored": 200}
        assert "cannot store 200 rows" in done.stderr
        assert not list(cache.glob("*/shard-*"))  # nothing half-written left behind
    case.record("accepted", message=done.stderr.strip().splitlines()[-1][:300])


# ------------------------------------------------------------- 1c. teacher scores, mined

class StopAfter(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt("simulated kill")


def score(data: Path, output: Path, *extra: str) -> Path:
    from tapt.cli import main

    assert main(["score", "--data", str(data), "--teacher", "bm25", "--output", str(output),
                 "--overwrite", "--quiet", *extra]) == 0
    return output


DISTILL = {"name": "margin_mse"}
ROWS = {"soft_negative": True}


@pytest.mark.reliability(
    area=AREA, reader="resume (teacher scores)",
    fault="train margin_mse, kill after checkpoint-2, rewrite loss.teacher_scores (tapt score "
          "--k1 0.5 --overwrite), run the same command",
    behaviour="refused, naming loss.teacher_scores as changed; nothing trained on the second "
              "teacher")
def test_resume_refuses_a_rewritten_teacher_file(make_recipe, synth_path, tmp_path):
    from tapt.training.contrastive import train

    scores = score(synth_path, tmp_path / "teacher.jsonl")
    recipe_file, output = make_recipe("distill", data=ROWS,
                                      loss={**DISTILL, "teacher_scores": str(scores)},
                                      training={"max_steps": 4, "eval_steps": 2})
    with pytest.raises(KeyboardInterrupt):
        train(load_recipe(recipe_file), callbacks=[StopAfter(3)])
    assert (output / "checkpoints" / "checkpoint-2").is_dir()
    recorded = yaml.safe_load((output / "recipe.yaml").read_text())["fingerprint"]
    assert str(scores) in recorded["loss.teacher_scores"]
    score(synth_path, scores, "--k1", "0.5")  # another teacher behind the same path
    before = sorted(str(p) for p in output.rglob("*"))
    with pytest.raises(RecipeError, match=r"(?s)different run.*loss.teacher_scores: \S+ "
                                          r"changed"):
        train(load_recipe(recipe_file))
    assert sorted(str(p) for p in output.rglob("*")) == before


@pytest.mark.reliability(
    area=AREA, reader="resume (teacher scores)",
    fault="the teacher file edited in place between kill and resume, keeping its size and "
          "mtime",
    behaviour="refused, naming loss.teacher_scores (same size, other content)")
def test_resume_refuses_a_teacher_file_edited_keeping_size_and_mtime(make_recipe, synth_path,
                                                                     tmp_path):
    scores = score(synth_path, tmp_path / "teacher.jsonl")
    recipe = load_recipe(make_recipe("edited", loss={**DISTILL,
                                                     "teacher_scores": str(scores)})[0])
    run = RunDir(Path(recipe.output_dir))
    write_recipe(run, recipe, fingerprint.input_fingerprint(recipe))
    checkpoint = run.checkpoints / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    mark_complete(checkpoint, 2)
    assert prepare_run_dir(recipe).resume_from == str(checkpoint)
    stat = scores.stat()
    scores.write_text(edit_one_digit(scores.read_text()))
    os.utime(scores, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert scores.stat().st_size == stat.st_size
    with pytest.raises(RecipeError, match=r"loss.teacher_scores: \S+ changed \(same size"):
        prepare_run_dir(recipe)


def edit_one_digit(text: str) -> str:
    """``text`` with the last digit of the first score changed: same size, other content."""
    start = text.index('"score": ') + len('"score": ')
    end = start
    while text[end] in "-.0123456789e":
        end += 1
    digit = text[end - 1]
    return text[:end - 1] + ("1" if digit != "1" else "2") + text[end:]


def other_data(source: Path, target: Path, part: str) -> Path:
    """A copy of ``source`` with the same ids and other query (or passage) texts."""
    shutil.copytree(source, target)
    path = target / ("queries.jsonl" if part == "queries" else "corpus.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for record in records:
        record["text"] = "a solvent-borne primer " + record["text"][::-1]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return target


@pytest.mark.parametrize("part", ["queries", "corpus"])
def test_teacher_scores_of_another_dataset_with_the_same_ids_are_refused(
        part, make_recipe, synth_path, tmp_path, reliability_case):
    from tapt.training.contrastive import train

    case = reliability_case("teacher scores (loss.teacher_scores)",
                            f"scored on another dataset with the same ids (other {part} "
                            "texts)", expected="refused before the model loads, naming the "
                                               "file and what differs", area=AREA)
    elsewhere = other_data(synth_path, tmp_path / "elsewhere", part)
    scores = score(elsewhere, tmp_path / "teacher.jsonl")
    recipe_file, output = make_recipe("wrong-teacher", data=ROWS,
                                      loss={**DISTILL, "teacher_scores": str(scores)})
    outcome = case.api(train, load_recipe(recipe_file), watch=[output])
    outcome.assert_refused(scores, contains=f"its {part} differ")
    assert not (output / "recipe.yaml").exists()


def test_mined_negatives_of_another_dataset_with_the_same_ids_are_refused(
        synth_path, tmp_path, reliability_case):
    from tapt.cli import main
    from tapt.data.mined import read_mined

    case = reliability_case("mined negatives (data.mined_negatives)",
                            "mined on another dataset with the same ids (other query texts)",
                            expected="refused, naming the file and what differs", area=AREA)
    elsewhere = other_data(synth_path, tmp_path / "elsewhere", "queries")
    mined = tmp_path / "mined.jsonl"
    assert main(["mine", "--data", str(elsewhere), "--retriever", "bm25", "--output",
                 str(mined), "--quiet"]) == 0
    dataset = load_data(synth_path, splits=["train"])
    case.api(read_mined, mined, dataset, "train").assert_refused(mined,
                                                                 contains="its queries differ")
    assert read_mined(mined, load_data(elsewhere, splits=["train"]), "train")  # its own data


@pytest.mark.reliability(
    area=AREA, reader="mined negatives (tapt score --mined), teacher scores",
    fault="a file tapt mine / tapt score wrote, its NAME.digest.json deleted (or a file made "
          "by hand): no check of its content or of the data it was made from, with only an "
          "info line that --quiet hides",
    behaviour="read unchecked as before, with a warning naming the file and its missing "
              "record, shown under --quiet")
def test_a_file_without_its_digest_record_is_a_warning_naming_it(synth_path, tmp_path,
                                                                 quiet_cli, caplog):
    from tapt.retrieval.teacher_scores import read_teacher_scores

    mined = tmp_path / "mined.jsonl"
    assert quiet_cli.main(["mine", "--data", str(synth_path), "--retriever", "bm25",
                           "--output", str(mined), "--quiet"]) == 0
    mined.with_name(mined.name + ".digest.json").unlink()
    caplog.clear()
    assert quiet_cli.main(["score", "--data", str(synth_path), "--teacher", "bm25", "--mined",
                           str(mined), "--output", str(tmp_path / "scores.jsonl"),
                           "--quiet"]) == 0
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING
              and "no digest record" in r.getMessage()]
    assert len(warned) == 1 and str(mined) in warned[0], warned

    scores = score(synth_path, tmp_path / "teacher.jsonl")
    scores.with_name(scores.name + ".digest.json").unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tapt"):
        read_teacher_scores(scores, load_data(synth_path, splits=["train"]), "train")
    assert any(str(scores) in r.getMessage() and "no digest record" in r.getMessage()
               for r in caplog.records if r.levelno >= logging.WARNING), caplog.text


@pytest.mark.reliability(
    area=AREA, reader="teacher scores (loss.teacher_scores)",
    fault="one score edited by hand after tapt score wrote the file",
    behaviour="refused before the model loads, naming the file and its digest record")
def test_a_teacher_file_changed_since_tapt_score_is_refused(synth_path, tmp_path):
    from tapt.retrieval.teacher_scores import read_teacher_scores

    scores = score(synth_path, tmp_path / "teacher.jsonl")
    dataset = load_data(synth_path, splits=["train"])
    assert read_teacher_scores(scores, dataset, "train").teacher == "bm25"
    lines = scores.read_text().splitlines()
    record = json.loads(lines[3])
    record["score"] = record["score"] + 1.0
    lines[3] = json.dumps(record)
    scores.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"since tapt score wrote it .*teacher.jsonl.digest"
                                        r".json") as caught:
        read_teacher_scores(scores, dataset, "train")
    assert caught.value.path == str(scores)


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep (finished trials)",
    fault="a margin_mse sweep finished; its loss.teacher_scores file rewritten (tapt score "
          "--k1 0.5 --overwrite); the same sweep again",
    behaviour="refused before any trial runs, naming loss.teacher_scores; the finished "
              "trials are not reused")
def test_a_sweep_does_not_keep_finished_trials_after_the_teacher_changes(
        make_recipe, synth_path, tmp_path):
    from tapt.cli import main
    from tapt.selection.sweep import plan_sweep

    scores = score(synth_path, tmp_path / "teacher.jsonl")
    recipe_file, _ = make_recipe("sweep", data=ROWS,
                                      loss={**DISTILL, "teacher_scores": str(scores)},
                                      training={"max_steps": 2, "eval_steps": 2})
    axes = ["training.learning_rate=1e-4,1e-3"]
    assert main(["sweep", str(recipe_file), *axes]) == 0
    assert all(trial.status == "finished" for trial in plan_sweep(recipe_file, axes).trials)
    score(synth_path, scores, "--k1", "0.5")
    with pytest.raises(RecipeError, match=r"(?s)2 problem\(s\).*finished run that differs.*"
                                          r"loss\.teacher_scores: \S+ changed"):
        plan_sweep(recipe_file, axes)


@pytest.mark.reliability(
    area=AREA, reader="tapt sweep (finished trials)",
    fault="a finished trial's results.json edited: best dev mrr@10 NaN, a string, 1.5; a "
          "best_step of -3",
    behaviour="refused when the sweep is planned again, naming the trial, results.json and "
              "the field; no trial runs and no winner is ranked on it")
def test_a_sweep_refuses_an_edited_trial_result(make_recipe, tmp_path):
    from tapt.cli import main
    from tapt.selection.sweep import plan_sweep

    recipe_file, _ = make_recipe("sweep", training={"max_steps": 2, "eval_steps": 2})
    axes = ["training.learning_rate=1e-4,1e-3"]
    assert main(["sweep", str(recipe_file), *axes]) == 0
    trial = plan_sweep(recipe_file, axes).trials[0]
    results = trial.folder / "results.json"
    finished = json.loads(results.read_text(encoding="utf-8"))
    for change, field in (({"mrr@10": float("nan")}, "summary.best dev.mrr@10"),
                          ({"mrr@10": "0.4"}, "summary.best dev.mrr@10"),
                          ({"recall@100": 1.5}, "summary.best dev.recall@100"),
                          (None, "best_step")):
        edited = json.loads(json.dumps(finished))
        if change is None:
            edited["best_step"] = -3
        else:
            edited["summary"]["best dev"].update(change)
        results.write_text(json.dumps(edited), encoding="utf-8")
        with pytest.raises(RecipeError, match="no trial was run") as caught:
            plan_sweep(recipe_file, axes)
        assert f"{results}: field '{field}'" in str(caught.value)
    results.write_text(json.dumps(finished), encoding="utf-8")
    assert all(t.status == "finished" for t in plan_sweep(recipe_file, axes).trials)


# ------------------------------------------------------------------------ checkpoints

@pytest.mark.reliability(
    area=AREA, reader="resume (checkpoints)",
    fault="a byte of the newest checkpoint's weights changed after it was marked complete "
          "(same size: bit rot, a bad copy)",
    behaviour="that checkpoint is set aside with a warning; the run resumes from the previous "
              "complete one")
def test_a_checkpoint_changed_since_it_was_saved_is_not_resumed(make_recipe, caplog):
    recipe = load_recipe(make_recipe("bitrot")[0])
    run = RunDir(Path(recipe.output_dir))
    write_recipe(run, recipe, fingerprint.input_fingerprint(recipe))
    folders = []
    for step in (2, 4):
        folder = run.checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
        (folder / "model.safetensors").write_bytes(bytes(range(256)) * 8)
        mark_complete(folder, step)
        folders.append(folder)
    weights = folders[1] / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[1000] ^= 0x01
    weights.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="tapt"):
        start = prepare_run_dir(recipe)
    assert start.resume_from == str(folders[0])
    assert start.incomplete == [folders[1]]
    assert "model.safetensors same size, other content" in caplog.text


# ----------------------------------------------------------------- 6. cache concurrency

def dense_setup(tiny_bert_path):
    from tapt.encoders.loading import ModelSpec
    from tapt.encoders.sentence import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder.load(ModelSpec(str(tiny_bert_path), device="cpu"))
    ids = [f"d{i}" for i in range(30)]
    texts = [f"passage {i}: the binder and the solvent number {i * 7}" for i in range(30)]
    return encoder, ids, texts, (["q0", "q1"], ["binder 14", "solvent 21"])


def during_corpus_encode(encoder, action) -> None:
    """Run ``action()`` once, in the middle of the next corpus encode."""
    original = encoder.encode_stream
    done = []

    def spy(texts, kind="document", batch_size=32):
        for batch in original(texts, kind, batch_size):
            yield batch
            if kind == "document" and not done:
                done.append(action())

    encoder.encode_stream = spy


@pytest.mark.reliability(
    area=CONCURRENCY, reader="tapt cache prune",
    fault="tapt cache prune --max-gb 0 while a retrieval is encoding into the cache (used to "
          "delete the folder: the .partial shard vanished and the encode was lost)",
    behaviour="the folder in use is kept (a warning says so), the encode finishes and its "
              "shard is stored; an idle model key is still pruned")
def test_prune_never_touches_a_cache_folder_being_written(tiny_bert_path, tmp_path, quiet_cli,
                                                          capsys, caplog):
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.embedding_cache import EmbeddingCache
    from tapt.retrieval.embedding_cache_entries import list_entries

    encoder, ids, texts, queries = dense_setup(tiny_bert_path)
    root = tmp_path / "cache" / "local"
    EmbeddingCache(root, {"model": "idle"}).put(["x"], np.ones((1, 4), dtype=np.float32))
    uncached = DenseRetriever(encoder, top_k=30, progress=False).retrieve(ids, texts, *queries)
    during_corpus_encode(encoder, lambda: quiet_cli.main([
        "cache", "prune", "--cache-dir", str(tmp_path / "cache"), "--corpus-cache",
        str(tmp_path / "corpora"), "--max-gb", "0"]))
    with caplog.at_level(logging.WARNING, logger="tapt"):
        cached = DenseRetriever(encoder, top_k=30, progress=False,
                                cache_dir=str(root)).retrieve(ids, texts, *queries)
    assert cached.run == uncached.run
    printed = " ".join(capsys.readouterr().out.split())
    assert "deleted 1 model keys" in printed  # the idle key
    assert "in use by a running process" in caplog.text
    (entry,) = list_entries(root)
    assert entry.rows == len(texts)  # the encode was stored after all


@pytest.mark.reliability(
    area=CONCURRENCY, reader="embedding cache write",
    fault="the cache folder deleted (rm -rf, another machine) while a retrieval encodes "
          "into it",
    behaviour="a warning that the rows stay uncached; the retrieval finishes with the "
              "uncached ranking")
def test_a_failed_cache_write_never_aborts_the_encode(tiny_bert_path, tmp_path, caplog):
    from tapt.retrieval.dense import DenseRetriever

    encoder, ids, texts, queries = dense_setup(tiny_bert_path)
    uncached = DenseRetriever(encoder, top_k=30, progress=False).retrieve(ids, texts, *queries)
    root = tmp_path / "cache"
    during_corpus_encode(encoder, lambda: shutil.rmtree(root))
    with caplog.at_level(logging.WARNING, logger="tapt"):
        cached = DenseRetriever(encoder, top_k=30, progress=False,
                                cache_dir=str(root)).retrieve(ids, texts, *queries)
    assert cached.run == uncached.run
    assert "cannot store 30 rows" in caplog.text and "the work goes on" in caplog.text


@pytest.mark.reliability(
    area=CONCURRENCY, reader="tapt cache ls",
    fault="a file of a model key vanishes between the folder's listing and its stat (a "
          "writer renaming its .partial; shown by a dangling link)",
    behaviour="listed, the vanished file not counted; exit 0")
def test_cache_ls_while_a_writer_renames_its_files(tmp_path, quiet_cli, capsys):
    from tapt.retrieval.embedding_cache import EmbeddingCache

    root = tmp_path / "cache" / "local"
    cache = EmbeddingCache(root, {"model": "m"})
    cache.put(["a", "b"], np.ones((2, 4), dtype=np.float32))
    (cache.folder / "shard-1-2.rows.npy.partial").symlink_to(tmp_path / "renamed-meanwhile")
    assert quiet_cli.main(["cache", "ls", "--cache-dir", str(tmp_path / "cache"),
                           "--corpus-cache", str(tmp_path / "corpora")]) == 0
    assert "1 model keys" in " ".join(capsys.readouterr().out.split())


# --------------------------------------------------------------- preset records

BAD_RECORDS = [
    ("{", "not JSON"),
    ("[1]", "not a JSON object"),
    ('{"family": "default", "needs_remote_code": "yes"}', "field 'needs_remote_code'"),
    ('{"family": "default", "pooling": "median"}', "field 'pooling'"),
    ('{"family": "default", "max_seq_length": -4}', "field 'max_seq_length'"),
    ('{"family": "default", "query_prompt": 7}', "field 'query_prompt'"),
    ('{"family": "../x"}', "field 'family'"),
    ('{"stage": "tapt"}', "records no 'family'"),
]


@pytest.mark.reliability(
    area=AREA, reader="preset record (tapt_preset.json, family: auto)",
    fault="an export's tapt_preset.json cut short, a list, needs_remote_code \"yes\", an "
          "unknown pooling mode, a negative max_seq_length, a numeric prompt, a path as the "
          "family, no family at all; each evaluated with family auto",
    behaviour="refused before encoding, exit 2, one line naming the record and the field; "
              "no metrics written")
@pytest.mark.parametrize(("text", "says"), BAD_RECORDS)
def test_a_bad_preset_record_is_refused_before_encoding(text, says, model_copy,
                                                        tiny_beir_path, tmp_path, quiet_cli,
                                                        capsys):
    from tapt.cli import main

    (model_copy / "tapt_preset.json").write_text(text, encoding="utf-8")
    output = tmp_path / "metrics.json"
    code = main(["eval", "--model", str(model_copy), "--data", str(tiny_beir_path),
                 "--quiet", "--output", str(output)])
    message = capsys.readouterr().out
    assert code == 2 and not output.exists()
    assert "tapt_preset.json" in message and says in message
    assert "Traceback" not in message


@pytest.mark.parametrize("pooling", ["cls", ("cls", "mean")])
def test_the_record_write_preset_record_writes_passes_its_check(model_copy, tmp_path,
                                                                pooling):
    """Writer and checker agree: the record of a loaded model (one pooling mode, or several,
    which sentence-transformers keeps as a tuple and JSON as a list) reads back checked."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    from tapt.encoders.loading import ModelSpec, load_sentence_transformer
    from tapt.encoders.preset_record import read_preset_record, write_preset_record

    spec = ModelSpec(str(model_copy), family="default")
    model = load_sentence_transformer(spec)
    for module in model:
        if isinstance(module, Pooling):
            module.pooling_mode = pooling
    out = tmp_path / "export"
    out.mkdir()
    written = write_preset_record(out, model, spec, stage="tapt", loss="mnrl")
    (out / "modules.json").write_text("[]", encoding="utf-8")
    record = read_preset_record(str(out))
    assert record == json.loads(json.dumps(written))
    assert record["pooling"] == (list(pooling) if isinstance(pooling, tuple) else pooling)


def test_a_preset_record_tapt_wrote_is_read_back_unchanged(model_copy):
    from tapt.encoders.presets import get_preset

    record = {"family": "default", "pooling": "cls", "query_prompt": "q: ",
              "document_prompt": "", "max_seq_length": 64, "append_eos": False,
              "needs_remote_code": False, "base_model": "base", "base_revision": None,
              "stage": "merge", "sources": [{"model": "a"}], "weights": [0.5, 0.5]}
    (model_copy / "tapt_preset.json").write_text(json.dumps(record), encoding="utf-8")
    preset = get_preset("auto", str(model_copy))
    assert (preset.pooling, preset.query_prompt, preset.max_seq_length) == ("cls", "q: ", 64)
    assert preset.needs_remote_code is False


def _hint_readers(folder: Path) -> dict[str, tuple]:
    """Each reader for which tapt_preset.json is only a hint: (its answer, what it says it
    does instead)."""
    from tapt.analysis.result_files import infer_kind
    from tapt.encoders.preset_record import base_of
    from tapt.hub.push import recorded_remote_code

    return {"remote code": (recorded_remote_code(folder), "runs no code of its own"),
            "result label": (infer_kind({"evaluated": {"model": str(folder)}}),
                             "labelled a base model"),
            "base model": (base_of(str(folder))[0], "recorded as")}


@pytest.mark.reliability(
    area=AREA, reader="preset record where it is a hint (push remote code, result label, "
                      "base model)",
    fault="tapt_preset.json cut short ('{') or needs_remote_code \"yes\"",
    behaviour="each reader answers as if there were no record (no remote code, a base model, the folder's own name) and warns naming the record, the field "
              "and what it does instead")
@pytest.mark.parametrize("text", ["{", '{"family": "default", "needs_remote_code": "yes"}'])
def test_a_bad_record_read_as_a_hint_is_none_with_a_warning(text, model_copy, caplog):
    without = _hint_readers(model_copy)
    (model_copy / "tapt_preset.json").write_text(text, encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="tapt"):
        damaged = _hint_readers(model_copy)
    warnings = [r.getMessage() for r in caplog.records if "tapt_preset.json" in r.getMessage()]
    for reader, (answer, fallback) in without.items():
        assert damaged[reader][0] == answer, reader
        assert any(fallback in message for message in warnings), (reader, warnings)
