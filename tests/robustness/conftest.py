"""Fixtures of the robustness suite, and the hooks that feed ``docs/reliability.md``.

Adding rows to the reliability report from a new test (crash safety, disk space, secrets,
...): put the test module in ``tests/robustness/`` and either

- use the ``reliability_case`` fixture: ``case = reliability_case(reader, hostile,
  expected="refused", area="crash safety")``, then ``case.api(fn, ...)``,
  ``case.cli([...], capsys)`` (classified and timed out for you) or
  ``case.record("recovered", message=...)`` for a fault that is not one call; or
- mark the test ``@pytest.mark.reliability(area="disk space", fault="disk full while
  saving a checkpoint", behaviour="refused, no partial checkpoint")``: its row says
  ``as documented`` when the test passes and ``FAILED`` when it does not.

``scripts/reliability_report.py`` runs this folder with ``TAPT_RELIABILITY_JSON`` set and
renders every row, grouped by ``area``.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `from robustness import ...` under any import mode
    sys.path.insert(0, str(HERE.parent))

from robustness.reliability import Case, write_rows


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "reliability(area, fault, behaviour): a row of docs/reliability.md "
                   "(see tests/robustness/conftest.py)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    if report.when == "teardown":
        _record_marked(item)


def _passed(item) -> bool:
    reports = [getattr(item, f"rep_{when}", None) for when in ("setup", "call")]
    return all(r is not None and r.passed for r in reports)


def _record_marked(item) -> None:
    marker = item.get_closest_marker("reliability")
    if marker is None:
        return
    info = {**dict(zip(("area", "fault", "behaviour"), marker.args)), **marker.kwargs}
    passed = _passed(item)
    write_rows([{
        "area": info.get("area", "other"), "reader": info.get("reader", ""),
        "input": info.get("fault", item.name), "expected": info.get("behaviour", ""),
        "via": "test", "outcome": "as documented" if passed else "FAILED",
        "exit_code": None, "message": info.get("behaviour", ""), "partial_outputs": [],
        "seconds": round(getattr(getattr(item, "rep_call", None), "duration", 0.0), 3),
        "test": item.nodeid, "passed": passed, "notes": []}])


@pytest.fixture
def reliability_case(request, tmp_path):
    """Factory of :class:`robustness.reliability.Case`; every case's rows are recorded
    when the test ends, with whether the test passed."""
    cases: list[Case] = []

    def make(reader: str, hostile: str, *, expected: str = "refused",
             area: str = "hostile input") -> Case:
        case = Case(reader=reader, hostile=hostile, expected=expected, area=area,
                    node=request.node.nodeid, tmp=str(tmp_path))
        cases.append(case)
        return case

    yield make
    passed = _passed(request.node) if hasattr(request.node, "rep_call") else None
    for case in cases:
        case.passed = passed
        write_rows(case.rows())


@pytest.fixture
def quiet_cli(monkeypatch):
    """CLI messages on one line each (paths are not wrapped); undoes the logging set-up
    ``cli.main`` does."""
    from tapt import cli
    from tapt.util.redaction import RedactingConsole

    monkeypatch.setattr(cli.terminal, "console",
                        RedactingConsole(width=10_000, color_system=None))
    root, tapt_logger = logging.getLogger(), logging.getLogger("tapt")
    handlers, level, tapt_level = root.handlers[:], root.level, tapt_logger.level
    yield cli
    root.handlers[:] = handlers
    root.setLevel(level)
    tapt_logger.setLevel(tapt_level)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _hypothesis_home(tmp_path_factory):
    """Hypothesis keeps its caches in a temporary folder, not in .hypothesis/ of the checkout
    (the properties run derandomized, without an example database)."""
    try:
        from hypothesis.configuration import set_hypothesis_home_dir
    except ImportError:
        yield
        return
    set_hypothesis_home_dir(tmp_path_factory.mktemp("hypothesis"))
    yield
    set_hypothesis_home_dir(None)


# --------------------------------------------------------------------------- a tiny dataset

CORPUS = [{"_id": f"d{i}", "title": f"Coating {i}", "text": f"passage {i} about a binder"}
          for i in range(1, 7)]
CORPUS[-1]["title"] = "Pigment é"  # a multi-byte character on the last line
QUERIES = [{"_id": f"q{i}", "text": f"which binder in coating {i}?"} for i in range(1, 7)]
QRELS = {
    "train": [("q1", "d1", 3), ("q1", "d2", 2), ("q2", "d3", 3), ("q2", "d4", 1)],
    "dev": [("q3", "d5", 3), ("q3", "d4", 2), ("q3", "d1", 1)],
    "test": [("q4", "d1", 3), ("q4", "d2", 2), ("q5", "d3", 3), ("q6", "d5", 3)],
}
QRELS_HEADER = b"query-id\tcorpus-id\tscore"


def jsonl_lines(records: list) -> list[bytes]:
    return [(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)).encode("utf-8")
            for r in records]


def qrels_lines(split: str) -> list[bytes]:
    return [QRELS_HEADER] + [f"{q}\t{d}\t{s}".encode() for q, d, s in QRELS[split]]


def write_dataset(folder: Path, **replace: bytes) -> Path:
    """The tiny dataset under ``folder``; ``replace`` maps ``corpus``, ``queries`` or a
    split name to the bytes of that file."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    files = {"corpus": folder / "corpus.jsonl", "queries": folder / "queries.jsonl",
             **{split: folder / "qrels" / f"{split}.tsv" for split in QRELS}}
    defaults = {"corpus": b"\n".join(jsonl_lines(CORPUS)) + b"\n",
                "queries": b"\n".join(jsonl_lines(QUERIES)) + b"\n",
                **{split: b"\n".join(qrels_lines(split)) + b"\n" for split in QRELS}}
    for name, path in files.items():
        path.write_bytes(replace.get(name, defaults[name]))
    return folder


@pytest.fixture
def dataset_dir(tmp_path):
    """A valid tiny BEIR folder (6 passages, 6 queries, train/dev/test)."""
    return write_dataset(tmp_path / "data")


@pytest.fixture
def line_limit(monkeypatch):
    """A small line-length limit, so that the "line over the limit" cases stay cheap (the
    100 MB line is tried by benchmarks/fuzz_readers.py)."""
    from tapt.data import lines

    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 4096, raising=False)
    return 4096


# --- the models and data several trial modules start from ---------------------------------

@pytest.fixture(scope="session")
def synth_tiny(tmp_path_factory) -> Path:
    """``tapt data synth tiny --queries 30 --distractors 10 --seed 0`` (FormBench grades
    3/2/1), built once: read-only (copy it to change it)."""
    from tapt.data.synth import synthesize

    folder = tmp_path_factory.mktemp("trial") / "tiny"
    synthesize(folder, queries=30, distractors=10, seed=0)
    return folder


@pytest.fixture
def model_copy(tiny_bert_path, tmp_path) -> Path:
    """A writable copy of the tiny BERT model (``tmp_path/model``), for a test that changes
    the folder or writes beside it."""
    return Path(shutil.copytree(tiny_bert_path, tmp_path / "model"))


EXPORT_CARD = ("---\nlicense: apache-2.0\nlibrary_name: sentence-transformers\n---\n"
               "# tiny\n")


def export_like(model: Path, target: Path, drop: tuple[str, ...] = ()) -> Path:
    """A plain-file copy of ``model`` that passes every push check: LICENSE and a card."""
    from tapt.cards.common import apache_license_text

    shutil.copytree(model, target)
    (target / "LICENSE").write_text(apache_license_text(), encoding="utf-8")
    (target / "README.md").write_text(EXPORT_CARD, encoding="utf-8")
    for name in drop:
        (target / name).unlink()
    return target
