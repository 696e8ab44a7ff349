"""The generator's vocabulary: the JSON tables under ``tapt/data/synth/tables/`` as typed objects.

``domains.json`` holds the seven macro-domains (chemicals and the roles each can play,
process conditions, properties, applications, titles, nouns) and the anchor shares,
``lexicon.json`` the role synonyms, chemical aliases and wt% ranges, ``templates.json`` the
query and passage sentences. They are read once, at import, in file order: the tables are
data, but any change to them changes what a seed generates. A malformed table (a missing
field, a duplicate key, a role without synonyms, a placeholder without a slot) raises
:class:`VocabularyError`, which names the file and the field.
"""

from __future__ import annotations

import importlib.resources
import itertools
import json
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

RESOURCES: Traversable = importlib.resources.files("tapt.data.synth") / "tables"
"""Where the tables live (package data)."""

Mode = Literal["composition", "process", "performance", "application"]
MODES: tuple[Mode, ...] = ("composition", "process", "performance", "application")


class VocabularyError(ValueError):
    """A malformed vocabulary table; the message names the file and the field."""

    def __init__(self, path: str, field_name: str, message: str) -> None:
        self.path = path
        self.field = field_name
        super().__init__(f"{path}: field '{field_name}': {message}")


@dataclass(frozen=True)
class Phrase:
    """A process condition, property or application: passage wording and query paraphrases."""

    kind: Literal["process", "property", "application"]
    text: str
    paraphrases: tuple[str, ...]
    family: str
    """The pattern the phrase was made from; a passage holds one phrase per family."""

    @property
    def item(self) -> str:
        return f"{self.kind}:{self.text}"


@dataclass(frozen=True)
class Ingredient:
    """A chemical in a functional role, with its amount in wt%."""

    chemical: str
    role: str
    amount: float

    @property
    def item(self) -> str:
        return f"{self.role}:{self.chemical}"


Part = Ingredient | Phrase


@dataclass(frozen=True, eq=False)
class Domain:
    """One macro-domain's vocabulary."""

    name: str
    nouns: tuple[str, ...]
    query_nouns: tuple[str, ...]
    titles: tuple[str, ...]
    chemicals: dict[str, tuple[str, ...]]
    conditions: tuple[Phrase, ...]
    properties: tuple[Phrase, ...]
    applications: tuple[Phrase, ...]

    @cached_property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every (chemical, role) the domain allows."""
        return tuple((c, r) for c, roles in self.chemicals.items() for r in roles)


@dataclass(frozen=True)
class PassageTemplates:
    """The sentences a passage is assembled from (``templates.json``, ``passages``)."""

    sections: tuple[str, ...]
    ingredient_forms: tuple[str, ...]
    openers: tuple[str, ...]
    more_ingredients: tuple[str, ...]
    one_condition: tuple[str, ...]
    two_conditions: tuple[str, ...]
    one_property: tuple[str, ...]
    two_properties: tuple[str, ...]
    application_sentences: tuple[str, ...]
    boilerplate: tuple[str, ...]


class _Table:
    """One parsed JSON file; :meth:`get` checks a field's JSON type and names it when wrong."""

    def __init__(self, folder: Traversable | Path, name: str) -> None:
        resource = folder / name
        self.path = str(resource)
        try:
            text = resource.read_text(encoding="utf-8")
        except OSError as err:
            raise VocabularyError(self.path, "(file)", f"cannot read the table: {err}") from err
        try:
            self.data = json.loads(text, object_pairs_hook=self._unique)
        except json.JSONDecodeError as err:
            raise VocabularyError(self.path, "(file)", f"not JSON: {err}") from err

    def _unique(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        table: dict[str, Any] = {}
        for key, value in pairs:
            if key in table:
                raise VocabularyError(self.path, key, "duplicate key")
            table[key] = value
        return table

    def get(self, node: Any, key: str | int, where: str, kind: type = list,
            empty: bool = False) -> Any:
        """``node[key]``, which must be a JSON ``kind`` (list, dict or str), non-empty unless
        ``empty``."""
        try:
            value = node[key]
        except (KeyError, IndexError, TypeError):
            value = None
        if not isinstance(value, kind) or kind is not str and not value and not empty:
            what = {list: "non-empty list", dict: "non-empty object", str: "string"}[kind]
            raise VocabularyError(self.path, where, f"expected a {what}, got {value!r:.60}")
        return value

    def strings(self, node: Any, key: str | int, where: str) -> tuple[str, ...]:
        values = self.get(node, key, where)
        for index, value in enumerate(values):
            self.get(values, index, f"{where}[{index}]", str)
        return tuple(values)


def _phrases(table: _Table, kind: Literal["process", "property"], specs: list[Any],
             where: str) -> tuple[Phrase, ...]:
    """Expand ``{pattern, queries, slots}``: one phrase per combination of slot values."""
    out = []
    for number, spec in enumerate(specs):
        at = f"{where}[{number}]"
        pattern = table.get(spec, "pattern", f"{at}.pattern", str)
        queries = table.strings(spec, "queries", f"{at}.queries")
        slot_lists = table.get(spec, "slots", f"{at}.slots", empty=True)
        slots = [table.strings(slot_lists, i, f"{at}.slots[{i}]") for i in range(len(slot_lists))]
        try:
            for args in itertools.product(*slots):
                out.append(Phrase(kind, pattern.format(*args),
                                  tuple(q.format(*args) for q in queries), pattern))
        except (IndexError, KeyError, ValueError) as err:
            raise VocabularyError(table.path, at,
                                  f"placeholders do not match the slots: {err!r}") from err
    return tuple(out)


def _domain(table: _Table, spec: Any, where: str, roles: dict[str, tuple[str, ...]]) -> Domain:
    name = table.get(spec, "name", f"{where}.name", str)
    chemicals = {}
    for chemical in table.get(spec, "chemicals", f"{where}.chemicals", dict):
        chemicals[chemical] = table.strings(spec["chemicals"], chemical,
                                            f"{where}.chemicals.{chemical}")
        for role in chemicals[chemical]:
            if role not in roles:
                raise VocabularyError(table.path, f"{where}.chemicals.{chemical}",
                                      f"role {role!r} has no entry in lexicon.json role_synonyms")
    applications = []
    for number, app in enumerate(table.get(spec, "applications", f"{where}.applications")):
        at = f"{where}.applications[{number}]"
        text = table.get(app, "text", f"{at}.text", str)
        applications.append(Phrase("application", text,
                                   table.strings(app, "paraphrases", f"{at}.paraphrases"), text))
    return Domain(
        name=name,
        nouns=table.strings(spec, "nouns", f"{where}.nouns"),
        query_nouns=table.strings(spec, "query_nouns", f"{where}.query_nouns"),
        titles=table.strings(spec, "titles", f"{where}.titles"),
        chemicals=chemicals,
        conditions=_phrases(table, "process", table.get(spec, "conditions", f"{where}.conditions"),
                            f"{where}.conditions"),
        properties=_phrases(table, "property",
                            table.get(spec, "properties", f"{where}.properties"),
                            f"{where}.properties"),
        applications=tuple(applications),
    )


def load_lexicon(folder: Traversable | Path = RESOURCES) -> tuple[
        dict[str, tuple[str, ...]], dict[str, str], dict[str, tuple[float, float]]]:
    """``lexicon.json``: role synonyms, chemical aliases, wt% ranges."""
    table = _Table(folder, "lexicon.json")
    synonyms = table.get(table.data, "role_synonyms", "role_synonyms", dict)
    roles = {role: table.strings(synonyms, role, f"role_synonyms.{role}") for role in synonyms}
    aliases = table.get(table.data, "chemical_aliases", "chemical_aliases", dict)
    for chemical in aliases:
        table.get(aliases, chemical, f"chemical_aliases.{chemical}", str)
    amounts = {}
    for role, bounds in table.get(table.data, "amounts", "amounts", dict).items():
        if not (isinstance(bounds, list) and len(bounds) == 2
                and all(isinstance(b, int | float) for b in bounds) and bounds[0] <= bounds[1]):
            raise VocabularyError(table.path, f"amounts.{role}",
                                  f"expected [low, high] wt%, got {bounds!r:.60}")
        amounts[role] = (bounds[0], bounds[1])
    return roles, dict(aliases), amounts


def load_domains(roles: dict[str, tuple[str, ...]], folder: Traversable | Path = RESOURCES,
                 ) -> tuple[dict[str, Domain], dict[str, float]]:
    """``domains.json``: the macro-domains by name and the anchor shares; every role a
    chemical plays must be a key of ``roles``."""
    table = _Table(folder, "domains.json")
    specs = table.get(table.data, "domains", "domains")
    domains: dict[str, Domain] = {}
    for number, spec in enumerate(specs):
        domain = _domain(table, spec, f"domains[{number}]", roles)
        if domain.name in domains:
            raise VocabularyError(table.path, f"domains[{number}].name",
                                  f"domain {domain.name!r} appears twice")
        domains[domain.name] = domain
    shares = table.get(table.data, "anchor_shares", "anchor_shares", dict)
    if set(shares) != set(domains) or not all(isinstance(s, int | float) and s > 0
                                              for s in shares.values()):
        raise VocabularyError(table.path, "anchor_shares",
                              f"expected a positive share for each of {sorted(domains)}")
    return domains, dict(shares)


def load_templates(folder: Traversable | Path = RESOURCES,
                   ) -> tuple[dict[Mode, tuple[str, ...]], PassageTemplates]:
    """``templates.json``: query templates per mode and passage sentences."""
    table = _Table(folder, "templates.json")
    queries = table.get(table.data, "queries", "queries", dict)
    if set(queries) != set(MODES):
        raise VocabularyError(table.path, "queries", f"expected one entry per mode {MODES}")
    passages = table.get(table.data, "passages", "passages", dict)
    names = [f.name for f in fields(PassageTemplates)]
    if set(passages) != set(names):
        raise VocabularyError(table.path, "passages", f"expected exactly the entries {names}")
    return ({mode: table.strings(queries, mode, f"queries.{mode}") for mode in MODES},
            PassageTemplates(**{n: table.strings(passages, n, f"passages.{n}") for n in names}))


ROLE_SYNONYMS, CHEMICAL_ALIASES, AMOUNTS = load_lexicon()
"""Query-side wording of each role (passages use the role's own name); abbreviations a query
may use instead of the passage's full name; wt% range per role (other roles take 0.1-5 wt%)."""
DOMAINS, DOMAIN_WEIGHTS = load_domains(ROLE_SYNONYMS)
"""The macro-domains by name, in file order; illustrative shares of anchor patents per
macro-domain (not taken from the paper), in draw order."""
QUERY_TEMPLATES, PASSAGE_TEMPLATES = load_templates()
