"""The ground floor: small helpers every other layer may use (standard library, numpy and
rich only; no other tapt layer), one topical module each:

- :mod:`~tapt.util.ids`: the rule for corpus, query and judgment ids, and Hub ids;
- :mod:`~tapt.util.files`: atomic writes, staged folders, free-space checks;
- :mod:`~tapt.util.outputs`: no output on, inside or around an input;
- :mod:`~tapt.util.bounds`: the one table of numeric ranges (flags and recipe keys);
- :mod:`~tapt.util.finite`: finiteness of numbers read back and of embeddings;
- :mod:`~tapt.util.redaction`: secrets kept out of logs, names and files;
- :mod:`~tapt.util.retry`: backoff and ``Retry-After`` for HTTP calls;
- :mod:`~tapt.util.provenance`: versions, date and command recorded in result files;
- :mod:`~tapt.util.digests`: content digests of stored files (streamed SHA-256, sidecars);
- :mod:`~tapt.util.mapped_file`: memory maps that drop the pages a stream has read;
- :mod:`~tapt.util.cache_entries`: what ``tapt cache`` lists and prunes, the in-use lock;
- :mod:`~tapt.util.families`: the model-family registry (here, not beside the encoders,
  because the recipe schema, a layer below them, checks ``model.family`` against it).

Nothing is re-exported here: each name has one home, ``from tapt.util.files import ...``.
"""
