"""Analyses on top of tapt's one encode / search / score path (FormBench §5.4-§6).

- :mod:`~tapt.analysis.compare`: systems x corpora x metrics from ``tapt eval`` result
  files, C1/C0 retention and the latency-versus-nDCG@10 frontier (``tapt compare``);
  :mod:`~tapt.analysis.result_files` reads and classifies those files,
  :mod:`~tapt.analysis.compare_render` shows a comparison (tables, the frontier figure).
- :mod:`~tapt.analysis.ablation`: the corpus-size ablation (``tapt ablate corpus-size``).
- :mod:`~tapt.analysis.geometry`: similarity tiers, Delta, anchor rank-1 rate and
  anisotropy (``tapt analyze geometry``).
- :mod:`~tapt.analysis.probes`: classification and clustering probes on frozen
  embeddings (``tapt probe``).
- :mod:`~tapt.analysis.report`: a Markdown report of a training run (``tapt report``);
  :mod:`~tapt.analysis.bm25_reference` its BM25 line, on the run's own dev sub-corpus.
- :mod:`~tapt.analysis.plots`: the figures (matplotlib's Agg renderer, no pyplot state).
- :mod:`~tapt.analysis.embed`: loading a ``--model`` and embedding texts through
  :func:`tapt.retrieval.dense.stream_embeddings` (queries) and
  :func:`tapt.retrieval.dense.passage_stream` (passages).

Nothing here encodes, searches or scores by itself: encoding goes through
``stream_embeddings`` and ``passage_stream``, search through
:class:`~tapt.retrieval.search.ExactIndex` and :func:`~tapt.retrieval.dense.rank`, scoring through :func:`~tapt.retrieval.metrics.score_run`
(or :func:`~tapt.retrieval.evaluate.evaluate`, which uses all three).
"""
