"""Queries: the key a query asks for (3-4 items of its anchor) and its paraphrased text.

A key is a role-qualified ingredient (the signature, which the hard negative usually holds in
another role), one item of the query's mode and one or two more ingredients; the text comes
from the templates of ``templates.json`` with role synonyms and chemical abbreviations of
``lexicon.json``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tapt.data.synth.entities import Formulation, KeyIndex
from tapt.data.synth.passage_prose import article
from tapt.data.synth.vocabulary import (
    CHEMICAL_ALIASES,
    MODES,
    QUERY_TEMPLATES,
    ROLE_SYNONYMS,
    Domain,
    Ingredient,
    Mode,
    Part,
    Phrase,
)

_KEY_TRIES = 20
_SWAP_RATE = 0.85
"""Chance that a hard negative holds the query's signature chemical in another role."""
_SYNONYM_RATE = 0.8
_ALIAS_RATE = 0.4


@dataclass(frozen=True)
class Key:
    """What a query asks for: a role-qualified ingredient (the signature), one item of the
    query's mode and more role-qualified ingredients (two with an application, which is the
    least specific item, else one)."""

    mode: Mode
    signature: Ingredient
    focus: Part
    extras: tuple[Ingredient, ...]
    swap: bool

    @property
    def items(self) -> frozenset[str]:
        return frozenset(part.item for part in (self.signature, self.focus, *self.extras))


def choose_key(anchor: Formulation, domain: Domain, rng: random.Random,
               keys: KeyIndex) -> Key | None:
    """A key of ``anchor`` that no earlier anchor holds; ``None`` when none is found."""
    swappable = [i for i in anchor.ingredients if len(domain.chemicals[i.chemical]) > 1]
    for _ in range(_KEY_TRIES):
        swap = bool(swappable) and rng.random() < _SWAP_RATE
        signature = rng.choice(swappable if swap else anchor.ingredients)
        others = [i for i in anchor.ingredients if i != signature]
        mode = rng.choice(MODES)
        if mode == "composition":
            focus, *extras = rng.sample(others, 2)
        elif mode == "application":
            focus, extras = anchor.application, rng.sample(others, 2)
        else:
            focus = rng.choice(anchor.conditions if mode == "process" else anchor.properties)
            extras = [rng.choice(others)]
        key = Key(mode, signature, focus, tuple(extras), swap)
        if keys.is_free(key.items, signature.item):
            return key
    return None


def _role_words(role: str, rng: random.Random) -> str:
    return rng.choice(ROLE_SYNONYMS[role]) if rng.random() < _SYNONYM_RATE else role


def _chemical_words(chemical: str, rng: random.Random) -> str:
    alias = CHEMICAL_ALIASES.get(chemical)
    return alias if alias and rng.random() < _ALIAS_RATE else chemical


def _ingredient_fields(ingredient: Ingredient, suffix: str, rng: random.Random) -> dict[str, str]:
    role = _role_words(ingredient.role, rng)
    return {f"chem{suffix}": _chemical_words(ingredient.chemical, rng), f"role{suffix}": role,
            f"a_role{suffix}": article(role)}


def query_text(key: Key, domain: Domain, rng: random.Random) -> str:
    """A paraphrased question for ``key``: role synonyms, abbreviations, reordered clauses."""
    noun = rng.choice(domain.query_nouns)
    fields = {"noun": noun, "a_noun": article(noun), **_ingredient_fields(key.signature, "", rng)}
    ingredients = [p for p in (key.focus, *key.extras) if isinstance(p, Ingredient)]
    for number, ingredient in enumerate(ingredients, start=2):
        fields |= _ingredient_fields(ingredient, str(number), rng)
    if isinstance(key.focus, Phrase):
        fields["focus"] = rng.choice(key.focus.paraphrases)
    return rng.choice(QUERY_TEMPLATES[key.mode]).format(**fields)
