"""The command line runs as ``tapt``, ``python -m tapt`` and ``python tapt`` and the three
agree; ``python tapt`` (what ``accelerate launch tapt`` runs) cannot shadow libraries."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tapt.data.beir import Passage, write_beir

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tapt"
METRICS = ("binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100")
# third-party packages tapt imports: a module of the same name directly in tapt/ would
# shadow them when Python runs ``python tapt`` with tapt/ first on sys.path
THIRD_PARTY = {"datasets", "faiss", "wandb", "torch", "transformers", "accelerate", "peft",
               "yaml", "rich", "tqdm", "numpy", "bm25s", "pytrec_eval", "huggingface_hub",
               "sentence_transformers", "matplotlib", "pydantic", "tokenizers", "scipy",
               "sklearn", "safetensors", "tensorboard", "pandas", "pyarrow"}


@pytest.fixture(autouse=True)
def _hub_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def environment() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", COLUMNS="200", NO_COLOR="1")
    env.pop("PYTHONPATH", None)
    return env


def run(argv: list[str], cwd: Path, check_rc: int | None = 0) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=cwd, env=environment(), capture_output=True, text=True,
                          timeout=120, check=False)
    if check_rc is not None:
        assert done.returncode == check_rc, (argv, done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    corpus = {
        "d1": Passage(title="Epoxy primer", text="The primer uses a bisphenol epoxy binder."),
        "d2": Passage(title="Acrylic topcoat", text="The topcoat uses an acrylic binder."),
        "d3": Passage(title="Polyurethane sealant", text="The sealant cures with isocyanate."),
        "d4": Passage(title="Alkyd enamel", text="The enamel dries by oxidation of alkyd."),
        "d5": Passage(title="Silicone coating", text="The coating resists heat: silicone."),
        "d6": Passage(title="Latex paint", text="The paint is a vinyl acrylic latex."),
    }
    queries = {"q1": "Which binder does the epoxy primer use?",
               "q2": "What cures the polyurethane sealant?",
               "q3": "Which resin makes the coating resist heat?",
               "q4": "Which binder holds the epoxy primer together?",
               "q5": "Which hardener does the polyurethane sealant use?"}
    test = {"q1": {"d1": 3, "d2": 2, "d6": 1}, "q2": {"d3": 3, "d4": 2},
            "q3": {"d5": 3, "d4": 2, "d2": 1}}
    # the splits share no query (tapt refuses a query judged in two splits)
    qrels = {"train": {"q4": {"d1": 3, "d2": 2}}, "dev": {"q5": {"d3": 3, "d4": 2}},
             "test": test}
    return write_beir(tmp_path_factory.mktemp("cli") / "tiny", corpus, queries, qrels)


def console_script() -> Path:
    script = Path(sys.executable).parent / ("tapt.exe" if os.name == "nt" else "tapt")
    if not script.exists():
        pytest.skip(f"no tapt console script next to {sys.executable} (package not installed)")
    return script


WAYS = {
    "console-script": lambda: ([str(console_script())], None),
    "python -m tapt": lambda: ([sys.executable, "-m", "tapt"], ROOT),
    "python tapt": lambda: ([sys.executable, "tapt"], ROOT),
}


@pytest.fixture(scope="module")
def results(dataset, tmp_path_factory) -> dict[str, dict]:
    """Each way runs ``data validate`` and ``bm25``; the metrics JSON of each way."""
    out = tmp_path_factory.mktemp("outputs")
    found = {}
    for way, make in WAYS.items():
        try:
            prefix, cwd = make()
        except pytest.skip.Exception:
            continue
        cwd = cwd or out
        validated = run([*prefix, "data", "validate", str(dataset)], cwd)
        assert f"ok {dataset}" in validated.stdout.replace("\n", " ")
        target = out / f"{way.replace(' ', '_')}.json"
        run([*prefix, "bm25", "--data", str(dataset), "--split", "test", "--quiet",
             "--output", str(target)], cwd)
        found[way] = json.loads(target.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("way", list(WAYS))
def test_each_way_writes_the_four_metrics(results, way):
    if way not in results:
        pytest.skip(f"{way} not available")
    metrics = results[way]
    assert set(METRICS) <= set(metrics)
    assert all(0.0 <= metrics[key] <= 1.0 for key in METRICS)
    assert metrics["evaluated"]["split"] == "test"
    assert metrics["evaluated"]["num_queries"] == 3
    assert set(metrics["per_query"]) == {"q1", "q2", "q3"}


def test_the_three_ways_agree(results, dataset):
    from tapt.data.beir import load_beir_folder
    from tapt.retrieval.bm25 import BM25Retriever
    from tapt.retrieval.evaluate import evaluate

    assert {"python -m tapt", "python tapt"} <= set(results)
    # the library called in this process is the reference
    report = evaluate(BM25Retriever(progress=False), load_beir_folder(dataset, ["test"]), "test")
    reference = json.loads(json.dumps({**report.metrics, "per_query": report.per_query}))
    for way, metrics in results.items():
        assert {k: metrics[k] for k in METRICS} == {k: reference[k] for k in METRICS}, way
        assert metrics["per_query"] == reference["per_query"], way


def test_each_way_reports_bad_data_with_exit_code_2(dataset, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(dataset, bad)
    with (bad / "qrels" / "test.tsv").open("a", encoding="utf-8") as handle:
        handle.write("q1\tmissing-doc\t1\n")
    for way, make in WAYS.items():
        try:
            prefix, cwd = make()
        except pytest.skip.Exception:
            continue
        done = run([*prefix, "data", "validate", str(bad)], cwd or tmp_path, check_rc=2)
        assert "unknown corpus id 'missing-doc'" in done.stdout.replace("\n", " "), way
        assert "Traceback" not in done.stderr, way


def test_python_tapt_help_from_the_repository_root():
    done = run([sys.executable, "tapt", "--help"], ROOT)
    assert "usage: tapt" in done.stdout
    assert "bm25" in done.stdout and "eval" in done.stdout


def test_no_module_in_tapt_is_named_like_a_library():
    entries = {p.stem if p.suffix == ".py" else p.name for p in PACKAGE.iterdir()
               if (p.suffix == ".py" or (p.is_dir() and p.name != "__pycache__"))}
    entries -= {"__init__", "__main__"}
    clashes = entries & (THIRD_PARTY | set(sys.stdlib_module_names))
    assert not clashes, f"tapt/ holds modules that shadow libraries under `python tapt`: {clashes}"


def copy_package(destination: Path) -> Path:
    """A copy of the repository's tapt/ (the package as it is now) under ``destination``."""
    target = destination / "tapt"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


CANARY = "raise RuntimeError('SHADOWED: tapt/{name}.py imported as a top-level module')\n"


def test_python_tapt_does_not_import_modules_of_tapt_as_top_level(dataset, tmp_path):
    """Canary modules named like the libraries the CLI imports (rich, numpy, bm25s...) are
    planted in a copy of tapt/; ``python tapt`` must import the real libraries."""
    repo = tmp_path / "repo"
    package = copy_package(repo)
    for name in ("rich", "numpy", "bm25s", "pytrec_eval", "tqdm", "yaml", "datasets"):
        assert not (package / name).exists() and not (package / f"{name}.py").exists()
        (package / f"{name}.py").write_text(CANARY.format(name=name), encoding="utf-8")
    done = run([sys.executable, "tapt", "data", "validate", str(dataset)], repo)
    assert "SHADOWED" not in done.stdout + done.stderr
    out = tmp_path / "m.json"
    done = run([sys.executable, "tapt", "bm25", "--data", str(dataset), "--quiet", "--output",
                str(out)], repo)
    assert "SHADOWED" not in done.stdout + done.stderr
    assert set(METRICS) <= set(json.loads(out.read_text(encoding="utf-8")))
    # the canaries do fire when tapt/ is first on sys.path (a __main__ without the fix)
    (package / "__main__.py").write_text("from tapt.cli import main\nmain()\n",
                                         encoding="utf-8")
    done = run([sys.executable, "tapt", "data", "validate", str(dataset)], repo,
               check_rc=None)
    assert done.returncode != 0
    assert "SHADOWED" in done.stderr


@pytest.mark.parametrize("world_size", ["1", "2"])
def test_a_launched_rank_ends_in_the_program_after_its_exit_handlers(tmp_path, world_size):
    """Under a launcher (``WORLD_SIZE`` > 1) the ``tapt`` program ends its rank in
    ``entry``: the exit handlers run and the exit code is kept, but the interpreter's
    finalization (where torch's C++ teardown aborted 1 two-rank run in 10) is skipped, so
    nothing after ``entry()`` runs. A single process returns the code as before, and
    ``main`` (the function a script calls) never ends the process."""
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('exit handler ran', flush=True))\n"
              "from tapt.cli import entry, main\n"
              f"sys.argv = ['tapt', 'data', 'stats', {str(tmp_path / 'missing')!r}]\n"
              "print('main returned', main(), flush=True)\n"
              "print('returned', entry(), flush=True)\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "WORLD_SIZE": world_size, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert "exit handler ran" in done.stdout and "not a folder" in done.stdout + done.stderr
    assert "main returned 2" in done.stdout
    if world_size == "2":
        assert done.returncode == 2 and "\nreturned" not in done.stdout
    else:
        assert done.returncode == 0 and "\nreturned 2" in done.stdout
