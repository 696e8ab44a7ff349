"""A run's dev evaluations shown: the dev-curve figure and the Markdown tables of metrics,
one of each for the model card (:mod:`tapt.cards.run_card`) and ``tapt report``
(:mod:`tapt.analysis.report`), kept with the cards, below both.

A history entry is one line of a run's ``metrics.jsonl``: ``step``, the four metrics of
:data:`~tapt.retrieval.metrics.METRIC_KEYS`, optionally ``epoch`` and
``guard_<metric>`` (``eval.guard_data``); an entry with ``error`` is an evaluation refused
as non-finite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tapt.retrieval.metrics import METRIC_KEYS
from tapt.util.figures import new_figure
from tapt.util.finite import finite_number


def guard_key(history: Sequence[Mapping], metric: str) -> str | None:
    """``guard_<metric>`` when the run evaluated a guard set (``eval.guard_data``)."""
    key = f"guard_{metric}"
    return key if any(key in entry for entry in history) else None


def metrics_table(rows: Mapping[str, Mapping[str, float]]) -> list[str]:
    """One Markdown row of the four metrics per name (zero-shot, best dev, test, ...)."""
    lines = ["| | " + " | ".join(METRIC_KEYS) + " |", "|---|" + "---:|" * len(METRIC_KEYS)]
    lines += [f"| {name} | " + " | ".join(f"{m[k]:.4f}" for k in METRIC_KEYS) + " |"
              for name, m in rows.items()]
    return lines


def dev_table(history: Sequence[Mapping], metric: str, *, best_step: int | None = None,
              epochs: bool = False, missing: str = "-") -> list[str]:
    """The dev evaluations as a Markdown table: a row per step, the four metrics and the
    guard set's ``metric`` when there is one; ``best_step``'s row and its ``metric`` in
    bold; ``epochs``: an epoch column; ``missing``: the cell of a value not recorded (or of
    a refused evaluation)."""
    guard = guard_key(history, metric)
    keys = [*METRIC_KEYS, *([guard] if guard else [])]
    header = ["step", *(["epoch"] if epochs else []), *METRIC_KEYS,
              *([f"guard {metric}"] if guard else [])]
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for entry in history:
        best = best_step is not None and entry["step"] == best_step
        cells = [f"**{entry['step']}** (best)" if best else str(entry["step"])]
        cells += [f"{entry.get('epoch', 0):.2f}"] if epochs else []
        for key in keys:
            value = None if entry.get("error") else entry.get(key)
            text = missing if value is None else f"{value:.4f}"
            cells.append(f"**{text}**" if best and key == metric and value is not None
                         else text)
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def dev_curve(history: Sequence[Mapping], metric: str, *, title: str,
              references: Mapping[str, float] | None = None, best_step: int | None = None):
    """Dev metrics per step (``metric`` bold), the guard set's ``metric`` dashed,
    ``references`` (label: value) as horizontal lines, ``best_step`` circled (a line
    labelled ``best``); refused evaluations are left out. Returns the Figure."""
    history = [entry for entry in history if not entry.get("error")]
    steps = [entry["step"] for entry in history]
    figure, ax = new_figure(6.5, 4.0)
    for key in METRIC_KEYS:
        ax.plot(steps, [entry[key] for entry in history], marker="o", label=key,
                linewidth=2.5 if key == metric else 1.0, alpha=1.0 if key == metric else 0.6)
    guard = guard_key(history, metric)
    if guard is not None:
        ax.plot(steps, [float("nan") if e.get(guard) is None else e[guard] for e in history],
                marker="s", linestyle="--", color="black", linewidth=1.5,
                label=f"guard {metric}")
    styles = iter(("--", ":", "-.", (0, (5, 1))))
    for label, value in (references or {}).items():
        if finite_number(value):
            ax.axhline(value, color="gray" if "zero-shot" in label else "black",
                       linestyle=next(styles, "--"), linewidth=1.2, label=label)
    if best_step is not None and best_step in steps:
        value = history[steps.index(best_step)][metric]
        ax.plot([best_step], [value], marker="o", markersize=14, markerfacecolor="none",
                markeredgecolor="red", linestyle="none", label="best")
    ax.set_xlabel("training step (0 = zero-shot)")
    ax.set_ylabel("dev score")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return figure
