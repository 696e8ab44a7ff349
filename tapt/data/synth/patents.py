"""Patents: anchors with their hard and soft negatives, siblings, distractors and splits.

Passages belong to patents (one macro-domain per patent). An anchor patent holds 1-3
anchors (derived from the first) and 1-2 siblings; each hard or soft negative lives in a
patent of its own, with 0-1 sibling; distractor patents hold 1-4 unjudged passages. Splits
are by anchor patent, so no patent is judged in two splits.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from tapt.data.beir import SPLITS
from tapt.data.synth.entities import MAX_TRIES, Edit, Formulation, KeyIndex, derive, new_formulation
from tapt.data.synth.queries import Key, choose_key
from tapt.data.synth.vocabulary import DOMAIN_WEIGHTS, DOMAINS, Domain

Variant = Literal["random", "structured"]
Kind = Literal["anchor", "hard", "soft", "sibling", "distractor"]

VARIANTS: tuple[Variant, ...] = ("random", "structured")
HARD_BAND = (0.30, 0.50)
SOFT_BAND = (0.05, 0.15)
SIBLING_BAND = (0.20, 0.50)
"""Jaccard of another passage of the same patent with the passage it is derived from."""
NEAR_MISS_BAND = (0.20, 0.40)
"""Jaccard of a structured (C1) distractor with the anchor it is derived from."""

_HARD_REUSE = 0.5
"""Chance that a fresh ingredient of a hard negative re-uses an anchor chemical."""
_PREFER_FOCUS = 0.6
"""Chance that a hard negative keeps each key item other than the signature."""
_DOMAIN_LIST = tuple(DOMAINS.values())


@dataclass(eq=False)
class Chunk:
    """One passage of a patent: its kind and entity set."""

    kind: Kind
    formulation: Formulation


@dataclass(eq=False)
class Patent:
    """A patent: one macro-domain, one title, its passages in the order they were made."""

    domain: Domain
    title: str
    chunks: list[Chunk] = field(default_factory=list)

    def add(self, kind: Kind, formulation: Formulation) -> Chunk:
        chunk = Chunk(kind, formulation)
        self.chunks.append(chunk)
        return chunk


@dataclass(eq=False)
class Triplet:
    """A query's key, its anchor patent and its anchor, hard and soft negative passages."""

    key: Key
    patent: Patent
    anchor: Chunk
    hard: Chunk
    soft: Chunk


def _new_patent(domain: Domain, rng: random.Random, patents: list[Patent]) -> Patent:
    patent = Patent(domain, rng.choice(domain.titles))
    patents.append(patent)
    return patent


def _add_siblings(patent: Patent, source: Formulation, count: int, kind: Kind,
                  rng: random.Random, keys: KeyIndex) -> None:
    """``count`` more passages of ``patent``, derived from ``source``."""
    edit = Edit(SIBLING_BAND, keep_application=True)
    for _ in range(count):
        patent.add(kind, derive(source, patent.domain, rng, edit, keys))


def _first_anchor(domain: Domain, rng: random.Random, keys: KeyIndex) -> tuple[Formulation, Key]:
    for _ in range(MAX_TRIES):
        anchor = new_formulation(domain, rng, keys)
        key = choose_key(anchor, domain, rng, keys)
        if key is not None:
            return anchor, key
    raise RuntimeError(f"no free query key left in {domain.name} after {MAX_TRIES} anchors; "
                       "ask for fewer queries")


def add_anchor_patent(rng: random.Random, keys: KeyIndex, patents: list[Patent],
                      wanted: int) -> tuple[Patent, list[tuple[Chunk, Key]]]:
    """A patent holding up to ``wanted`` anchors (the others derived from the first) and
    their keys, which join ``keys`` before any other passage is made."""
    names = list(DOMAIN_WEIGHTS)
    domain = DOMAINS[rng.choices(names, weights=list(DOMAIN_WEIGHTS.values()))[0]]
    patent = _new_patent(domain, rng, patents)
    first, key = _first_anchor(domain, rng, keys)
    keys.add(first.entities, key.items)
    anchors = [(patent.add("anchor", first), key)]
    for _ in range(wanted - 1):
        anchor = derive(first, domain, rng, Edit(SIBLING_BAND, keep_application=True), keys)
        key = choose_key(anchor, domain, rng, keys)
        if key is not None:
            keys.add(anchor.entities, key.items)
            anchors.append((patent.add("anchor", anchor), key))
    return patent, anchors


def complete_anchor_patent(rng: random.Random, keys: KeyIndex, patents: list[Patent],
                           patent: Patent, anchors: list[tuple[Chunk, Key]]) -> list[Triplet]:
    """1-2 sibling passages for the anchors' patent, and for each anchor a hard and a soft
    negative, each in a patent of its own (with 0-1 sibling)."""
    domain = patent.domain
    _add_siblings(patent, rng.choice(anchors)[0].formulation, rng.randint(1, 2), "sibling", rng,
                  keys)
    triplets = []
    for chunk, key in anchors:
        protected = frozenset((key.signature.item,))
        prefer = frozenset(item for item in sorted(key.items - protected)
                           if rng.random() < _PREFER_FOCUS)
        hard = derive(chunk.formulation, domain, rng,
                      Edit(HARD_BAND, protected, key.signature if key.swap else None,
                            _HARD_REUSE, prefer), keys)
        soft = derive(chunk.formulation, domain, rng, Edit(SOFT_BAND, protected), keys)
        negatives = []
        for kind, formulation in (("hard", hard), ("soft", soft)):
            own = _new_patent(domain, rng, patents)
            negatives.append(own.add(kind, formulation))
            _add_siblings(own, formulation, rng.randint(0, 1), "sibling", rng, keys)
        triplets.append(Triplet(key, patent, chunk, *negatives))
    return triplets


def add_distractors(rng: random.Random, keys: KeyIndex, patents: list[Patent],
                    triplets: list[Triplet], total: int, variant: Variant) -> None:
    """Unjudged patents of 1-4 passages. ``structured`` (C1): near-misses of a random query's
    anchor, so domains follow the query counts; ``random`` (C0): any domain, any entities."""
    made = 0
    while made < total:
        size = min(rng.randint(1, 4), total - made)
        if variant == "structured":
            triplet = rng.choice(triplets)
            domain = triplet.patent.domain
            prefer = frozenset(rng.sample(sorted(triplet.key.items), rng.randint(1, 2)))
            first = derive(triplet.anchor.formulation, domain, rng,
                           Edit(NEAR_MISS_BAND, reuse=_HARD_REUSE, prefer=prefer), keys)
        else:
            domain = rng.choice(_DOMAIN_LIST)
            first = new_formulation(domain, rng, keys)
        patent = _new_patent(domain, rng, patents)
        patent.add("distractor", first)
        _add_siblings(patent, first, size - 1, "distractor", rng, keys)
        made += size


def assign_splits(triplets: list[Triplet], fractions: tuple[float, float, float],
                  rng: random.Random) -> dict[Patent, str]:
    """Split name per anchor patent: whole patents go to the split furthest below its
    target share of queries."""
    sizes = Counter(t.patent for t in triplets)
    order = list(sizes)
    rng.shuffle(order)
    targets = [f * len(triplets) for f in fractions]
    counts = [0, 0, 0]
    split_of: dict[Patent, str] = {}
    for patent in order:
        index = max(range(3), key=lambda s: targets[s] - counts[s])
        counts[index] += sizes[patent]
        split_of[patent] = SPLITS[index]
    if 0 in counts:
        raise ValueError(f"{len(triplets)} queries in {len(order)} patents cannot fill the three "
                         f"splits {fractions}; ask for more queries")
    return split_of
