"""Entity sets: formulations, their Jaccard overlap and the edits that derive one from another.

A passage is an entity set: role-qualified ingredients (``binder:polyvinyl acetate``), 1-2
process conditions, 1-2 properties and one application, drawn from one macro-domain's
vocabulary. :func:`derive` makes a formulation whose Jaccard with a source lies in a band
(hard and soft negatives, siblings, near-miss distractors); :class:`KeyIndex` keeps every
query key held by its own anchor alone.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from tapt.data.synth.vocabulary import AMOUNTS, Domain, Ingredient, Part, Phrase

MAX_TRIES = 200


@dataclass(frozen=True)
class Formulation:
    """A passage's entity set, with the amounts and wording needed to render it."""

    domain: str
    ingredients: tuple[Ingredient, ...]
    conditions: tuple[Phrase, ...]
    properties: tuple[Phrase, ...]
    application: Phrase

    def parts(self) -> tuple[Part, ...]:
        return (*self.ingredients, *self.conditions, *self.properties, self.application)

    @cached_property
    def entities(self) -> frozenset[str]:
        """Role-qualified ingredients, ``process:``, ``property:`` and ``application:`` items."""
        return frozenset(part.item for part in self.parts())

    def roles(self) -> dict[str, str]:
        """chemical -> role."""
        return {ingredient.chemical: ingredient.role for ingredient in self.ingredients}


def jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    """Jaccard similarity of two entity sets (0 for two empty sets)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def role_swaps(a: Formulation, b: Formulation) -> list[str]:
    """Chemicals that ``a`` and ``b`` both hold, in different roles (sorted)."""
    roles_b = b.roles()
    return sorted(c for c, role in a.roles().items() if c in roles_b and roles_b[c] != role)


class KeyIndex:
    """The keys of the queries made so far and their anchors: every key must stay held
    (all of its items) by its own anchor alone, so that every query has one answer.

    A key is filed under its two first items in sorted order, so a passage is checked
    through the pairs of its own items."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], list[frozenset[str]]] = {}
        self._anchors: dict[str, list[frozenset[str]]] = {}

    def holds_a_key(self, entities: frozenset[str]) -> bool:
        return any(key <= entities for pair in itertools.combinations(sorted(entities), 2)
                   for key in self._keys.get(pair, ()))

    def is_free(self, key: frozenset[str], signature: str) -> bool:
        """No anchor so far holds the whole ``key``."""
        return not any(key <= anchor for anchor in self._anchors.get(signature, ()))

    def add(self, anchor: frozenset[str], key: frozenset[str]) -> None:
        for item in anchor:
            self._anchors.setdefault(item, []).append(anchor)
        first, second, *_ = sorted(key)
        self._keys.setdefault((first, second), []).append(key)


@dataclass(frozen=True)
class _Shape:
    ingredients: int
    conditions: int
    properties: int

    @property
    def size(self) -> int:
        return self.ingredients + self.conditions + self.properties + 1


def _random_shape(rng: random.Random) -> _Shape:
    return _Shape(rng.randint(4, 6), rng.randint(1, 2), rng.randint(1, 2))


def _rounded(value: float) -> float:
    return round(value, 1) if value >= 1 else round(value, 2)


def _amount(role: str, rng: random.Random) -> float:
    low, high = AMOUNTS.get(role, (0.1, 5.0))
    return _rounded(rng.uniform(low, high))


def _within_total(ingredients: list[Ingredient]) -> tuple[Ingredient, ...]:
    """Scale the amounts down when they add up to more than 95 wt%."""
    total = sum(i.amount for i in ingredients)
    if total <= 95:
        return tuple(ingredients)
    return tuple(Ingredient(i.chemical, i.role, _rounded(i.amount * 95 / total))
                 for i in ingredients)


def _sample_families(pool: Sequence[Phrase], count: int, rng: random.Random) -> tuple[Phrase, ...]:
    """``count`` phrases of ``pool``, each from a different family."""
    families = list(dict.fromkeys(p.family for p in pool))
    return tuple(rng.choice([p for p in pool if p.family == family])
                 for family in rng.sample(families, count))


def new_formulation(domain: Domain, rng: random.Random, keys: KeyIndex) -> Formulation:
    """A random formulation of ``domain`` that holds no query key."""
    for _ in range(MAX_TRIES):
        shape = _random_shape(rng)
        ingredients = []
        for chemical in rng.sample(list(domain.chemicals), shape.ingredients):
            role = rng.choice(domain.chemicals[chemical])
            ingredients.append(Ingredient(chemical, role, _amount(role, rng)))
        formulation = Formulation(domain.name, _within_total(ingredients),
                                  _sample_families(domain.conditions, shape.conditions, rng),
                                  _sample_families(domain.properties, shape.properties, rng),
                                  rng.choice(domain.applications))
        if not keys.holds_a_key(formulation.entities):
            return formulation
    raise RuntimeError(f"no {domain.name} formulation free of query keys after {MAX_TRIES} tries")


@dataclass(frozen=True)
class Edit:
    """How to derive a formulation from a source one (see :func:`derive`)."""

    band: tuple[float, float]
    protected: frozenset[str] = frozenset()
    """Source items neither kept nor added."""
    swap: Ingredient | None = None
    """A source ingredient whose chemical comes back in another role."""
    reuse: float = 0.0
    """Chance that a fresh ingredient re-uses a source chemical in another role."""
    prefer: frozenset[str] = frozenset()
    """Items kept before the others when the shape has room for them."""
    keep_application: bool = False

    def relaxed(self) -> Edit:
        """The edit without its preferences and role swap, for the rare source where they
        only lead to passages that hold another query's key."""
        return replace(self, prefer=frozenset(), swap=None)


def derive(source: Formulation, domain: Domain, rng: random.Random, edit: Edit,
           keys: KeyIndex) -> Formulation:
    """A formulation whose entity-set Jaccard with ``source`` lies in ``edit.band`` and that
    holds no query key.

    It keeps ``k`` source items and replaces the rest with items the source lacks, so
    Jaccard is ``k / (n + m - k)``: ``k`` is drawn among the values that land in the band
    for a random target size ``m``, and the result is checked before it is returned.
    """
    items = source.entities
    n = len(items)
    low, high = edit.band
    for attempt in range(MAX_TRIES):
        shape = _random_shape(rng)
        m = shape.size
        ks = [k for k in range(min(n, m) + 1) if low <= k / (n + m - k) <= high]
        if not ks:
            continue
        current = edit if attempt < MAX_TRIES // 2 else edit.relaxed()
        derived = _assemble(source, domain, rng, current, shape, rng.choice(ks))
        if (derived is not None and low <= jaccard(items, derived.entities) <= high
                and not keys.holds_a_key(derived.entities)):
            return derived
    raise RuntimeError(f"no {domain.name} formulation with entity Jaccard in {edit.band} "
                       f"free of query keys after {MAX_TRIES} tries")


def _category(part: Part) -> str:
    return "ingredient" if isinstance(part, Ingredient) else part.kind


def _assemble(source: Formulation, domain: Domain, rng: random.Random, edit: Edit,
              shape: _Shape, k: int) -> Formulation | None:
    """Keep ``k`` source items within ``shape``, then fill it with fresh items."""
    swap_slot = 1 if edit.swap else 0
    capacity = {"ingredient": shape.ingredients - swap_slot, "process": shape.conditions,
                "property": shape.properties, "application": 1}
    candidates = [part for part in source.parts() if part.item not in edit.protected]
    rng.shuffle(candidates)
    first = edit.prefer | ({source.application.item} if edit.keep_application else set())
    candidates.sort(key=lambda part: part.item not in first)
    kept: list[Part] = []
    for part in candidates:
        if len(kept) == k:
            break
        if capacity[_category(part)] > 0:
            capacity[_category(part)] -= 1
            kept.append(part)
    if len(kept) < k:
        return None
    banned = source.entities | edit.protected
    ingredients = [Ingredient(p.chemical, p.role, _amount(p.role, rng))
                   for p in kept if isinstance(p, Ingredient)]
    if edit.swap:
        roles = [r for r in domain.chemicals[edit.swap.chemical]
                 if r != edit.swap.role and f"{r}:{edit.swap.chemical}" not in banned]
        if not roles:
            return None
        role = rng.choice(roles)
        ingredients.append(Ingredient(edit.swap.chemical, role, _amount(role, rng)))
    while len(ingredients) < shape.ingredients:
        fresh = _fresh_ingredient(source, domain, rng, banned, {i.chemical for i in ingredients},
                                  edit.reuse)
        if fresh is None:
            return None
        ingredients.append(fresh)
    rng.shuffle(ingredients)
    conditions = _fill([p for p in kept if _category(p) == "process"], domain.conditions,
                       shape.conditions, banned, rng)
    properties = _fill([p for p in kept if _category(p) == "property"], domain.properties,
                       shape.properties, banned, rng)
    application = _fill([p for p in kept if _category(p) == "application"], domain.applications,
                        1, banned, rng)
    if conditions is None or properties is None or application is None:
        return None
    return Formulation(domain.name, _within_total(ingredients), conditions, properties,
                       application[0])


def _fresh_ingredient(source: Formulation, domain: Domain, rng: random.Random,
                      banned: frozenset[str], used: set[str], reuse: float) -> Ingredient | None:
    """An ingredient outside ``banned`` whose chemical is not in ``used``; with chance
    ``reuse`` one of the source's chemicals in another role."""
    if rng.random() < reuse:
        options = [(i.chemical, r) for i in source.ingredients if i.chemical not in used
                   for r in domain.chemicals[i.chemical] if f"{r}:{i.chemical}" not in banned]
        if options:
            chemical, role = rng.choice(options)
            return Ingredient(chemical, role, _amount(role, rng))
    for _ in range(50):
        chemical, role = rng.choice(domain.pairs)
        if chemical not in used and f"{role}:{chemical}" not in banned:
            return Ingredient(chemical, role, _amount(role, rng))
    return None


def _fill(kept: list[Part], pool: Sequence[Phrase], count: int, banned: frozenset[str],
          rng: random.Random) -> tuple[Phrase, ...] | None:
    """``kept`` phrases plus fresh ones from ``pool`` (outside ``banned``, one per family)
    up to ``count``."""
    chosen = [p for p in kept if isinstance(p, Phrase)]
    for _ in range(50):
        if len(chosen) == count:
            return tuple(chosen)
        phrase = rng.choice(pool)
        if phrase.item not in banned and phrase.family not in {p.family for p in chosen}:
            chosen.append(phrase)
    return tuple(chosen) if len(chosen) == count else None
