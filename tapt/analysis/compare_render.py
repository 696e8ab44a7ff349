"""A :class:`~tapt.analysis.compare.Comparison` shown: the rich table ``tapt compare``
prints, the same table in Markdown (``--markdown``, READMEs, ``tapt sweep``'s report) and the
latency-versus-metric frontier figure (``--plot``). Nothing here reads a file or computes a
statistic: :mod:`tapt.analysis.compare` does."""

from __future__ import annotations

from tapt.analysis import plots
from tapt.analysis.compare import PRIMARY, Cell, Comparison, SystemRow
from tapt.analysis.novel_queries import novel_cells, novel_header
from tapt.analysis.significance import CONFIDENCE, POWER
from tapt.util.finite import finite_number

# rich (the table printer) is imported where a table is made.

SHORT = {"binary_ndcg@10": "bin nDCG@10", "graded_ndcg@10": "grd nDCG@10",
         "mrr@10": "MRR@10", "recall@100": "R@100"}


def comparison_table(comparison: Comparison, metric: str = PRIMARY,
                     title: str = "Systems x corpora"):
    """A rich table: system, kind, each corpus's metrics, C1/C0 retention of ``metric``,
    the tests against the baseline (if any) and the latency on C1 (or the first corpus);
    :meth:`Comparison.notes` as its caption."""
    from rich.table import Table

    table = Table(title=title,
                  caption="\n".join(comparison.warnings + comparison.notes()) or None)
    table.add_column("system")
    table.add_column("kind")
    for corpus in comparison.corpora:
        for key in comparison.metrics:
            table.add_column(f"{corpus} {SHORT.get(key, key)}", justify="right")
    with_retention = any(row.retention for row in comparison.rows)
    if with_retention:
        table.add_column(f"C1/C0 {SHORT.get(metric, metric)}", justify="right")
    for header in _test_header(comparison):
        table.add_column(header, justify="right")
    latency_corpus = "C1" if "C1" in comparison.corpora else comparison.corpora[0]
    table.add_column(f"{latency_corpus} ms/query ({comparison.latency})", justify="right")
    for row in comparison.rows:
        cells = _metric_cells(row, comparison, metric, with_retention)
        cell = row.cells.get(latency_corpus)
        cells.append(f"{cell.latency_ms:.3f}" if cell and finite_number(cell.latency_ms) else "-")
        table.add_row(*cells)
    return table


def _metric_cells(row: SystemRow, comparison: Comparison, metric: str,
                  with_retention: bool) -> list[str]:
    """Name, kind, each corpus's metrics (``mean ± std`` over seeds), the C1/C0 retention
    (if asked) and the tests against the baseline (if any), as text."""
    cells = [row.name, row.kind]
    for corpus in comparison.corpora:
        cell = row.cells.get(corpus)
        cells += [_value(cell, k) if cell else "-" for k in comparison.metrics]
    if with_retention:
        value = row.retention.get(metric)
        cells.append(f"{value:.1%}" if value is not None and finite_number(value) else "-")
    if comparison.tests is not None:
        for by in comparison.tests.results.values():
            versus = by.get(row.name)
            if versus is None:
                cells += ["-", "-", "-", "-"]
                continue
            t = versus.test
            cells += [f"{t.delta:+.4f}", f"[{t.ci_low:+.4f}, {t.ci_high:+.4f}]",
                      f"{versus.p_holm:.4f}", f"{t.detectable:.4f}"]
        cells += novel_cells(comparison.tests.novel, row.name)
    return cells


def _value(cell: Cell, key: str) -> str:
    mean = f"{cell.metrics[key]:.4f}"
    return f"{mean} ± {cell.std[key]:.4f}" if key in cell.std else mean


def _test_header(comparison: Comparison) -> list[str]:
    """Per tested corpus: the difference from the baseline, its CI, the Holm p and the
    smallest difference the queries could detect (80 % power, alpha 0.05)."""
    tests = comparison.tests
    if tests is None:
        return []
    short = SHORT.get(tests.metric, tests.metric)
    return [header for corpus in tests.results
            for header in (f"{corpus} Δ {short} vs {tests.baseline}",
                           f"{corpus} {CONFIDENCE:.0%} CI", f"{corpus} p (Holm)",
                           f"{corpus} detectable Δ ({POWER:.0%} power)")
            ] + novel_header(tests.novel, short, tests.baseline)


def markdown_table(comparison: Comparison, metric: str = PRIMARY) -> str:
    """The same table in Markdown (for READMEs and reports)."""
    header = ["system", "kind"] + [f"{c} {SHORT.get(k, k)}" for c in comparison.corpora
                                   for k in comparison.metrics]
    with_retention = any(row.retention for row in comparison.rows)
    if with_retention:
        header.append(f"C1/C0 {SHORT.get(metric, metric)}")
    header += _test_header(comparison)
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for row in comparison.rows:
        cells = _metric_cells(row, comparison, metric, with_retention)
        lines.append("| " + " | ".join(cells) + " |")
    notes = comparison.warnings + comparison.notes()
    return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in notes)


def frontier_figure(comparison: Comparison, metric: str = PRIMARY):
    label = {"search": "search latency (ms / query)",
             "query": "query encoding + search latency (ms / query)"}[comparison.latency]
    return plots.frontier(comparison.points(metric), comparison.corpora, metric, label)

