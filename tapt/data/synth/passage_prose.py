"""Passages: a formulation rendered as patent prose with the sentences of ``templates.json``."""

from __future__ import annotations

import random

from tapt.data.beir import Passage
from tapt.data.synth.entities import Formulation
from tapt.data.synth.vocabulary import PASSAGE_TEMPLATES, Domain, Ingredient


def article(phrase: str) -> str:
    """``phrase`` with its indefinite article (a vowel letter takes "an")."""
    return f"{'an' if phrase[0].lower() in 'aeiou' else 'a'} {phrase}"


def _listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _ingredient_words(ingredient: Ingredient, form: str) -> str:
    return form.format(amount=f"{ingredient.amount:g}", chemical=ingredient.chemical,
                       role=ingredient.role, a_role=article(ingredient.role))


def render(formulation: Formulation, domain: Domain, title: str, rng: random.Random) -> Passage:
    """Patent-style prose that states every item of the formulation's entity set."""
    t = PASSAGE_TEMPLATES
    noun = rng.choice(domain.nouns)
    form = rng.choice(t.ingredient_forms)
    words = [_ingredient_words(i, form) for i in formulation.ingredients]
    split = rng.randint(3, len(words) - 1) if len(words) >= 5 and rng.random() < 0.4 else len(words)
    opener = rng.choice(t.openers).format(noun=noun, a_noun=article(noun).capitalize(),
                                          n=rng.randint(1, 12), items=_listing(words[:split]))
    sentences = [opener]
    if split < len(words):
        more = _listing(words[split:])
        sentences.append(rng.choice(t.more_ingredients).format(noun=noun, items=more))
    texts = [c.text for c in formulation.conditions]
    process = rng.choice(t.one_condition if len(texts) == 1 else t.two_conditions).format(*texts)
    texts = [p.text for p in formulation.properties]
    performance = rng.choice(t.one_property if len(texts) == 1 else t.two_properties).format(
        *texts, noun=noun)
    middle = [process, performance] if rng.random() < 0.7 else [performance, process]
    sentences += middle
    sentences.append(rng.choice(t.application_sentences).format(formulation.application.text,
                                                                noun=noun))
    if rng.random() < 0.5:
        sentences.insert(rng.choice((0, len(sentences))), rng.choice(t.boilerplate))
    section = rng.choice(t.sections).format(n=rng.randint(1, 12))
    return Passage(text=" ".join(sentences), title=f"{title} - {section}")
