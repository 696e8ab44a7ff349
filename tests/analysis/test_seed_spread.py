"""The comparison's per-seed plot: each arm's seeds as dots, its mean as a bar, and the
reference lines, read back from the figure."""

import numpy as np
import pytest

from tapt.analysis.plots import seed_spread


def test_each_arm_shows_its_seeds_its_mean_and_the_reference_lines():
    values = {"mnrl": [0.67, 0.68, 0.69], "best": [0.77, 0.78], "soup": [0.70]}
    figure = seed_spread(values, "binary_ndcg@10", {"zero-shot": 0.645, "BM25": 0.662},
                         baseline="mnrl")
    ax = figure.axes[0]
    for index, (arm, seeds) in enumerate(values.items()):
        dots = ax.collections[index].get_offsets()
        assert dots[:, 0].tolist() == [index] * len(seeds)
        assert dots[:, 1].tolist() == pytest.approx(seeds)
        assert ax.patches[index].get_height() == pytest.approx(np.mean(seeds))
    assert [t.get_text() for t in ax.get_xticklabels()] == list(values)
    levels = sorted(line.get_ydata()[0] for line in ax.get_lines())
    assert levels == pytest.approx([0.645, 0.662, 0.68])
    low, high = ax.get_ylim()
    assert low < 0.645 and high > 0.78  # nothing drawn falls outside the axes


def test_without_a_baseline_only_the_given_references_are_drawn():
    figure = seed_spread({"a": [0.5], "b": [0.6]}, "mrr@10", {"zero-shot": 0.4})
    assert [line.get_ydata()[0] for line in figure.axes[0].get_lines()] == [0.4]
