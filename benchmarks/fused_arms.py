"""Every arm of ``compare_recipes.py`` fused with BM25, beside the untrained hybrid.

A user who does not fine-tune deploys the base model fused with BM25 (reciprocal rank
fusion, ``tapt eval --hybrid bm25``); a fine-tuned model is worth training only if it
beats that, alone or fused. Each measured model (the zero-shot base model too) is
evaluated once more on the test split with ``--hybrid bm25 --fusion auto --tune-on dev``:
the fusion (RRF or linear) and its k or alpha picked on the recipe's dev set (the same carve, ``--dev-from-train``, as training held out), the
file ``hybrid-test-float32.json`` beside the arm's ``test-float32.json`` (kept in
``--summary`` as well). The table pairs every arm, dense and fused, with the untrained
hybrid on the test queries: per-query values averaged over the seeds, a randomization test
Holm-corrected across the rows (:func:`tapt.analysis.significance.against_baseline`).

A module of the comparison script, not a test: nothing is asserted.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

FUSED_FILE = "hybrid-test-float32.json"
UNTRAINED = "zero-shot + BM25"
"""The baseline of the fused table: the base model fused with BM25, no training."""


def fused_eval_args(recipe) -> list[str]:
    """``tapt eval`` options that fuse with BM25, the fusion (RRF or linear) and its k or
    alpha picked on the recipe's dev set (``--fusion auto``): the carve it trains with when
    it carves one, else the data's own dev split."""
    data = recipe.data
    carve = [] if data.dev_from_train is None else [
        "--dev-from-train", str(data.dev_from_train), "--dev-seed", str(data.dev_seed),
        "--dev-carve", data.dev_carve]
    return ["--hybrid", "bm25", "--fusion", "auto", "--tune-on", data.dev_split, *carve]


def measure_fused(folder: Path, model: Path | str, evaluate: Callable[[Path], None],
                  summary_folder: Path | None) -> Path | None:
    """``folder``'s fused test file: read back from ``summary_folder`` when kept there,
    else written by ``evaluate(output)`` when the model is here (None when it is not: a row
    kept from an earlier session without its model)."""
    output = folder / FUSED_FILE
    kept = None if summary_folder is None else summary_folder / FUSED_FILE
    if not output.is_file() and kept is not None and kept.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kept, output)
    if not output.is_file():
        if not Path(model).exists() and not str(model).startswith("package:"):
            return None
        evaluate(output)
    if kept is not None and not kept.is_file():
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(output, kept)
    return output


def fusion_label(tuning: dict) -> str:
    """``rrf k 10`` / ``linear alpha 0.5`` from a result's ``evaluated.tuning`` (files made
    before tapt recorded the fusion: RRF)."""
    if "picked" not in tuning:
        return ""
    fusion = tuning.get("fusion", "rrf")
    return f"{fusion} {'k' if fusion == 'rrf' else 'alpha'} {tuning['picked']:g}"


def per_query_mean(paths: list[Path], metric: str) -> dict[str, float]:
    """Each test query's ``metric`` averaged over ``paths`` (one result file per seed),
    on the queries every file holds; the files are read checked."""
    from tapt.analysis.result_files import read_result
    from tapt.analysis.significance import per_query_values

    rows = [per_query_values(read_result(path)["per_query"], str(path), metric)
            for path in paths]
    shared = set.intersection(*(set(row) for row in rows))
    return {query: statistics.mean(row[query] for row in rows) for query in sorted(shared)}


def fused_table(dense: dict[str, list[Path]], fused: dict[str, list[Path]],
                untrained: Path | None, metric: str) -> str:
    """Markdown: per arm, dense and fused test ``metric`` (mean ± std over seeds), each
    paired with the untrained hybrid (Δ [95 % CI], Holm p, detectable Δ at 80 % power).
    ``dense`` / ``fused``: {arm: a result file per seed}; ``""`` when nothing is fused."""
    from tapt.analysis.result_files import read_result
    from tapt.analysis.significance import against_baseline

    if untrained is None or not fused:
        return ""
    values = {UNTRAINED: per_query_mean([untrained], metric)}
    sources = {UNTRAINED: str(untrained)}
    for arm, paths in dense.items():
        values[f"{arm}"] = per_query_mean(paths, metric)
        sources[arm] = ", ".join(map(str, paths))
    for arm, paths in fused.items():
        values[f"{arm} + BM25"] = per_query_mean(paths, metric)
        sources[f"{arm} + BM25"] = ", ".join(map(str, paths))
    tests = against_baseline(values, UNTRAINED, sources=sources,
                             corpus="test queries (against the untrained hybrid)")
    base = read_result(untrained)
    picked = fusion_label(base["evaluated"].get("tuning", {}))
    lines = [(f"| system | seeds | test {metric} | Δ vs {UNTRAINED} [95% CI] | p (Holm) | "
              "detectable Δ (80% power) | fusion (tuned on dev) |"),
             "|---|---:|---:|---:|---:|---:|---:|",
             f"| {UNTRAINED} (no training) | | {base[metric]:.4f} | | | | {picked} |"]
    for name, versus in tests.items():
        paths = fused.get(name.removesuffix(" + BM25")) if name.endswith(" + BM25") \
            else dense[name]
        files = [read_result(path) for path in paths]
        figures = [file[metric] for file in files]
        shown = f"{figures[0]:.4f}" if len(figures) == 1 else \
            f"{statistics.mean(figures):.4f} ± {statistics.stdev(figures):.4f}"
        ks = sorted({fusion_label(file["evaluated"].get("tuning", {}))
                     for file in files}) if name.endswith(" + BM25") else [""]
        t = versus.test
        lines.append(f"| {name} | {len(paths)} | {shown} | {t.delta:+.4f} "
                     f"[{t.ci_low:+.4f}, {t.ci_high:+.4f}] | {versus.p_holm:.3f} | "
                     f"{t.detectable:.4f} | {', '.join(ks)} |")
    return "\n".join(lines)
