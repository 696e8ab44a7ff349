"""Choosing and combining trained models, above the training run (:mod:`tapt.training`):

- :mod:`~tapt.selection.sweep`: ``tapt sweep``, a grid of recipe overrides trained and
  compared on dev (:mod:`~tapt.selection.sweep_grid`: the grid and trial names,
  :mod:`~tapt.selection.sweep_folder`: whose folder a sweep may use,
  :mod:`~tapt.selection.sweep_report`: its table);
- :mod:`~tapt.selection.merge`: ``tapt merge``, weighted averages of models, the weight
  picked on dev (WiSE-FT; :mod:`~tapt.selection.merge_export` writes the export,
  :mod:`~tapt.selection.merge_types` holds the results both share);
- :mod:`~tapt.selection.soup`: ``tapt soup``, greedy and uniform model soups.

The weight arithmetic they share with ``training.average_last`` lives below, in
:mod:`tapt.training.weights`.
"""
