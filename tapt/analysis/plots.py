"""The analyses' figures, drawn with matplotlib's Agg renderer (headless, no pyplot state).

Every function returns the :class:`matplotlib.figure.Figure` it drew, so callers (and
tests) can read back what was plotted (``ax.get_lines()[i].get_ydata()``,
``collection.get_offsets()``); :func:`tapt.util.figures.save` writes a PNG. A run's dev
curve is drawn by :func:`tapt.training.dev_history.dev_curve` (the model card draws it too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from tapt.util.figures import new_figure
from tapt.util.finite import finite_number

# matplotlib is imported by the functions that draw: importing tapt.analysis must not.

KIND_STYLES: dict[str, dict] = {
    # The paper's efficiency frontier (Figure 7): open markers base models, filled TAPT,
    # diamonds APIs; BM25 and hybrids get their own shapes.
    "bm25": {"marker": "s", "color": "black", "filled": True},
    "base": {"marker": "o", "color": "tab:blue", "filled": False},
    "dapt": {"marker": "v", "color": "tab:purple", "filled": False},
    "tapt": {"marker": "o", "color": "tab:green", "filled": True},
    "hybrid": {"marker": "^", "color": "tab:orange", "filled": True},
    "api": {"marker": "D", "color": "tab:red", "filled": True},
}
TIER_COLORS = {"anchor": "tab:green", "hard_negative": "tab:orange",
               "soft_negative": "tab:blue", "random": "tab:gray"}


def pareto_front(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Names of the points no other point beats on both latency (lower) and score (higher),
    in order of latency."""
    front, best = [], -math.inf
    for name, latency, score in sorted(points, key=lambda p: (p[1], -p[2])):
        if score > best:
            front.append(name)
            best = score
    return front


def frontier(points: Sequence[Mapping], corpora: Sequence[str], metric: str,
             latency_label: str = "search latency (ms / query)"):
    """Latency against ``metric``, one panel per corpus (FormBench Figure 7).

    ``points``: mappings with ``name``, ``kind``, ``corpus``, ``latency_ms`` and ``value``.
    Each kind is one scatter collection labelled with the kind; the Pareto front is a
    dashed line labelled ``Pareto front``.
    """
    figure, axes = new_figure(5.5 * len(corpora), 4.2, ncols=len(corpora))
    axes = axes if isinstance(axes, list) else [axes]
    for ax, corpus in zip(axes, corpora):
        here = [p for p in points if p["corpus"] == corpus
                and finite_number(p["latency_ms"]) and finite_number(p["value"])]
        for kind, style in KIND_STYLES.items():
            group = [p for p in here if p["kind"] == kind]
            if not group:
                continue
            ax.scatter([p["latency_ms"] for p in group], [p["value"] for p in group],
                       marker=style["marker"], s=60, label=kind, zorder=3,
                       facecolors=style["color"] if style["filled"] else "none",
                       edgecolors=style["color"], linewidths=1.5)
            for p in group:
                ax.annotate(p["name"], (p["latency_ms"], p["value"]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
        front = pareto_front([(p["name"], p["latency_ms"], p["value"]) for p in here])
        by_name = {p["name"]: p for p in here}
        if len(front) > 1:
            ax.plot([by_name[n]["latency_ms"] for n in front], [by_name[n]["value"] for n in front],
                    linestyle="--", color="gray", linewidth=1, label="Pareto front", zorder=2)
        latencies = [p["latency_ms"] for p in here if p["latency_ms"] > 0]
        if latencies and max(latencies) / min(latencies) > 20:
            ax.set_xscale("log")
        ax.margins(x=0.2, y=0.1)  # room for the names
        ax.set_title(f"{corpus}: {metric} vs latency")
        ax.set_xlabel(latency_label)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        if here:
            ax.legend(fontsize=8)
    return figure


def ablation(series: Mapping[str, Sequence[tuple[int, float]]], metric: str,
             title: str = "Corpus-size ablation"):
    """``metric`` against corpus size (log scale), one line per model, labelled by name."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    figure, ax = new_figure(6.5, 4.2)
    for name, points in series.items():
        ax.plot([size for size, _ in points], [value for _, value in points], marker="o",
                label=name)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    sizes = sorted({size for points in series.values() for size, _ in points})
    if sizes:
        ax.set_xticks(sizes)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    ax.set_xlabel("corpus size (passages, log scale)")
    ax.set_ylabel(metric)
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return figure


def similarity_histogram(tiers: Mapping[str, np.ndarray], means: Mapping[str, float],
                         title: str, bins: int = 40):
    """Densities of cos(query, passage) per tier (one bar container per tier, labelled
    ``<tier> (n=...)``), with each tier's mean as a dashed line labelled ``mean <tier>``."""
    figure, ax = new_figure(6.5, 4.2)
    values = [v for v in tiers.values() if len(v)]
    if values:
        low = min(float(v.min()) for v in values)
        high = max(float(v.max()) for v in values)
        edges = np.linspace(low, high if high > low else low + 1e-3, bins + 1)
        for tier, sims in tiers.items():
            if not len(sims):
                continue
            color = TIER_COLORS.get(tier)
            _, _, bars = ax.hist(sims, bins=edges, density=True, alpha=0.45, color=color)
            bars.set_label(f"{tier} (n={len(sims):,})")  # one legend entry per tier
            ax.axvline(means[tier], color=color, linestyle="--", linewidth=1.5,
                       label=f"mean {tier}")
    ax.set_xlabel("cosine similarity to the query")
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend(fontsize=7)
    return figure


def grouped_bars(values: Mapping[str, Mapping[str, Mapping[str, float]]],
                 metrics: Sequence[str], title: str):
    """One panel per group (a label field); bars per model, one bar group per metric.

    ``values[model][group][metric]``; each model's bars form one container labelled
    with the model's name (``ax.containers``).
    """
    models = list(values)
    groups = list(dict.fromkeys(g for model in models for g in values[model]))
    figure, axes = new_figure(max(4.5, 2.2 * len(metrics)) * max(1, len(groups)) / 1.4, 3.8,
                              ncols=max(1, len(groups)))
    axes = axes if isinstance(axes, list) else [axes]
    width = 0.8 / max(1, len(models))
    for ax, group in zip(axes, groups):
        x = np.arange(len(metrics))
        for index, model in enumerate(models):
            heights = [values[model].get(group, {}).get(m, np.nan) for m in metrics]
            ax.bar(x + (index - (len(models) - 1) / 2) * width, heights, width, label=model)
        ax.set_xticks(x, metrics)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{title}: {group}")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=7)
    return figure


def seed_spread(values: Mapping[str, Sequence[float]], metric: str,
                references: Mapping[str, float] | None = None, *, baseline: str | None = None):
    """One column per arm: a dot per seed and a bar at the mean (``ax.collections[i]``
    holds arm i's dots, ``ax.patches[i]`` its mean bar); dashed horizontal lines at the
    ``references`` (e.g. zero-shot, BM25) and, with ``baseline``, a dotted one at that arm's
    mean, so a reader sees each arm's gain beside its seed-to-seed spread."""
    arms = list(values)
    figure, ax = new_figure(max(6.0, 0.9 * len(arms) + 2.5), 4.0)
    x = np.arange(len(arms))
    means = [float(np.mean(values[arm])) for arm in arms]
    ax.bar(x, means, 0.6, color="tab:green", alpha=0.25)
    for index, arm in enumerate(arms):
        seeds = np.asarray(values[arm], dtype=float)
        ax.scatter(np.full(seeds.shape, index, dtype=float), seeds, color="tab:green",
                   zorder=3, s=22)
    lines = dict(references or {})
    if baseline is not None and baseline in values:
        lines[f"{baseline} (mean)"] = float(np.mean(values[baseline]))
    colors = ("tab:orange", "tab:purple", "tab:gray", "tab:brown", "tab:pink")
    for index, (name, value) in enumerate(lines.items()):
        mean_line = baseline is not None and name == f"{baseline} (mean)"
        ax.axhline(value, linestyle=":" if mean_line else "--",
                   color="tab:red" if mean_line else colors[index % len(colors)],
                   label=f"{name} {value:.4f}")
    everything = [v for arm in arms for v in values[arm]] + list(lines.values())
    low, high = min(everything), max(everything)
    pad = max(0.01, 0.15 * (high - low))
    ax.set_ylim(low - pad, high + pad)
    ax.set_xticks(x, arms, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(metric)
    ax.set_title(f"test {metric}: a dot per seed, the bar at the mean", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    if lines:
        ax.legend(fontsize=7, loc="lower right")
    return figure


LEGEND_LIMIT = 20
"""Label maps show a legend up to this many labels (more would hide the points)."""


def label_maps(panels: Mapping[str, np.ndarray], labels: Sequence[str], title: str):
    """One scatter panel per entry of ``panels`` ({name: n x 2 coordinates}, side by side),
    each point coloured by its label in ``labels`` (the same colour for a label in every
    panel); each label is one collection labelled with it (``ax.collections``)."""
    names = sorted(set(labels))
    palette = "tab10" if len(names) <= 10 else "tab20"
    from matplotlib import colormaps

    colours = colormaps[palette]
    figure, axes = new_figure(5.0 * len(panels), 4.6, ncols=len(panels))
    axes = axes if isinstance(axes, list) else [axes]
    values = np.asarray(labels)
    for ax, (name, coords) in zip(axes, panels.items()):
        for index, label in enumerate(names):
            points = coords[values == label]
            ax.scatter(points[:, 0], points[:, 1], s=12, alpha=0.8, label=label,
                       color=colours(index % colours.N))
        ax.set_title(f"{name}")
        ax.set_xticks([])
        ax.set_yticks([])
    if len(names) <= LEGEND_LIMIT:
        axes[-1].legend(fontsize=7, markerscale=1.5, loc="best")
    else:
        axes[-1].text(0.01, 0.01, f"{len(names)} labels (no legend)", fontsize=7,
                      transform=axes[-1].transAxes)
    figure.suptitle(title)
    return figure
