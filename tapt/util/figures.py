"""Figures on matplotlib's Agg renderer (headless, no pyplot state): the one way tapt makes
and saves a figure, for the model card's dev curve (:mod:`tapt.training.dev_history`) and
the analyses' plots (:mod:`tapt.analysis.plots`).

matplotlib is imported by the functions that draw: importing this module does not.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from tapt.util.redaction import redact


def new_figure(width: float = 6.0, height: float = 4.0, ncols: int = 1):
    """A Figure on an Agg canvas and its axes (a list when ``ncols > 1``)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height))
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, ncols, squeeze=True)
    return figure, (list(np.atleast_1d(axes)) if ncols > 1 else axes)


def save(figure, path: str | os.PathLike, dpi: int = 110) -> Path:
    """Write ``figure`` as a PNG (parent folders created), every text on it (titles,
    labels, legends, annotations) redacted first (:func:`tapt.util.redaction.redact`): a
    picture is a file tapt writes, and its titles name models and data."""
    from matplotlib.text import Text

    for text in figure.findobj(Text):
        shown = text.get_text()
        if shown and (masked := redact(shown)) != shown:
            text.set_text(masked)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi, format="png")
    return path
