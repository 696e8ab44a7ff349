"""The results of ``tapt merge`` that its merging and export steps share (one module below
both, so that neither imports the other's); their error, :class:`~tapt.training.weights.MergeError`,
lives with the weight arithmetic in :mod:`tapt.training.weights`."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GridPoint:
    """One evaluated weight of the first model, its dev metrics and (with a guard set,
    ``--guard-data``) its guard metrics."""

    weight: float
    metrics: dict[str, float]
    guard: dict[str, float] | None = None

    @property
    def weights(self) -> list[float]:
        return [self.weight, 1.0 - self.weight]


@dataclass
class DevSelection:
    """The dev grid, the metric it was picked on and the weight kept."""

    points: list[GridPoint]
    metric: str
    picked: float
    info: dict = field(default_factory=dict)
    """What was evaluated: data, split, corpus size, number of queries."""

    def to_dict(self) -> dict:
        return {"metric": self.metric, "picked_weight": self.picked, **self.info,
                "grid": [{"weights": point.weights, **point.metrics,
                          **({"guard": point.guard} if point.guard is not None else {})}
                         for point in self.points]}
