"""One owner per concept: ``results.json``'s content is built in one function from one typed
record (:class:`tapt.run_folder.records.RunResults`), and ``wandb`` is imported by one module
of ``tapt/training``. The source is read with ``ast`` (nothing is imported for the scan)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tapt.run_folder.layout import RunDir
from tapt.run_folder.records import (
    FINISHED,
    STOPPED_NONFINITE,
    DaptFacts,
    DevOutcome,
    ExportOutcome,
    NonFiniteRecord,
    NonFiniteStop,
    RunResults,
    results_content,
    write_results,
)

PACKAGE = Path(__file__).resolve().parents[2] / "tapt"
WRITERS = {"atomic_write_json", "atomic_write_text", "write_text", "write_bytes", "dump",
           "open"}
"""Calls that write a file when given its path (``open`` only in a writing mode counts too:
reading results.json is everyone's right, so ``open`` is checked for its mode)."""


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _names_results_file(node: ast.AST) -> bool:
    """``node`` refers to a run's results.json: ``run.results_file`` or the name itself."""
    return any((isinstance(part, ast.Attribute) and part.attr == "results_file")
               or (isinstance(part, ast.Constant) and part.value == "results.json")
               for part in ast.walk(node))


def _writes_results_file(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in WRITERS:
        return False
    if name == "open":
        mode = call.args[1] if len(call.args) > 1 else next(
            (kw.value for kw in call.keywords if kw.arg == "mode"), None)
        if not (isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+")):
            return False
        return _names_results_file(call.args[0]) if call.args else False
    receiver = [func.value] if isinstance(func, ast.Attribute) and name.startswith("write_") \
        else []
    return any(_names_results_file(node) for node in [*receiver, *call.args[:1]])


def test_only_the_records_module_writes_results_json():
    """Every writer fills a RunResults; the file itself is written in one place."""
    writers = []
    for path, tree in _modules():
        if path == PACKAGE / "run_folder" / "records.py":
            continue
        writers += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    for node in ast.walk(tree)
                    if isinstance(node, ast.Call) and _writes_results_file(node)]
    assert writers == []


def test_every_write_results_call_passes_a_run_results_record():
    """No caller hands ``write_results`` a dict it composed (the record is the content)."""
    composed = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "write_results":
                record = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(record, ast.Call) and getattr(record.func, "id", None)
                        == "RunResults"):
                    composed.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert composed == []


def test_write_results_refuses_a_dict(tmp_path):
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    with pytest.raises(TypeError, match="RunResults"):
        write_results(run, {"status": "finished", "history": []})
    assert not run.results_file.exists()


def test_the_content_of_each_kind_of_run_in_the_order_tapt_writes_it(tmp_path):
    """A finished TAPT run, a finished DAPT run, a non-finite stop and a refused gate: the
    fields (and their order) tapt wrote before the record existed."""
    history = [{"step": 0, "binary_ndcg@10": 0.5}]
    dev = DevOutcome(summary={"best dev": {"binary_ndcg@10": 0.6}}, best_step=None)
    data = {"relevance": {"rule": "graded"}, "weak_pairs": {"made": 3}}
    gate = {"metric": "binary_ndcg@10", "beats_zero_shot": True}
    tapt_run = RunResults(status=FINISHED, dev=dev, history=history,
                          exported=ExportOutcome({"kind": "best", "steps": [None]}, None, 0),
                          training_bf16=False, nonfinite=NonFiniteRecord(0, []), data=data,
                          zero_shot_gate=gate)
    assert list(results_content(tapt_run)) == [
        "status", "summary", "best_step", "export", "training_bf16", "eval_dtype",
        "nonfinite_steps", "nonfinite_events", "refused_evaluations", "relevance",
        "weak_pairs", "zero_shot_gate", "history"]
    assert results_content(tapt_run)["best_step"] is None  # null, not left out
    assert results_content(tapt_run)["eval_dtype"] is None
    dapt_run = RunResults(status=FINISHED, history=history, training_bf16=True,
                          dapt=DaptFacts("mlm", 128, 10, 2), nonfinite=NonFiniteRecord(1, []))
    assert results_content(dapt_run) == {
        "status": "finished", "objective": "mlm", "sequence_length": 128,
        "training_passages": 10, "held_out_passages": 2, "training_bf16": True,
        "nonfinite_steps": 1, "nonfinite_events": [], "history": history}
    stop = RunResults(status=STOPPED_NONFINITE, error="NaN loss", history=[],
                      stop=NonFiniteStop([{"step": 3}], None))
    assert list(results_content(stop).items()) == [
        ("status", "stopped: non-finite"), ("error", "NaN loss"),
        ("nonfinite_events", [{"step": 3}]), ("last_checkpoint", None), ("history", [])]
    refused = RunResults(status="refused", error="no", dev=dev, data=data,
                         zero_shot_gate=gate, history=history)
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    write_results(run, refused)
    written = json.loads(run.results_file.read_text(encoding="utf-8"))
    assert list(written) == ["status", "error", "summary", "best_step", "relevance",
                             "weak_pairs", "zero_shot_gate", "history", "provenance"]


def test_wandb_is_imported_by_one_module_of_training():
    importers = set()
    for path, tree in _modules():
        if (PACKAGE / "training") not in path.parents:
            continue
        for node in ast.walk(tree):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(name == "wandb" or name.startswith("wandb.") for name in names):
                importers.add(str(path.relative_to(PACKAGE.parent)))
    assert importers == {"tapt/training/tracking.py"}


ONE_OWNER = {"GuardSet": "tapt/training/guard_data.py", "data_label": "tapt/cards/common.py",
             "base_model_id": "tapt/encoders/preset_record.py",
             "write_card": "tapt/cards/run_card.py", "write_dapt_card": "tapt/cards/run_card.py",
             "merge_card": "tapt/cards/merge_card.py",
             "combine_card": "tapt/cards/combine_card.py",
             "finish_wandb": "tapt/training/tracking.py",
             "run_trainer": "tapt/training/trainer.py"}
"""Names of one concept each, and the one module that defines them."""


def test_each_concept_is_defined_in_one_module():
    """One guard set, one data label, one base-model lookup, one writer per kind of card,
    one W&B finish, one trainer run: each defined once, where :data:`ONE_OWNER` says."""
    found: dict[str, set[str]] = {name: set() for name in ONE_OWNER}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in found:
                found[node.name].add(str(path.relative_to(PACKAGE.parent)))
    assert found == {name: {module} for name, module in ONE_OWNER.items()}
