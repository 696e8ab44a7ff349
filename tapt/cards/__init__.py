"""Model cards, one writer per kind of folder: a training run's export, TAPT and DAPT
(:mod:`tapt.cards.run_card`), a merge or soup (:mod:`tapt.cards.merge_card`), a combine
(:mod:`tapt.cards.combine_card`), a serving export (``tapt export``,
:mod:`tapt.cards.serving_card`); what they share (:mod:`tapt.cards.common`) and the dev
history shown in the run card and ``tapt report`` (:mod:`tapt.cards.dev_history`). Every
card names its base model through one lookup,
:func:`tapt.encoders.preset_record.base_model_id`."""
