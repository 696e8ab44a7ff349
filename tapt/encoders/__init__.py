"""Encoders: the :class:`~tapt.encoders.base.Encoder` interface, SentenceTransformer presets, BM25."""
