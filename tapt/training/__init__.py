"""Training: TAPT (:mod:`tapt.training.contrastive`, ``train``) and DAPT
(:mod:`tapt.training.dapt`, ``dapt``) with their shared steps (:mod:`tapt.training.run`),
in-loop evaluation, export."""
