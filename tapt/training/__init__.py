"""Training: TAPT (:mod:`tapt.training.contrastive`, ``train``) and DAPT
(:mod:`tapt.training.dapt`, ``dapt``), their phases one module each (the trainer run:
:mod:`tapt.training.trainer`; W&B: :mod:`tapt.training.tracking`; the export:
:mod:`tapt.training.export`), in-loop evaluation."""
