"""A Markdown report of one ``tapt train`` run folder.

A run folder holds ``recipe.yaml``, ``metrics.jsonl`` (one line per dev evaluation; step 0
is the zero-shot model), ``results.json`` (status, best step, zero-shot / best-dev / test
metrics) and ``final/``. The report shows the dev curve per checkpoint with the zero-shot
model and BM25 as reference lines, the best checkpoint, the test metrics and the figures
made for the run.

BM25 is computed on the very dev sub-corpus the run evaluated on, or read from a ``tapt
bm25 --output`` file that pairs with it (:mod:`tapt.analysis.bm25_reference`).

Example::

    report = build_report("runs/quickstart")
    Path("runs/quickstart/report.md").write_text(render_markdown(report, Path("runs/quickstart")))
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tapt.analysis.bm25_reference import bm25_from_file, bm25_on_dev
from tapt.analysis.run_records import TEST_FILE, overlap_rows, run_gate, split_records
from tapt.cards.dev_history import dev_curve, dev_table, guard_key, metrics_table
from tapt.recipe import TrainingSettings
from tapt.retrieval.metrics import METRIC_KEYS
from tapt.run_folder.layout import RunDir
from tapt.run_folder.records import (
    best_step_problem,
    history_problem,
    metrics_row_problem,
    read_history,
)
from tapt.run_folder.split_records import carve_lines, decontamination_lines, overlap_lines
from tapt.training.zero_shot_gate import gate_lines, gate_message
from tapt.util.figures import save

# rich is imported by the table printer only (importing tapt.analysis stays light).

logger = logging.getLogger(__name__)

CURVE_SUFFIX = "_dev_curve.png"
"""The report's own dev curve is written next to it as ``<report stem>_dev_curve.png``."""


@dataclass
class RunReport:
    run_dir: Path
    recipe: dict
    status: str
    history: list[dict]
    best_step: int | None
    summary: dict[str, dict[str, float]]
    metric: str
    references: dict[str, dict[str, float]] = field(default_factory=dict)
    """Reference lines for the dev curve: ``zero-shot`` and ``BM25``, all four metrics."""
    notes: list[str] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    relevance: dict | None = None
    """The relevance rule the run recorded in ``results.json`` (None: none recorded)."""
    records: dict[str, dict] = field(default_factory=dict)
    """``dev_carve``, ``decontaminated`` and the test's ``train_overlap``, those recorded."""
    gate: dict | None = None
    """The zero-shot gate (:mod:`tapt.training.zero_shot_gate`); None without zero-shot."""

    @property
    def name(self) -> str:
        return self.run_dir.resolve().name

    def to_dict(self) -> dict:
        return {"run_dir": str(self.run_dir), "status": self.status, "metric": self.metric,
                "best_step": self.best_step, "history": self.history,
                "summary": self.summary, "references": self.references,
                "notes": self.notes, "plots": [str(p) for p in self.plots],
                **self.records, "zero_shot_gate": self.gate}


def load_run(run_dir: str | os.PathLike) -> RunReport:
    """Read a run folder (recipe, dev history, results); nothing is computed."""
    run = RunDir(Path(run_dir))
    if not run.recipe_file.is_file():
        raise FileNotFoundError(f"{run.root}: not a tapt train run folder (no recipe.yaml)")
    recipe = _read_run_file(run.recipe_file, yaml.safe_load) or {}
    results = _read_run_file(run.results_file, json.loads) if run.results_file.is_file() else {}
    try:
        history = [entry for entry in read_history(run, require_metrics=True)
                   if not entry.get("error")]
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise ValueError(f"{run.metrics_file}: not a tapt metrics file ({type(err).__name__}: "
                         f"{err})") from None
    if not history:
        history = recorded_history(run.results_file, results.get("history", []))
    metric = (recipe.get("eval") or {}).get("metric", "binary_ndcg@10")
    if metric not in METRIC_KEYS:
        raise ValueError(f"{run.recipe_file}: field 'eval.metric': expected one of "
                         f"{', '.join(METRIC_KEYS)}, got {metric!r}")
    best_step = results.get("best_step")
    problem = best_step_problem(best_step)
    if problem is not None:
        raise ValueError(f"{run.results_file}: field 'best_step': {problem}")
    report = RunReport(run_dir=run.root, recipe=recipe,
                       status=str(results.get("status", "unfinished (no results.json)")),
                       history=history, best_step=best_step,
                       summary=recorded_summary(run.results_file, results.get("summary", {})),
                       metric=metric,
                       relevance=results.get("relevance")
                       if isinstance(results.get("relevance"), dict) else None)
    zero = next((entry for entry in history if entry["step"] == 0), None)
    if zero is not None:
        report.references["zero-shot"] = {k: zero[k] for k in METRIC_KEYS}
    if report.best_step is None and history:  # a stopped run: the best evaluation so far
        report.notes.append("results.json names no best checkpoint; the best dev evaluation "
                            "in metrics.jsonl is shown instead")
        report.best_step = max(history, key=lambda e: e[metric])["step"]
    report.records = split_records(results, run.results_file, run.root / TEST_FILE)
    report.gate = run_gate(results, run.results_file, history, report.best_step, metric,
                           report.summary)
    return report


def recorded_history(path: Path, history) -> list[dict]:
    """``results.json``'s copy of the dev history (a run stopped before metrics.jsonl was
    kept), each entry checked as :func:`~tapt.run_folder.records.read_history` checks a line;
    refused evaluations dropped."""
    if not isinstance(history, list):
        raise ValueError(f"{path}: field 'history': expected a list of evaluations")  # noqa: TRY004
    for number, entry in enumerate(history):
        problem = history_problem(entry, require_metrics=True)
        if problem is not None:
            raise ValueError(f"{path}: field 'history[{number}].{problem[0]}': {problem[1]}")
    return [entry for entry in history if not entry.get("error")]


def recorded_summary(path: Path, summary) -> dict[str, dict[str, float]]:
    """``results.json``'s summary rows, each the four metrics as finite numbers in [0, 1]
    (what the report prints as the run's result), or an error naming the field."""
    if not isinstance(summary, dict):
        raise ValueError(  # noqa: TRY004 (a malformed file, not a wrong argument)
            f"{path}: field 'summary': expected an object of metric rows")
    for row, metrics in summary.items():
        problem = metrics_row_problem(row, metrics)
        if problem is not None:
            raise ValueError(f"{path}: field '{problem[0]}': {problem[1]}")
    return summary


def _read_run_file(path: Path, parse) -> dict:
    """``parse`` of a run file's text, which must be a mapping; else an error naming it."""
    try:
        data = parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError, yaml.YAMLError) as err:
        problem = " ".join(str(err).split())[:200]
        raise ValueError(f"{path}: cannot read ({type(err).__name__}: {problem})") from None
    if data is not None and not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping, got {type(data).__name__}")
    return data


def find_plots(run_dir: Path, extra: list[Path] | None = None) -> list[Path]:
    """PNGs in the run folder (not under checkpoints/, not a report's own curve), then
    ``extra`` ones (missing ones are an error)."""
    found = sorted(p for p in run_dir.rglob("*.png")
                   if "checkpoints" not in p.relative_to(run_dir).parts
                   and not p.name.endswith(CURVE_SUFFIX))
    for path in extra or []:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{path}: no such plot")
        if Path(path).resolve() not in {p.resolve() for p in found}:
            found.append(Path(path))
    return found


def build_report(run_dir: str | os.PathLike, *, bm25: str | os.PathLike | None = "compute",
                 plots: list[Path] | None = None) -> RunReport:
    """Read the run and add the BM25 reference (``"compute"``, a result file, or None)."""
    report = load_run(run_dir)
    if bm25 == "compute":
        try:
            metrics, note = bm25_on_dev(report.recipe, report.records.get("dev_carve"))
        except (OSError, ValueError) as err:  # data moved or not reachable
            metrics, note = None, f"BM25 not computed ({err}); pass --bm25 RESULT.json"
            logger.warning(note)
        if metrics is not None:
            report.references["BM25"] = metrics
        report.notes.append(note)
    elif bm25 is not None:
        metrics, note = bm25_from_file(bm25, report.recipe, relevance=report.relevance)
        report.references["BM25"] = metrics
        report.notes.append(note)
    report.plots = find_plots(report.run_dir, plots)
    return report


def curve_figure(report: RunReport):
    """The dev curve: every metric per step (the recipe's metric bold), the references of
    that metric as horizontal lines, the best checkpoint circled."""
    references = {f"{label} ({report.metric})": metrics[report.metric]
                  for label, metrics in report.references.items()}
    return dev_curve(report.history, report.metric, references=references,
                     best_step=report.best_step,
                     title=f"{report.name}: dev metrics per checkpoint")


def _cell(value) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "-"


def _others_heading(rows: dict[str, dict[str, float]]) -> str:
    """The heading of the guard-set / averaged-weights rows, naming only what is there."""
    averaged = "averaged weights (`averaged`: the exported mean of the last checkpoints, " \
               "`training.average_last`)"
    guarded = any("guard" in name for name in rows)
    if guarded and any(name.startswith("averaged") for name in rows):
        return f"Guard set (`eval.guard_data`) and {averaged}:"
    return "Guard set (`eval.guard_data`):" if guarded else f"A{averaged[1:]}:"


def _link(path: Path, base: Path) -> str:
    return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()


def _training_setting(training: dict, key: str):
    """A ``training`` key of the run's recipe.yaml, else the schema's default (a recipe
    that leaves a key out trains with the default)."""
    return training[key] if key in training else TrainingSettings.model_fields[key].default


def training_length(training: dict) -> str:
    """How long the run was set to train: ``4 steps (training.max_steps)`` when
    ``max_steps`` is set (it overrides the epochs), else ``5.0 epochs``."""
    steps = _training_setting(training, "max_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        return f"{steps} step{'s' if steps != 1 else ''} (training.max_steps)"
    return f"{_training_setting(training, 'epochs')} epochs"


def render_markdown(report: RunReport, output_dir: Path, curve: Path | None = None) -> str:
    """The report as Markdown; links are relative to ``output_dir``."""
    recipe = report.recipe
    model, data = recipe.get("model") or {}, recipe.get("data") or {}
    loss, training = recipe.get("loss") or {}, recipe.get("training") or {}
    lines = [f"# TAPT run `{report.name}`", "",
             f"- status: {report.status}",
             (f"- model: `{model.get('name', '?')}`; loss `{loss.get('name', '?')}`; "
              f"{training_length(training)}, learning rate "
              f"{_training_setting(training, 'learning_rate')}, batch "
              f"{_training_setting(training, 'per_device_batch_size')} per device"),
             f"- data: `{data.get('path', '?')}`" + (f" ({data['config']})" if data.get("config")
                                                     else "")
             + f"; dev sub-corpus: every judged {data.get('dev_split', 'dev')} passage plus "
             + (f"{data['dev_distractors']:,} distractors (seed {data.get('dev_seed', 0)})"
                if isinstance(data.get("dev_distractors"), int) else "every other passage"),
             f"- best checkpoint chosen on dev `{report.metric}`", ""]
    lines += carve_lines(report.records.get("dev_carve"))
    lines += decontamination_lines(report.records.get("decontaminated")) + ["## Dev curve", ""]
    if curve is not None:
        lines += [f"![dev curve]({_link(curve, output_dir)})", ""]
    lines += dev_table(report.history, report.metric, best_step=report.best_step, epochs=True)
    if guard_key(report.history, report.metric):
        folder = Path(str((recipe.get("eval") or {}).get("guard_data", "?"))).name
        lines += ["", (f"guard {report.metric}: the guard set (`eval.guard_data` `{folder}`), "
                       "evaluated at every checkpoint; it does not choose the best one.")]
    lines.append("")
    if report.references:
        lines += ["Reference lines on the same dev sub-corpus:", ""]
        lines += metrics_table(report.references) + [""]
    lines += [f"- {note}" for note in report.notes] + ([""] if report.notes else [])
    best = next((e for e in report.history if e["step"] == report.best_step), None)
    lines += ["## Best checkpoint", ""]
    if best is None:
        lines += ["No dev evaluation of a checkpoint was recorded.", ""]
    else:
        zero = report.references.get("zero-shot", {}).get(report.metric)
        change = (f" ({best[report.metric] - zero:+.4f} over zero-shot)" if zero is not None
                  else "")
        lines += [(f"Step {report.best_step}: dev {report.metric} "
                   f"**{best[report.metric]:.4f}**{change}."), ""]
    lines += gate_lines(report.gate)
    others = {name: m for name, m in report.summary.items()
              if "guard" in name or name.startswith("averaged")}
    if others:  # eval.guard_data, training.average_last (the averaged weights are exported)
        lines += [_others_heading(others), ""] + metrics_table(others) + [""]
    tests = {name: m for name, m in report.summary.items() if "test" in name}
    lines += ["## Test metrics", ""]
    lines += (metrics_table(tests) if tests else
              ["No test metrics (run `tapt train RECIPE --test`, or `tapt eval` the export)."])
    lines += ["", *overlap_lines(report.records.get("train_overlap"), report.metric)]
    if report.plots:
        lines += ["## Plots", ""]
        for path in report.plots:
            lines += [f"### {path.stem}", "", f"![{path.stem}]({_link(path, output_dir)})", ""]
    return "\n".join(lines)


def history_table(report: RunReport):
    """A rich table of the dev curve, the references and the test metrics."""
    from rich.table import Table

    table = Table(title=f"{report.name}: dev curve (best step {report.best_step})",
                  caption=gate_message(report.gate))
    table.add_column("step / row")
    for key in METRIC_KEYS:
        table.add_column(key, justify="right")
    guard = guard_key(report.history, report.metric)
    if guard:
        table.add_column(f"guard {report.metric}", justify="right")
    for entry in report.history:
        label = f"dev step {entry['step']}" + (" (best)" if entry["step"] == report.best_step
                                               else "")
        table.add_row(label, *(f"{entry[k]:.4f}" for k in METRIC_KEYS),
                      *([_cell(entry.get(guard))] if guard else []))
    for label, metrics in report.references.items():
        table.add_row(f"{label} (dev reference)", *(f"{metrics[k]:.4f}" for k in METRIC_KEYS))
    for label, metrics in report.summary.items():
        if "test" in label:
            table.add_row(label, *(f"{metrics[k]:.4f}" for k in METRIC_KEYS))
    for label, metrics in overlap_rows(report.records.get("train_overlap")).items():
        table.add_row(label, *(_cell(metrics[k]) for k in METRIC_KEYS))
    return table


def report_paths(output: str | os.PathLike) -> tuple[Path, Path, Path]:
    """The files :func:`write_report` writes for ``output``: the Markdown, the dev-curve PNG
    (when the run has a dev history) and the JSON data beside it."""
    output = Path(output)
    return output, output.with_name(output.stem + CURVE_SUFFIX), output.with_suffix(".json")


def write_report(report: RunReport, output: Path) -> tuple[Path, Path | None, Path]:
    """Write the dev-curve PNG, the Markdown and a JSON next to it; returns the paths."""
    output, curve_file, data_file = report_paths(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    curve = None
    if report.history:
        curve = save(curve_figure(report), curve_file)
    output.write_text(render_markdown(report, output.parent, curve), encoding="utf-8")
    data_file.write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return output, curve, data_file
