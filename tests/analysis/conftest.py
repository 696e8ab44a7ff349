"""Generated datasets for the analysis tests (session-scoped; treat them as read-only).

- ``c1_path``: ``tapt data synth`` structured (C1), 60 queries, 120 distractors, seed 0,
  with ``labels`` (domain, class) on every passage.
- ``c0_path``: the random (C0) variant with the same arguments.
- ``benchmark_module``: ``benchmark_module(NAME)`` imports ``benchmarks/NAME.py`` as a module
  (its own ``arm_records`` import resolved), for the tests of the benchmark scripts.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tapt.data.synth import synthesize

QUERIES = 60
DISTRACTORS = 120


@pytest.fixture(scope="session")
def c1_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("analysis-data") / "formbench-structured"
    synthesize(folder, queries=QUERIES, distractors=DISTRACTORS, variant="structured", seed=0)
    return folder


@pytest.fixture(scope="session")
def c0_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("analysis-data") / "formbench-random"
    synthesize(folder, queries=QUERIES, distractors=DISTRACTORS, variant="random", seed=0)
    return folder


@pytest.fixture(scope="session")
def c1(c1_path):
    import tapt

    return tapt.load_data(c1_path)


BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def benchmark_module(monkeypatch):
    def load(name: str):
        monkeypatch.syspath_prepend(str(BENCHMARKS))  # their arm_records import
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)  # dataclasses look it up
        spec.loader.exec_module(module)
        return module
    return load
