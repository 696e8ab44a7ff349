"""How ``tapt push`` shows what it uploads (or would, with ``--dry-run``)."""

from __future__ import annotations

from rich.table import Table

from tapt.hub.checks import PushPlan


def human_size(size: int) -> str:
    """``size`` bytes in B, kB, MB or GB (powers of 1000, as the Hub shows them)."""
    if size < 1000:
        return f"{size} B"
    value, unit = size / 1000, "kB"
    for bigger in ("MB", "GB"):
        if value < 1000:
            break
        value, unit = value / 1000, bigger
    return f"{value:,.1f} {unit}"


def files_table(plan: PushPlan, title: str) -> Table:
    table = Table(title=title)
    table.add_column("file")
    table.add_column("size", justify="right")
    table.add_column("bytes", justify="right")
    for entry in plan.files:
        table.add_row(entry.path, human_size(entry.size), f"{entry.size:,}")
    table.add_row(f"{len(plan.files)} files", human_size(plan.total_size),
                  f"{plan.total_size:,}", style="bold")
    return table
