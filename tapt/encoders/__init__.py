"""Encoders: the :class:`~tapt.encoders.base.Encoder` interface, SentenceTransformer presets,
BM25, and the encoder that runs a ``tapt export`` folder (:mod:`tapt.encoders.exported`)."""
