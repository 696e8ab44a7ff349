"""benchmarks/compare_recipes.py measures and mines the data as the recipe reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tapt.cli.main import build_parser
from tapt.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def compare_recipes(benchmark_module):
    return benchmark_module("compare_recipes")


def _recipe(data: Path, *overrides: str):
    """recipes/scifact.yaml on the folder ``data``: how it reads data (lengths, leniency)
    does not depend on which folder, and a checkout without ../shared loads it too."""
    return load_recipe(REPO / "recipes" / "scifact.yaml",
                       ["output_dir=unused", f"data.path={data}", *overrides])


def test_a_lenient_recipe_is_evaluated_and_mined_leniently(compare_recipes,
                                                             tiny_beir_path):
    """Cranfield (empty passages) needs data.lenient: its test evaluation and its mining
    must be lenient too (the zero-shot evaluation failed on corpus.jsonl:471 without)."""
    options = compare_recipes.as_recipe_reads(_recipe(tiny_beir_path, "data.lenient=true"))
    assert options == ["--max-seq-length", "256", "--lenient"]
    parser = build_parser()
    evaluated = parser.parse_args(["eval", "--model", "m", "--data", "d", *options])
    mined = parser.parse_args(["mine", "--data", "d", "--retriever", "bm25", "--output",
                               "m.jsonl", *options])
    assert evaluated.lenient and mined.lenient
    assert evaluated.max_seq_length == mined.max_seq_length == 256


def test_a_strict_recipe_stays_strict(compare_recipes, tiny_beir_path):
    reads = compare_recipes.as_recipe_reads
    assert reads(_recipe(tiny_beir_path)) == ["--max-seq-length", "256"]
    assert reads(_recipe(tiny_beir_path, "model.max_seq_length=null")) == []
