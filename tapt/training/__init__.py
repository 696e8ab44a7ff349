"""Training: TAPT with sentence-transformers' trainer, in-loop evaluation, export."""
