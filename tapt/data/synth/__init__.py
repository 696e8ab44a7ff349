"""A bundled FormBench-like dataset generator, so that everything runs with no network.

No library generates FormBench-shaped data: graded (anchor, hard, soft) triplets whose
tiers come from entity-set Jaccard overlap, negatives that re-use the anchor's chemicals
in other functional roles, queries in FormBench's four modes, patent-level splits and
structured (C1) or random (C0) distractors. This package builds such a dataset by hand,
following the paper's construction (FormBench §3, §3.1-3.3, A.1, A.2):

* seven macro-domains, each with its own chemicals (most of which can play several
  functional roles), process conditions, properties and applications;
* a passage is an entity set: role-qualified ingredients (``binder:polyvinyl acetate``),
  1-2 process conditions, 1-2 properties and one application, rendered as patent prose;
* passages belong to patents (doc id ``p00042-c3``), one macro-domain per patent;
* per query: an anchor, a hard negative from another patent with entity Jaccard in
  [0.30, 0.50] and a soft negative from another patent with Jaccard in [0.05, 0.15], made by
  editing the anchor's entity set; hard negatives usually hold an anchor chemical in
  another role, so that retrieval needs role discrimination, not entity matching alone;
* queries come in FormBench's four modes (composition, process conditions, performance
  properties, application context) and ask, in paraphrase (role synonyms, abbreviations,
  question templates), for a *key* of 3-4 anchor items: a role-qualified ingredient (the
  signature, which the hard negative usually holds in another role), one item of the mode
  and one or two more ingredients. No other passage of the corpus holds a whole key, so
  every query has exactly one answer;
* splits are by anchor patent; negatives live in patents of their own, so no patent is
  judged in two splits;
* every passage carries class labels, ``"labels": {"domain": ..., "class": ...}`` in
  ``corpus.jsonl`` (the macro-domain and the application, a finer class shared by all
  passages of a patent), a stand-in for FormBench's CPC classes in ``tapt probe``;
* every query carries its group labels, ``"labels": {"mode": ..., "domain": ...}`` in
  ``queries.jsonl`` (the mode its key and template were drawn for, and the anchor's
  macro-domain), for ``tapt eval --by mode``.

Everything is built in memory from one ``random.Random(seed)`` before anything is written:
the same seed gives byte-identical files.

The vocabulary and sentence templates are data, in ``tapt/data/synth/tables/*.json`` (read by
:mod:`~tapt.data.synth.vocabulary`); the logic lives in :mod:`~tapt.data.synth.entities`
(entity sets and Jaccard edits), :mod:`~tapt.data.synth.queries` (keys and query text),
:mod:`~tapt.data.synth.passage_prose` (prose), :mod:`~tapt.data.synth.patents` (triplets,
distractors, splits) and :mod:`~tapt.data.synth.dataset` (:func:`build`, :func:`synthesize`).
"""

from tapt.data.synth.dataset import (
    SynthDataset,
    SynthDoc,
    SynthQuery,
    SynthSummary,
    build,
    synthesize,
    write_dataset,
)
from tapt.data.synth.entities import Formulation, jaccard, role_swaps
from tapt.data.synth.patents import (
    HARD_BAND,
    NEAR_MISS_BAND,
    SIBLING_BAND,
    SOFT_BAND,
    VARIANTS,
    Kind,
    Variant,
)
from tapt.data.synth.vocabulary import (
    CHEMICAL_ALIASES,
    DOMAINS,
    MODES,
    ROLE_SYNONYMS,
    Domain,
    Ingredient,
    Mode,
    Part,
    Phrase,
    VocabularyError,
)

__all__ = [
    "CHEMICAL_ALIASES", "DOMAINS", "HARD_BAND", "MODES", "NEAR_MISS_BAND", "ROLE_SYNONYMS",
    "SIBLING_BAND", "SOFT_BAND", "VARIANTS", "Domain", "Formulation", "Ingredient", "Kind", "Mode",
    "Part", "Phrase", "SynthDataset", "SynthDoc", "SynthQuery", "SynthSummary", "Variant",
    "VocabularyError", "build", "jaccard", "role_swaps", "synthesize", "write_dataset",
]
