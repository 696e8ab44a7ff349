"""A bundled FormBench-like dataset generator, so that everything runs with no network.

No library generates FormBench-shaped data: graded (anchor, hard, soft) triplets whose
tiers come from entity-set Jaccard overlap, negatives that re-use the anchor's chemicals
in other functional roles, queries in FormBench's four modes, patent-level splits and
structured (C1) or random (C0) distractors. This module builds such a dataset by hand,
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
  passages of a patent), a stand-in for FormBench's CPC classes in ``tapt probe``.

Everything is built in memory from one ``random.Random(seed)`` before anything is written:
the same seed gives byte-identical files.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Literal

from tapt.data.beir import ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE, SPLITS, Passage, Qrels, write_beir

Variant = Literal["random", "structured"]
Mode = Literal["composition", "process", "performance", "application"]
Kind = Literal["anchor", "hard", "soft", "sibling", "distractor"]

MODES: tuple[Mode, ...] = ("composition", "process", "performance", "application")
VARIANTS: tuple[Variant, ...] = ("random", "structured")
HARD_BAND = (0.30, 0.50)
SOFT_BAND = (0.05, 0.15)
SIBLING_BAND = (0.20, 0.50)
"""Jaccard of another passage of the same patent with the passage it is derived from."""
NEAR_MISS_BAND = (0.20, 0.40)
"""Jaccard of a structured (C1) distractor with the anchor it is derived from."""

_MAX_TRIES = 200
_KEY_TRIES = 20
_SWAP_RATE = 0.85
"""Chance that a hard negative holds the query's signature chemical in another role."""
_HARD_REUSE = 0.5
"""Chance that a fresh ingredient of a hard negative re-uses an anchor chemical."""
_PREFER_FOCUS = 0.6
"""Chance that a hard negative keeps each key item other than the signature."""
_SYNONYM_RATE = 0.8
_ALIAS_RATE = 0.4
_QUERIES_PER_PATENT = (1, 1, 1, 2, 2, 3)
_DOMAIN_WEIGHTS = {"pharmaceutics": 0.24, "cosmetics": 0.18, "coatings": 0.16, "adhesives": 0.12,
                   "agrochemicals": 0.12, "food": 0.10, "lubricants": 0.08}
"""Illustrative shares of anchor patents per macro-domain (not taken from the paper)."""


# --------------------------------------------------------------------------- vocabulary

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


def _chemicals(block: str) -> dict[str, tuple[str, ...]]:
    """Parse ``chemical: role, role`` lines."""
    table: dict[str, tuple[str, ...]] = {}
    for line in block.strip().splitlines():
        name, roles = line.split(":")
        table[name.strip()] = tuple(role.strip() for role in roles.split(","))
    return table


def _phrases(kind: Literal["process", "property"],
             *specs: tuple[str, tuple[str, ...], tuple[str, ...]]) -> tuple[Phrase, ...]:
    """Expand ``(pattern, query patterns, slots)``, a slot being the space-separated values of
    one placeholder: one phrase per combination of slot values."""
    out = []
    for pattern, queries, slots in specs:
        for args in itertools.product(*(slot.split() for slot in slots)):
            out.append(Phrase(kind, pattern.format(*args), tuple(q.format(*args) for q in queries),
                              pattern))
    return tuple(out)


def _applications(*specs: tuple[str, tuple[str, ...]]) -> tuple[Phrase, ...]:
    return tuple(Phrase("application", text, paraphrases, text) for text, paraphrases in specs)


ROLE_SYNONYMS: dict[str, tuple[str, ...]] = {
    "active": ("effective ingredient", "effective agent", "principal ingredient"),
    "adhesion promoter": ("coupling agent", "bonding promoter"),
    "adjuvant": ("activity enhancer", "spray additive"),
    "anti-caking agent": ("free-flow agent", "flow conditioner"),
    "antifreeze": ("freeze-point depressant", "freeze protectant"),
    "antioxidant": ("oxidation inhibitor", "radical scavenger"),
    "antiwear additive": ("wear inhibitor", "anti-wear agent"),
    "acidulant": ("acidifier", "acidity regulator"),
    "base oil": ("base stock", "base fluid"),
    "binder": ("film former", "binding agent", "binding resin"),
    "carrier": ("inert support", "support material"),
    "catalyst": ("accelerator", "cure promoter"),
    "chelating agent": ("sequestrant", "metal chelator"),
    "coalescent": ("coalescing aid", "film-forming aid"),
    "colourant": ("colouring agent", "food colour"),
    "conditioning agent": ("conditioner", "detangling agent"),
    "corrosion inhibitor": ("rust inhibitor", "anticorrosion agent"),
    "crosslinker": ("curing agent", "hardener", "crosslinking agent"),
    "defoamer": ("antifoam", "foam control agent"),
    "detergent": ("deposit control additive", "cleanliness additive"),
    "disintegrant": ("superdisintegrant", "break-up agent"),
    "dispersant": ("dispersing agent", "deflocculant"),
    "emollient": ("skin conditioner", "softening oil"),
    "emulsifier": ("emulsifying agent", "emulsion stabiliser"),
    "excipient": ("inactive carrier", "formulation aid"),
    "extreme pressure additive": ("EP agent", "load-carrying additive"),
    "filler": ("extender", "bulking agent"),
    "flavour": ("flavouring", "aroma compound"),
    "friction modifier": ("friction reducer", "anti-friction agent"),
    "glidant": ("flow aid", "powder-flow enhancer"),
    "humectant": ("moisture-retaining agent", "moisturiser"),
    "leavening agent": ("raising agent", "leavener"),
    "lubricant": ("die-wall release agent", "anti-friction excipient"),
    "opacifier": ("opacifying agent", "whitening agent"),
    "pH adjuster": ("buffering agent", "pH regulator"),
    "pigment": ("colourant", "tinting agent"),
    "plasticizer": ("softener", "flexibiliser"),
    "pour point depressant": ("low-temperature flow improver", "PPD"),
    "preservative": ("antimicrobial agent", "biocide"),
    "release modifier": ("rate-controlling polymer", "controlled-release agent"),
    "rheology modifier": ("flow control agent", "thixotropic agent"),
    "safener": ("crop protectant", "phytotoxicity antidote"),
    "seal swell agent": ("seal conditioner", "elastomer swell agent"),
    "solubilizer": ("solubilising agent", "solubility enhancer"),
    "solvent": ("carrier liquid", "diluent", "liquid vehicle"),
    "stabilizer": ("stabilising agent", "stabiliser"),
    "surfactant": ("wetting agent", "surface-active agent", "tenside"),
    "sweetener": ("sweetening agent", "sugar substitute"),
    "tackifier": ("tackifying resin", "tack promoter"),
    "thickener": ("thickening agent", "viscosity builder"),
    "UV absorber": ("light stabiliser", "UV filter"),
    "viscosity modifier": ("viscosity index improver", "VI improver"),
}
"""Query-side wording of each role; passages use the role's own name."""

CHEMICAL_ALIASES: dict[str, str] = {
    "titanium dioxide": "TiO2", "sodium lauryl sulfate": "SLS", "polyvinyl acetate": "PVAc",
    "microcrystalline cellulose": "MCC", "zinc dialkyldithiophosphate": "ZDDP",
    "hydroxypropyl methylcellulose": "HPMC", "polyvinylpyrrolidone": "PVP",
    "polyethylene glycol 400": "PEG 400", "butylated hydroxytoluene": "BHT",
    "polydimethylsiloxane": "PDMS", "polyalphaolefin": "PAO",
    "ethylene-vinyl acetate copolymer": "EVA", "1,2-benzisothiazolin-3-one": "BIT",
    "hydroxyethyl cellulose": "HEC", "molybdenum dithiocarbamate": "MoDTC",
    "methylene diphenyl diisocyanate": "MDI", "N-methyl-2-pyrrolidone": "NMP",
    "medium-chain triglycerides": "MCT oil", "glycerol": "glycerin",
    "sodium laureth sulfate": "SLES", "cocamidopropyl betaine": "CAPB",
    "polytetrafluoroethylene": "PTFE", "hexamethylene diisocyanate trimer": "HDI trimer",
    "bisphenol A diglycidyl ether": "BADGE", "polyvinyl alcohol": "PVOH",
    "disodium EDTA": "EDTA disodium salt", "polyisobutylene succinimide": "PIBSI",
    "styrene-isoprene-styrene block copolymer": "SIS", "sodium carboxymethyl cellulose": "CMC",
    "glycerol monooleate": "GMO", "tricresyl phosphate": "TCP",
}
"""Abbreviations a query may use instead of the passage's full name."""

_DOMAINS = (
    Domain(
        name="coatings",
        nouns=("coating composition", "paint formulation", "coating"),
        query_nouns=("paint", "coating", "lacquer"),
        titles=("Aqueous coating composition with improved durability",
                "Low-VOC paint formulation", "Curable coating composition and coated article",
                "Anticorrosive primer composition"),
        chemicals=_chemicals("""
            titanium dioxide: pigment, opacifier, filler
            calcium carbonate: filler, pigment
            talc: filler, rheology modifier
            barium sulfate: filler, pigment
            red iron oxide: pigment, filler
            carbon black: pigment, UV absorber
            fumed silica: rheology modifier, filler, thickener
            kaolin clay: filler, rheology modifier
            zinc oxide: pigment, UV absorber, preservative
            zinc phosphate: corrosion inhibitor, pigment
            polyvinyl acetate: binder, adhesion promoter
            styrene-acrylic copolymer: binder, dispersant
            alkyd resin: binder, plasticizer
            bisphenol A diglycidyl ether: binder, crosslinker
            aliphatic polyurethane dispersion: binder
            hexamethylene diisocyanate trimer: crosslinker
            melamine-formaldehyde resin: crosslinker, binder
            isophorone diamine: crosslinker, catalyst
            linseed oil: binder, plasticizer
            texanol ester alcohol: coalescent, plasticizer, solvent
            butyl glycol: solvent, coalescent
            propylene glycol: solvent, coalescent, antifreeze
            benzyl alcohol: solvent, plasticizer, coalescent
            xylene: solvent
            dibutyl phthalate: plasticizer, solvent
            hydroxyethyl cellulose: thickener, rheology modifier
            associative polyurethane thickener: thickener, rheology modifier
            sodium polyacrylate: dispersant, thickener
            polydimethylsiloxane: defoamer, surfactant
            mineral oil: defoamer, plasticizer
            alcohol ethoxylate: surfactant, dispersant, emulsifier
            2-amino-2-methyl-1-propanol: pH adjuster, dispersant
            benzotriazole UV absorber: UV absorber
            dibutyltin dilaurate: catalyst
            cobalt octoate: catalyst
            3-glycidoxypropyltrimethoxysilane: adhesion promoter, crosslinker
            1,2-benzisothiazolin-3-one: preservative
        """),
        conditions=_phrases(
            "process",
            ("cured at {0} °C for {1} minutes",
             ("a {1}-minute cure at {0} °C", "curing for {1} min at {0} degrees C",
              "baking at {0} °C for {1} min"),
             ("60 80 100 120 140 150 160 180", "10 15 20 30 45 60")),
            ("dispersed under high shear at {0} rpm for {1} minutes",
             ("high-speed dispersion at {0} rpm for {1} min",
              "a {1}-minute high-shear grind at {0} rpm"),
             ("1,000 1,500 2,000 2,500 3,000 4,000", "10 15 20 25 30")),
            ("ground to a Hegman fineness of {0}",
             ("grinding to Hegman {0}", "a grind gauge reading of {0} Hegman"),
             ("5 5.5 6 6.5 7 7.5",)),
            ("applied at a wet film thickness of {0} µm",
             ("a {0} micron wet film", "application at {0} µm wet"),
             ("50 75 100 120 150 175 200 250 300",)),
            ("adjusted to a Stormer viscosity of {0} KU",
             ("thinning to {0} Krebs units", "a {0} KU application viscosity"),
             ("80 85 90 95 100 105 110 115 120",)),
            ("flash-dried for {0} minutes before baking",
             ("a {0} min flash-off ahead of the bake", "letting solvent flash off for {0} minutes"),
             ("3 5 7 10 15 20",)),
        ),
        properties=_phrases(
            "property",
            ("a gloss retention of {0}% after 1,000 hours of QUV exposure",
             ("retention of {0}% gloss after 1000 h accelerated weathering",
              "{0} percent gloss retained after QUV ageing"),
             ("70 75 80 85 88 90 92 95 98",)),
            ("a pencil hardness of {0}",
             ("{0} pencil hardness", "scratch hardness rated {0}"),
             ("HB F H 2H 3H 4H",)),
            ("a VOC content below {0} g/L",
             ("less than {0} grams per litre of volatile organics",
              "under {0} g/L volatile organic content"),
             ("5 10 30 50 75 100 150 250",)),
            ("a wet scrub resistance exceeding {0} cycles",
             ("survival of more than {0} scrub cycles", "washability above {0} cycles"),
             ("1,000 2,000 5,000 10,000 20,000",)),
            ("a salt spray resistance of {0} hours without blistering",
             ("{0} h neutral salt fog with no blisters",
              "no blistering after {0} hours of salt fog"),
             ("250 500 750 1,000 1,500 2,000",)),
            ("a cross-hatch adhesion rating of {0}",
             ("tape adhesion classified {0}", "crosshatch adhesion of {0}"),
             ("5B 4B 3B 0 1",)),
            ("a contrast ratio of {0} at 100 µm",
             ("hiding power of {0}", "opacity (contrast ratio) {0}"),
             ("0.93 0.95 0.96 0.97 0.98 0.99",)),
        ),
        applications=_applications(
            ("interior architectural wall paints",
             ("painting indoor walls", "interior house paint")),
            ("automotive clearcoats", ("car topcoats", "transparent finishes for vehicles")),
            ("industrial maintenance coatings for steel",
             ("protecting steel structures from rust", "heavy-duty steel protection")),
            ("wood stains and varnishes", ("finishing timber", "furniture wood finishes")),
            ("coil coatings", ("pre-painted metal sheet", "continuously coated steel strip")),
            ("road marking paints", ("traffic line striping", "lane markings on roads")),
            ("marine antifouling coatings",
             ("ship hull protection", "keeping boat hulls free of fouling")),
        ),
    ),
    Domain(
        name="adhesives",
        nouns=("adhesive composition", "adhesive", "adhesive formulation"),
        query_nouns=("adhesive", "glue", "bonding agent"),
        titles=("Hot-melt adhesive composition", "Pressure-sensitive adhesive and article",
                "Two-component structural adhesive", "Water-based adhesive composition"),
        chemicals=_chemicals("""
            polyvinyl acetate: binder, adhesion promoter
            ethylene-vinyl acetate copolymer: binder, tackifier
            styrene-isoprene-styrene block copolymer: binder
            polyisobutylene: tackifier, plasticizer, binder
            hydrogenated rosin ester: tackifier, plasticizer
            terpene phenolic resin: tackifier, adhesion promoter
            C5 hydrocarbon resin: tackifier
            paraffin wax: rheology modifier, filler
            naphthenic process oil: plasticizer, solvent
            dibutyl phthalate: plasticizer, solvent
            dioctyl adipate: plasticizer, solvent
            benzyl alcohol: solvent, plasticizer
            toluene: solvent
            ethyl acetate: solvent
            acetone: solvent
            calcium carbonate: filler, rheology modifier
            fumed silica: rheology modifier, thickener, filler
            talc: filler
            carbon black: pigment, filler
            titanium dioxide: pigment, filler
            bisphenol A diglycidyl ether: binder, crosslinker
            triethylenetetramine: crosslinker, catalyst
            isophorone diamine: crosslinker, catalyst
            methylene diphenyl diisocyanate: crosslinker, binder
            polypropylene glycol: binder, plasticizer
            3-aminopropyltriethoxysilane: adhesion promoter, crosslinker
            3-glycidoxypropyltrimethoxysilane: adhesion promoter, crosslinker
            dibutyltin dilaurate: catalyst
            butylated hydroxytoluene: antioxidant, stabilizer
            polyvinyl alcohol: binder, emulsifier, thickener
            hydroxyethyl cellulose: thickener, stabilizer
            sodium lauryl sulfate: surfactant, emulsifier
            alcohol ethoxylate: surfactant, emulsifier, dispersant
            glycerol: plasticizer, humectant
            dextrin: binder, filler
            casein: binder, emulsifier
            hydroquinone: stabilizer, antioxidant
            1,2-benzisothiazolin-3-one: preservative
        """),
        conditions=_phrases(
            "process",
            ("applied as a hot melt at {0} °C",
             ("hot-melt application at {0} °C", "melt coating at {0} degrees"),
             ("120 130 140 150 160 170 180 190",)),
            ("cured at {0} °C for {1} minutes",
             ("a {1}-minute cure at {0} °C", "curing for {1} min at {0} degrees C"),
             ("60 80 100 120 140 150 160 180", "10 15 20 30 45 60")),
            ("compounded in a sigma-blade mixer at {0} °C for {1} minutes",
             ("kneading at {0} °C for {1} min in a Z-blade mixer",
              "{1} minutes of sigma mixing at {0} °C"),
             ("130 140 150 160 170 180", "20 30 45 60 90")),
            ("coated onto PET film at a dry coat weight of {0} g/m²",
             ("a {0} gsm dry coating on polyester film",
              "{0} g per square metre coat weight on PET"),
             ("10 15 20 25 30 40 50 60",)),
            ("allowed to cure at room temperature for {0} hours",
             ("ambient cure for {0} h", "{0} hours of room-temperature curing"),
             ("4 8 12 24 48 72 168",)),
            ("degassed under vacuum at {0} mbar",
             ("vacuum deaeration at {0} mbar", "removal of air at {0} millibar"),
             ("10 20 50 100 200",)),
        ),
        properties=_phrases(
            "property",
            ("a 180° peel strength of {0} N/25 mm",
             ("peel adhesion around {0} N per 25 mm", "{0} N/25mm peel force"),
             ("6 8 10 12 15 18 20 25 30",)),
            ("a lap shear strength of {0} MPa",
             ("single-lap shear of {0} MPa", "{0} megapascal shear bond strength"),
             ("5 8 10 15 18 22 25 30 35",)),
            ("an open time of {0} minutes",
             ("a working time of {0} min", "{0} minutes of working time before skinning"),
             ("1 2 5 8 10 15 20 30 45",)),
            ("a loop tack of {0} N",
             ("initial tack of {0} N in a loop test", "{0} newton loop tack"),
             ("5 8 10 12 15 20 25",)),
            ("a shear adhesion failure temperature above {0} °C",
             ("SAFT higher than {0} °C", "shear holding up to {0} degrees"),
             ("60 70 80 90 100 110",)),
            ("a Brookfield viscosity of {0} mPa·s at 177 °C",
             ("melt viscosity near {0} cP at 177 °C", "{0} centipoise at application temperature"),
             ("800 1,000 1,500 2,000 3,000 5,000 8,000",)),
        ),
        applications=_applications(
            ("pressure-sensitive labels", ("self-adhesive labels", "peel-and-stick labelling")),
            ("hot-melt packaging adhesives",
             ("case and carton sealing", "closing cardboard boxes")),
            ("structural bonding of automotive panels",
             ("joining car body panels", "vehicle body bonding")),
            ("wood glue for furniture assembly", ("joinery", "assembling wooden furniture")),
            ("medical tapes", ("skin-contact tape", "tapes worn on skin")),
            ("flooring adhesives", ("laying floor coverings", "fixing vinyl and parquet floors")),
            ("laminating adhesives for flexible packaging",
             ("film-to-film lamination", "laminated food pouches")),
        ),
    ),
    Domain(
        name="pharmaceutics",
        nouns=("pharmaceutical composition", "dosage form", "formulation"),
        query_nouns=("dosage form", "drug product", "medicinal formulation"),
        titles=("Oral solid dosage form and method of manufacture",
                "Stable pharmaceutical composition", "Controlled-release formulation",
                "Taste-masked paediatric formulation"),
        chemicals=_chemicals("""
            microcrystalline cellulose: filler, binder, disintegrant
            lactose monohydrate: filler, binder
            dicalcium phosphate: filler, binder, excipient
            pregelatinized starch: binder, disintegrant, filler
            mannitol: filler, sweetener, excipient
            magnesium stearate: lubricant, glidant
            colloidal silicon dioxide: glidant, anti-caking agent, thickener
            talc: glidant, lubricant, filler
            croscarmellose sodium: disintegrant, thickener
            sodium starch glycolate: disintegrant
            polyvinylpyrrolidone: binder, solubilizer, dispersant
            hydroxypropyl methylcellulose: binder, release modifier, thickener
            ethylcellulose: release modifier, binder
            methacrylic acid copolymer: release modifier, binder
            polyethylene glycol 400: solvent, plasticizer, solubilizer
            polysorbate 80: surfactant, solubilizer, emulsifier
            poloxamer 188: surfactant, solubilizer, emulsifier
            sodium lauryl sulfate: surfactant, lubricant, solubilizer
            glycerol: plasticizer, solvent, humectant
            propylene glycol: solvent, humectant, plasticizer
            triethyl citrate: plasticizer
            titanium dioxide: opacifier, pigment
            sucralose: sweetener
            citric acid: pH adjuster, chelating agent
            sodium bicarbonate: pH adjuster, disintegrant
            ascorbic acid: antioxidant, active
            butylated hydroxytoluene: antioxidant
            disodium EDTA: chelating agent, stabilizer
            methylparaben: preservative
            benzalkonium chloride: preservative, surfactant
            ibuprofen: active
            metformin hydrochloride: active
            acetaminophen: active
            atorvastatin calcium: active
            caffeine: active
        """),
        conditions=_phrases(
            "process",
            ("granulated with purified water in a high-shear granulator for {0} minutes",
             ("wet granulation for {0} min in a high-shear mixer",
              "{0} minutes of aqueous high-shear granulation"),
             ("2 3 4 5 6 8 10 12",)),
            ("dried in a fluid-bed dryer at {0} °C to a loss on drying below {1}%",
             ("fluid-bed drying at {0} °C until LOD is under {1}%",
              "drying to less than {1}% moisture at {0} °C"),
             ("40 45 50 55 60 65", "1 1.5 2 2.5 3")),
            ("compressed at a force of {0} kN",
             ("tabletting with {0} kN compression force", "a {0} kilonewton compaction"),
             ("5 8 10 12 15 18 20 25",)),
            ("milled to a D50 of {0} µm",
             ("reducing particle size to a median of {0} microns", "micronisation to d50 {0} µm"),
             ("2 5 10 20 30 50 75 100",)),
            ("film-coated to a weight gain of {0}%",
             ("a {0}% coating weight gain", "film coating adding {0} percent weight"),
             ("2 2.5 3 3.5 4 5 6",)),
            ("blended for {0} minutes at {1} rpm",
             ("mixing {0} min at {1} revolutions per minute", "a {0}-minute blend at {1} rpm"),
             ("5 10 15 20 30", "12 15 20 25 30")),
            ("sterilised by autoclaving at 121 °C for {0} minutes",
             ("steam sterilisation for {0} min", "an autoclave cycle of {0} minutes"),
             ("15 20 30",)),
        ),
        properties=_phrases(
            "property",
            ("dissolution of more than {0}% within {1} minutes",
             ("at least {0}% of drug released in {1} min", "{0} percent dissolved by {1} minutes"),
             ("75 80 85 90", "10 15 20 30 45")),
            ("a tablet hardness of {0} N",
             ("breaking force of about {0} newtons", "crushing strength near {0} N"),
             ("40 50 60 70 80 90 100 120 150",)),
            ("friability below {0}%",
             ("less than {0}% weight loss on tumbling", "a friability under {0} percent"),
             ("0.2 0.3 0.5 0.8 1.0",)),
            ("disintegration within {0} minutes",
             ("break-up in under {0} min", "a disintegration time of at most {0} minutes"),
             ("0.5 1 2 3 5 10 15 30",)),
            ("sustained release over {0} hours",
             ("drug release extended across {0} h", "{0}-hour prolonged release"),
             ("6 8 12 16 20 24",)),
            ("total impurities of no more than {0}% after 6 months at 40 °C/75% RH",
             ("degradants under {0}% in accelerated stability",
              "at most {0}% impurities after six months accelerated storage"),
             ("0.2 0.3 0.5 0.8 1.0 1.5",)),
            ("a {0}-fold increase in oral bioavailability",
             ("bioavailability raised {0} times", "{0}x better oral absorption"),
             ("1.5 2 2.5 3 4 5",)),
        ),
        applications=_applications(
            ("immediate-release oral tablets",
             ("fast-acting tablets", "tablets that release quickly")),
            ("extended-release oral dosage forms",
             ("once-daily controlled-release pills", "slow-release tablets")),
            ("orally disintegrating tablets",
             ("melt-in-mouth tablets", "tablets dissolving on the tongue")),
            ("topical gels", ("gels applied to the skin", "dermal gel products")),
            ("parenteral injectable solutions",
             ("injectable formulations", "solutions for injection")),
            ("paediatric oral suspensions",
             ("liquid medicine for children", "suspensions for kids")),
            ("hard gelatin capsules", ("capsule products", "two-piece capsules")),
        ),
    ),
    Domain(
        name="cosmetics",
        nouns=("cosmetic composition", "personal care formulation", "cosmetic emulsion"),
        query_nouns=("cosmetic", "personal care product", "skin care formulation"),
        titles=("Cosmetic emulsion and method of preparation", "Mild cleansing composition",
                "Sunscreen composition with improved photostability", "Hair care composition"),
        chemicals=_chemicals("""
            cetearyl alcohol: emulsifier, thickener, emollient
            glyceryl stearate: emulsifier, emollient
            glycerol: humectant, solvent
            propylene glycol: humectant, solvent
            butylene glycol: humectant, solvent
            sodium laureth sulfate: surfactant
            sodium lauryl sulfate: surfactant, emulsifier
            cocamidopropyl betaine: surfactant, thickener
            xanthan gum: thickener, stabilizer
            carbomer: thickener, rheology modifier, stabilizer
            dimethicone: emollient, defoamer, conditioning agent
            cyclopentasiloxane: solvent, emollient
            isopropyl myristate: emollient, solvent
            caprylic/capric triglyceride: emollient, solvent
            shea butter: emollient, thickener
            titanium dioxide: UV absorber, pigment, opacifier
            zinc oxide: UV absorber, pigment
            avobenzone: UV absorber
            octocrylene: UV absorber, solvent, emollient
            niacinamide: active
            sodium hyaluronate: humectant, active
            tocopheryl acetate: antioxidant, active
            phenoxyethanol: preservative, solvent
            ethylhexylglycerin: preservative, humectant
            disodium EDTA: chelating agent, stabilizer
            citric acid: pH adjuster, chelating agent
            triethanolamine: pH adjuster, emulsifier
            polysorbate 20: emulsifier, solubilizer, surfactant
            mica: pigment, filler
            iron oxides: pigment
            kaolin clay: filler, thickener
            polyquaternium-10: conditioning agent, thickener
            behentrimonium chloride: conditioning agent, emulsifier
            silica: filler, thickener
            ethanol: solvent, preservative
        """),
        conditions=_phrases(
            "process",
            ("homogenised at {0} rpm for {1} minutes",
             ("high-shear mixing at {0} rpm for {1} min",
              "{1} minutes of homogenisation at {0} rpm"),
             ("2,000 3,000 4,000 5,000 8,000 10,000", "2 3 5 10 15")),
            ("heated to {0} °C before emulsification",
             ("emulsifying hot at {0} °C", "warming the phases to {0} degrees before mixing"),
             ("60 65 70 75 80 85",)),
            ("cooled below {0} °C before the preservative was added",
             ("adding the preservative under {0} °C",
              "post-addition of preservative below {0} degrees"),
             ("30 35 40 45",)),
            ("adjusted to pH {0} with sodium hydroxide",
             ("neutralisation to pH {0}", "a final pH of {0}"),
             ("4.5 5.0 5.5 6.0 6.5 7.0",)),
            ("cold-processed at room temperature",
             ("a cold process without heating", "ambient-temperature manufacture"),
             ()),
            ("mixed under a vacuum of {0} mbar",
             ("vacuum mixing at {0} mbar", "deaerated mixing at {0} millibar"),
             ("100 200 300 400 500 600",)),
        ),
        properties=_phrases(
            "property",
            ("an in vitro SPF of {0}",
             ("sun protection factor {0}", "SPF {0} protection"),
             ("15 20 25 30 40 50",)),
            ("a viscosity of {0} mPa·s",
             ("thickness around {0} cP", "{0} centipoise Brookfield viscosity"),
             ("3,000 5,000 8,000 12,000 15,000 20,000 25,000 40,000",)),
            ("no phase separation after {0} weeks at 45 °C",
             ("stability for {0} weeks at 45 degrees without separating",
              "{0}-week 45 °C stability"),
             ("2 4 6 8 12",)),
            ("a {0}% increase in skin hydration after 4 weeks",
             ("skin moisture up {0} percent after a month", "corneometer readings {0}% higher"),
             ("10 15 20 25 30 35 40 50",)),
            ("a foam volume of {0} mL in a cylinder shake test",
             ("{0} ml of lather", "foam height giving {0} mL when shaken"),
             ("150 200 250 300 350 400 450",)),
            ("a primary irritation index below {0}",
             ("skin irritation score under {0}", "very low irritancy (index < {0})"),
             ("0.2 0.3 0.5 0.8 1.0",)),
        ),
        applications=_applications(
            ("sunscreen lotions",
             ("sun protection creams", "products protecting skin from sunburn")),
            ("moisturising face creams", ("facial moisturisers", "day creams for the face")),
            ("rinse-off shampoos", ("hair cleansing products", "washing hair")),
            ("hair conditioners", ("conditioning hair rinses", "detangling hair after washing")),
            ("liquid foundations", ("makeup base", "tinted complexion products")),
            ("body washes", ("shower gels", "cleansing the body in the shower")),
            ("antiperspirant sticks", ("underarm sticks", "solid deodorants")),
        ),
    ),
    Domain(
        name="agrochemicals",
        nouns=("agrochemical formulation", "crop protection composition", "pesticidal formulation"),
        query_nouns=("crop protection formulation", "pesticide product", "agrochemical"),
        titles=("Agrochemical formulation with improved rainfastness", "Herbicidal composition",
                "Stable suspension concentrate", "Adjuvant composition for crop protection"),
        chemicals=_chemicals("""
            glyphosate isopropylamine salt: active
            atrazine: active
            2,4-D dimethylamine salt: active
            chlorpyrifos: active
            tebuconazole: active
            azoxystrobin: active
            imidacloprid: active
            mancozeb: active
            cloquintocet-mexyl: safener
            benoxacor: safener
            tallow amine ethoxylate: surfactant, adjuvant, emulsifier
            alkyl polyglucoside: surfactant, adjuvant, dispersant
            calcium dodecylbenzene sulfonate: emulsifier, surfactant
            sodium lignosulfonate: dispersant, binder
            naphthalene sulfonate condensate: dispersant, surfactant
            castor oil ethoxylate: emulsifier, surfactant, adjuvant
            trisiloxane ethoxylate: adjuvant, surfactant
            methylated seed oil: adjuvant, solvent
            solvent naphtha: solvent
            N-methyl-2-pyrrolidone: solvent
            cyclohexanone: solvent
            propylene glycol: antifreeze, solvent, humectant
            glycerol: antifreeze, humectant
            ammonium sulfate: adjuvant, filler
            xanthan gum: thickener, stabilizer
            attapulgite clay: rheology modifier, carrier, thickener
            kaolin clay: carrier, filler
            precipitated silica: carrier, anti-caking agent, filler
            polydimethylsiloxane: defoamer, adjuvant
            polyvinyl alcohol: binder, stabilizer
            polyvinylpyrrolidone: binder, dispersant
            sodium lauryl sulfate: surfactant, dispersant
            citric acid: pH adjuster
            1,2-benzisothiazolin-3-one: preservative
        """),
        conditions=_phrases(
            "process",
            ("wet-milled in a bead mill to a D50 of {0} µm",
             ("bead milling to a median particle size of {0} microns",
              "media milling down to d50 {0} µm"),
             ("1 1.5 2 2.5 3 4 5",)),
            ("diluted in water at a spray volume of {0} L/ha",
             ("spraying in {0} litres of water per hectare", "a {0} L/ha spray volume"),
             ("50 100 150 200 250 300 400",)),
            ("stored at {0} °C for {1} weeks",
             ("{1} weeks of storage at {0} degrees", "accelerated ageing ({0} °C, {1} weeks)"),
             ("35 40 45 50 54", "2 4 8 12")),
            ("extruded and dried at {0} °C into water-dispersible granules",
             ("granule extrusion with drying at {0} °C",
              "extrusion granulation dried at {0} degrees"),
             ("50 60 70 80 90",)),
            ("emulsified by adding the concentrate to water at 1:{0}",
             ("a 1 in {0} dilution of the concentrate in water",
              "dilution at one part per {0} of water"),
             ("20 50 100 200 400",)),
            ("applied pre-emergence at {0} g a.i./ha",
             ("pre-emergent use at {0} g active per hectare",
              "a {0} gram per hectare pre-emergence rate"),
             ("50 100 250 500 750 1,000 1,500 2,000",)),
        ),
        properties=_phrases(
            "property",
            ("a suspensibility above {0}%",
             ("more than {0}% remaining suspended", "{0} percent suspensibility"),
             ("70 75 80 85 90 95",)),
            ("{0}% weed control at 28 days after treatment",
             ("control of {0}% of weeds four weeks after spraying",
              "{0} percent control at 28 DAT"),
             ("80 85 90 92 95 98",)),
            ("rainfastness within {0} hours",
             ("resistance to rain wash-off after {0} h",
              "rain resistance {0} hours after application"),
             ("0.5 1 2 4 6",)),
            ("persistent foam below {0} mL after 1 minute",
             ("less than {0} ml of foam after a minute", "low foaming ({0} mL)"),
             ("5 10 20 30 40 60",)),
            ("crop injury below {0}%",
             ("under {0}% phytotoxicity to the crop", "crop damage less than {0} percent"),
             ("2 3 5 8 10 15",)),
            ("no creaming of the emulsion after {0} hours",
             ("emulsion stability for {0} h without cream", "{0}-hour emulsion stability"),
             ("1 2 4 8 24",)),
        ),
        applications=_applications(
            ("post-emergence weed control in maize",
             ("killing emerged weeds in corn", "weeding maize after emergence")),
            ("fungicide sprays for cereals",
             ("disease control in wheat and barley", "protecting grain crops from fungi")),
            ("water-dispersible granules for broadacre crops",
             ("WG products for field crops", "granules that disperse in the spray tank")),
            ("seed treatments", ("seed dressing", "coating seeds before sowing")),
            ("tank-mix adjuvants", ("spray tank additives", "products added to the spray mix")),
            ("controlled-release soil insecticides",
             ("slow-release soil insect control", "granular insecticides for soil pests")),
        ),
    ),
    Domain(
        name="food",
        nouns=("food composition", "food product", "edible formulation"),
        query_nouns=("food product", "edible composition", "foodstuff"),
        titles=("Reduced-sugar food composition", "Emulsified food product and process",
                "Shelf-stable beverage", "Encapsulated food ingredient"),
        chemicals=_chemicals("""
            xanthan gum: thickener, stabilizer
            guar gum: thickener, stabilizer
            gum arabic: emulsifier, stabilizer, carrier
            soy lecithin: emulsifier, dispersant
            mono- and diglycerides of fatty acids: emulsifier, stabilizer
            polysorbate 80: emulsifier, solubilizer
            octenyl succinate starch: emulsifier, thickener, carrier
            maltodextrin: carrier, filler
            sucrose: sweetener, filler
            sucralose: sweetener
            steviol glycosides: sweetener
            citric acid: acidulant, pH adjuster, chelating agent
            ascorbic acid: antioxidant, acidulant
            mixed tocopherols: antioxidant
            rosemary extract: antioxidant, flavour
            potassium sorbate: preservative
            sodium benzoate: preservative
            calcium carbonate: filler, anti-caking agent, pH adjuster
            silicon dioxide: anti-caking agent, carrier
            glycerol: humectant, solvent, sweetener
            propylene glycol: solvent, humectant, carrier
            sodium caseinate: emulsifier, thickener
            whey protein isolate: emulsifier, thickener
            pectin: thickener, stabilizer
            carrageenan: thickener, stabilizer
            gelatin: thickener, stabilizer
            sodium alginate: thickener, stabilizer
            vanillin: flavour
            beta-carotene: colourant, antioxidant
            titanium dioxide: colourant, opacifier
            sunflower oil: carrier, solvent
            medium-chain triglycerides: carrier, solvent
            sodium bicarbonate: leavening agent, pH adjuster
            microcrystalline cellulose: filler, stabilizer, anti-caking agent
            inulin: filler, thickener
            caffeine: active, flavour
        """),
        conditions=_phrases(
            "process",
            ("pasteurised at {0} °C for {1} seconds",
             ("heat treatment at {0} degrees C for {1} s",
              "a {1}-second pasteurisation at {0} °C"),
             ("63 72 75 80 85 90", "15 20 30 60")),
            ("spray-dried at an inlet temperature of {0} °C",
             ("spray drying with {0} °C inlet air",
              "atomising and drying with {0} degree inlet air"),
             ("140 150 160 170 180 190 200 210",)),
            ("homogenised at {0} bar",
             ("two-stage homogenisation at {0} bar", "high-pressure homogenising ({0} bar)"),
             ("50 100 150 200 250 300 500",)),
            ("baked at {0} °C for {1} minutes",
             ("baking {1} min at {0} degrees", "an oven step of {1} minutes at {0} °C"),
             ("160 170 180 190 200 220", "8 12 15 20 25 35")),
            ("extruded at a barrel temperature of {0} °C",
             ("extrusion cooking at {0} °C", "a {0} degree extruder barrel"),
             ("100 110 120 130 140 150 160",)),
            ("freeze-dried at {0} mbar",
             ("lyophilisation at {0} mbar", "freeze drying under {0} millibar"),
             ("0.05 0.1 0.2 0.3 0.5",)),
            ("UHT-treated at 140 °C for {0} seconds",
             ("ultra-high-temperature processing for {0} s", "a {0}-second UHT step"),
             ("2 3 4 5 6 8",)),
        ),
        properties=_phrases(
            "property",
            ("a shelf life of {0} months at ambient temperature",
             ("{0} months of unrefrigerated storage life", "{0}-month room-temperature shelf life"),
             ("3 6 9 12 18 24 36",)),
            ("an overrun of {0}%",
             ("{0} percent air incorporation", "aeration giving {0}% overrun"),
             ("40 60 80 90 100 120",)),
            ("a water activity below {0}",
             ("aw under {0}", "water activity lower than {0}"),
             ("0.3 0.4 0.5 0.6 0.7 0.85",)),
            ("a mean droplet size below {0} µm",
             ("emulsion droplets smaller than {0} microns", "d(4,3) under {0} µm"),
             ("0.2 0.3 0.5 0.8 1 2 5",)),
            ("a sensory score of {0} on a 9-point hedonic scale",
             ("liking rated {0} of 9 by panellists", "{0}/9 hedonic acceptance"),
             ("6 6.5 7 7.5 8 8.5",)),
            ("a {0}% sugar reduction without loss of sweetness",
             ("{0} percent less sugar but equally sweet", "full sweetness with {0}% less sugar"),
             ("20 25 30 40 50 60 70",)),
        ),
        applications=_applications(
            ("reduced-sugar beverages", ("low-sugar drinks", "soft drinks with less sugar")),
            ("ice cream and frozen desserts", ("frozen confections", "frozen dairy desserts")),
            ("gluten-free bakery products",
             ("gluten-free bread and cakes", "baking without wheat gluten")),
            ("salad dressings", ("emulsified dressings", "vinaigrettes and creamy dressings")),
            ("infant formula powders", ("baby milk powder", "powdered formula for infants")),
            ("plant-based meat analogues",
             ("vegan meat substitutes", "meat alternatives from plant protein")),
            ("encapsulated flavour powders",
             ("spray-dried flavour systems", "powdered flavour encapsulates")),
        ),
    ),
    Domain(
        name="lubricants",
        nouns=("lubricating composition", "lubricant", "lubricating oil composition"),
        query_nouns=("lubricant", "lubricating oil", "lubrication fluid"),
        titles=("Lubricating oil composition", "Low-viscosity engine oil",
                "Grease composition for bearings", "Heat transfer fluid with corrosion protection"),
        chemicals=_chemicals("""
            polyalphaolefin: base oil
            hydrotreated mineral oil: base oil, solvent
            trimethylolpropane trioleate: base oil, friction modifier
            di(2-ethylhexyl) sebacate: base oil, seal swell agent
            polyalkylene glycol: base oil, friction modifier
            ethylene glycol: antifreeze, base oil
            zinc dialkyldithiophosphate: antiwear additive, antioxidant, corrosion inhibitor
            molybdenum dithiocarbamate: friction modifier, antiwear additive, antioxidant
            glycerol monooleate: friction modifier, corrosion inhibitor
            oleic acid: friction modifier, corrosion inhibitor
            overbased calcium sulfonate: detergent, corrosion inhibitor
            calcium phenate: detergent, antioxidant
            polyisobutylene succinimide: dispersant, detergent
            olefin copolymer: viscosity modifier
            polymethacrylate: viscosity modifier, pour point depressant
            polyisobutylene: viscosity modifier, tackifier
            alkylated diphenylamine: antioxidant
            2,6-di-tert-butylphenol: antioxidant
            butylated hydroxytoluene: antioxidant
            sulfurized isobutylene: extreme pressure additive, antiwear additive
            tricresyl phosphate: antiwear additive, extreme pressure additive
            molybdenum disulfide: friction modifier, extreme pressure additive
            graphite: friction modifier, extreme pressure additive
            polytetrafluoroethylene: friction modifier, thickener
            lithium 12-hydroxystearate: thickener
            tolyltriazole: corrosion inhibitor, antioxidant
            sodium nitrite: corrosion inhibitor
            sebacic acid: corrosion inhibitor, thickener
            dodecenylsuccinic acid: corrosion inhibitor, friction modifier
            polydimethylsiloxane: defoamer
            sulfolane: seal swell agent, solvent
        """),
        conditions=_phrases(
            "process",
            ("blended at {0} °C for {1} hours",
             ("mixing {1} h at {0} degrees", "a {1}-hour blend at {0} °C"),
             ("40 50 60 70 80 90", "0.5 1 2 3 4")),
            ("passed {0} times through a three-roll mill",
             ("{0} passes on a triple-roll mill", "three-roll milling ({0} passes)"),
             ("1 2 3 4",)),
            ("saponified at {0} °C",
             ("soap formation at {0} degrees", "in-situ saponification at {0} °C"),
             ("170 180 190 200 210 220",)),
            ("filtered through a {0} µm filter",
             ("{0} micron filtration", "filtration to {0} µm"),
             ("1 3 5 10 25",)),
            ("dehydrated under vacuum at {0} °C",
             ("vacuum drying at {0} degrees", "water stripping under vacuum at {0} °C"),
             ("90 100 110 120 130",)),
            ("homogenised at {0} psi",
             ("high-pressure homogenisation at {0} psi", "a {0} psi homogeniser pass"),
             ("3,000 5,000 6,000 8,000 10,000",)),
        ),
        properties=_phrases(
            "property",
            ("a kinematic viscosity of {0} cSt at 100 °C",
             ("KV100 of {0} mm²/s", "{0} centistokes at 100 degrees"),
             ("3.8 4.1 5.6 6.9 7.5 8.2 9.3 10.2 12.5 16.3",)),
            ("a four-ball wear scar diameter of {0} mm",
             ("{0} mm wear scar in the four-ball test", "4-ball scar of {0} millimetres"),
             ("0.30 0.35 0.38 0.40 0.45 0.50 0.55",)),
            ("a viscosity index above {0}",
             ("VI greater than {0}", "viscosity index exceeding {0}"),
             ("120 130 140 150 160 170 180",)),
            ("an RPVOT oxidation life exceeding {0} minutes",
             ("rotating pressure vessel oxidation test above {0} min",
              "{0}+ minutes oxidation stability"),
             ("200 300 400 500 800 1,000",)),
            ("a pour point of {0} °C",
             ("fluidity down to {0} degrees", "pour point at {0} °C"),
             ("-15 -21 -27 -33 -36 -42 -45 -51",)),
            ("a boundary friction coefficient of {0}",
             ("friction coefficient near {0}", "μ of {0} under boundary lubrication"),
             ("0.03 0.04 0.05 0.06 0.08 0.10",)),
            ("a dropping point above {0} °C",
             ("drop point higher than {0} degrees", "grease dropping point over {0} °C"),
             ("180 200 220 240 260 280 300",)),
        ),
        applications=_applications(
            ("passenger car motor oils",
             ("engine oil for cars", "crankcase oil for passenger vehicles")),
            ("industrial gear oils",
             ("gearbox lubrication in plants", "lubricating industrial gears")),
            ("hydraulic fluids", ("hydraulic oil", "fluids for hydraulic systems")),
            ("greases for rolling bearings", ("bearing grease", "lubricating ball bearings")),
            ("metalworking fluids", ("cutting fluids", "coolants for machining")),
            ("engine coolants", ("antifreeze coolant", "radiator fluid")),
            ("wind turbine gearbox lubricants",
             ("wind turbine gear oil", "lubricating wind turbine gears")),
        ),
    ),
)
DOMAINS: dict[str, Domain] = {domain.name: domain for domain in _DOMAINS}

_AMOUNTS: dict[str, tuple[float, float]] = {
    "base oil": (60.0, 92.0), "solvent": (10.0, 60.0), "carrier": (10.0, 60.0),
    "binder": (15.0, 50.0), "filler": (5.0, 35.0), "pigment": (2.0, 25.0), "active": (0.5, 40.0),
    "tackifier": (10.0, 40.0), "plasticizer": (2.0, 15.0), "emollient": (2.0, 20.0),
    "opacifier": (1.0, 10.0), "antifreeze": (5.0, 40.0), "humectant": (1.0, 15.0),
    "surfactant": (1.0, 15.0), "emulsifier": (0.5, 8.0),
}
"""wt% range per role; other roles take 0.1-5 wt%."""


# --------------------------------------------------------------------------- entity sets

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


class _KeyIndex:
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
    low, high = _AMOUNTS.get(role, (0.1, 5.0))
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


def _new_formulation(domain: Domain, rng: random.Random, keys: _KeyIndex) -> Formulation:
    """A random formulation of ``domain`` that holds no query key."""
    for _ in range(_MAX_TRIES):
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
    raise RuntimeError(f"no {domain.name} formulation free of query keys after {_MAX_TRIES} tries")


@dataclass(frozen=True)
class _Edit:
    """How to derive a formulation from a source one (see :func:`_derive`)."""

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

    def relaxed(self) -> _Edit:
        """The edit without its preferences and role swap, for the rare source where they
        only lead to passages that hold another query's key."""
        return replace(self, prefer=frozenset(), swap=None)


def _derive(source: Formulation, domain: Domain, rng: random.Random, edit: _Edit,
            keys: _KeyIndex) -> Formulation:
    """A formulation whose entity-set Jaccard with ``source`` lies in ``edit.band`` and that
    holds no query key.

    It keeps ``k`` source items and replaces the rest with items the source lacks, so
    Jaccard is ``k / (n + m - k)``: ``k`` is drawn among the values that land in the band
    for a random target size ``m``, and the result is checked before it is returned.
    """
    items = source.entities
    n = len(items)
    low, high = edit.band
    for attempt in range(_MAX_TRIES):
        shape = _random_shape(rng)
        m = shape.size
        ks = [k for k in range(min(n, m) + 1) if low <= k / (n + m - k) <= high]
        if not ks:
            continue
        current = edit if attempt < _MAX_TRIES // 2 else edit.relaxed()
        derived = _assemble(source, domain, rng, current, shape, rng.choice(ks))
        if (derived is not None and low <= jaccard(items, derived.entities) <= high
                and not keys.holds_a_key(derived.entities)):
            return derived
    raise RuntimeError(f"no {domain.name} formulation with entity Jaccard in {edit.band} "
                       f"free of query keys after {_MAX_TRIES} tries")


def _category(part: Part) -> str:
    return "ingredient" if isinstance(part, Ingredient) else part.kind


def _assemble(source: Formulation, domain: Domain, rng: random.Random, edit: _Edit,
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


# --------------------------------------------------------------------------- queries

@dataclass(frozen=True)
class _Key:
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


def _choose_key(anchor: Formulation, domain: Domain, rng: random.Random,
                keys: _KeyIndex) -> _Key | None:
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
        key = _Key(mode, signature, focus, tuple(extras), swap)
        if keys.is_free(key.items, signature.item):
            return key
    return None


_QUERY_TEMPLATES: dict[Mode, tuple[str, ...]] = {
    "composition": (
        ("Which {noun} uses {chem} as {a_role} together with {chem2} as {a_role2} and {chem3} "
         "as {a_role3}?"),
        "{noun} containing {chem2} as the {role2}, {chem3} as the {role3} and {chem} as the {role}",
        ("What {noun} combines {chem} acting as {a_role} with {a_role2} based on {chem2} and "
         "{chem3} ({role3})?"),
        ("Find {a_noun} in which {chem} functions as the {role} alongside {chem3} ({role3}) and "
         "{chem2} ({role2})."),
        "{chem} {role} plus {chem2} {role2} and {chem3} {role3} in {a_noun}",
    ),
    "process": (
        "How is {a_noun} with {chem} as {a_role} and {chem2} as {a_role2} made using {focus}?",
        "{noun} containing {chem} as the {role} and {chem2} ({role2}), produced with {focus}",
        ("Which manufacturing route involves {focus} for {a_noun} that uses {chem} as {a_role} "
         "alongside {a_role2} ({chem2})?"),
        ("preparation of {a_noun} including {focus}, where {chem} serves as the {role} and {chem2} "
         "as the {role2}"),
    ),
    "performance": (
        "Which {noun} achieves {focus} using {chem} as {a_role} and {chem2} as {a_role2}?",
        ("{noun} with {focus} obtained by using {chem} as the {role} together with {chem2} "
         "({role2})"),
        ("How can {focus} be reached in {a_noun} that relies on {chem} as {a_role} plus {a_role2} "
         "such as {chem2}?"),
        ("formulation where {chem} is the {role}, {chem2} is the {role2} and the product shows "
         "{focus}"),
    ),
    "application": (
        ("What {noun} for {focus} includes {chem} as its {role}, {chem2} as {a_role2} and "
         "{chem3} as {a_role3}?"),
        ("{chem} used as {a_role} with {chem2} ({role2}) and {chem3} ({role3}) in a formulation "
         "intended for {focus}"),
        ("Which formulation suited to {focus} relies on {chem} as the {role}, with {chem2} as the "
         "{role2} and {chem3} as the {role3}?"),
        "{noun} for {focus} with {chem2} as {a_role2}, {chem3} as {a_role3} and {chem} as {a_role}",
    ),
}


def _article(phrase: str) -> str:
    return f"{'an' if phrase[0].lower() in 'aeiou' else 'a'} {phrase}"


def _role_words(role: str, rng: random.Random) -> str:
    return rng.choice(ROLE_SYNONYMS[role]) if rng.random() < _SYNONYM_RATE else role


def _chemical_words(chemical: str, rng: random.Random) -> str:
    alias = CHEMICAL_ALIASES.get(chemical)
    return alias if alias and rng.random() < _ALIAS_RATE else chemical


def _ingredient_fields(ingredient: Ingredient, suffix: str, rng: random.Random) -> dict[str, str]:
    role = _role_words(ingredient.role, rng)
    return {f"chem{suffix}": _chemical_words(ingredient.chemical, rng), f"role{suffix}": role,
            f"a_role{suffix}": _article(role)}


def _query_text(key: _Key, domain: Domain, rng: random.Random) -> str:
    """A paraphrased question for ``key``: role synonyms, abbreviations, reordered clauses."""
    noun = rng.choice(domain.query_nouns)
    fields = {"noun": noun, "a_noun": _article(noun), **_ingredient_fields(key.signature, "", rng)}
    ingredients = [p for p in (key.focus, *key.extras) if isinstance(p, Ingredient)]
    for number, ingredient in enumerate(ingredients, start=2):
        fields |= _ingredient_fields(ingredient, str(number), rng)
    if isinstance(key.focus, Phrase):
        fields["focus"] = rng.choice(key.focus.paraphrases)
    return rng.choice(_QUERY_TEMPLATES[key.mode]).format(**fields)


# --------------------------------------------------------------------------- passages

_SECTIONS = ("Detailed Description", "Example {n}", "Summary of the Invention",
             "Preferred Embodiments", "Description of Embodiments", "Working Example {n}",
             "Examples")
_INGREDIENT_FORMS = (
    "{amount} wt% of {chemical} as {a_role}",
    "{chemical} ({role}, {amount} wt%)",
    "{amount} wt% {chemical} serving as the {role}",
    "{chemical} as the {role} in an amount of {amount} wt%",
)
_OPENERS = (
    "In one embodiment, the {noun} comprises {items}.",
    "Example {n}. {a_noun} was prepared from {items}.",
    "According to a preferred embodiment, the {noun} contains {items}.",
    "The {noun} of Table {n} consists essentially of {items}.",
    "A typical {noun} according to the invention includes {items}.",
)
_MORE_INGREDIENTS = ("The {noun} further comprises {items}.",
                     "In addition, {items} may be present.",
                     "Optionally, it also contains {items}.")
_ONE_CONDITION = ("The mixture was {0}.", "During manufacture, the batch is {0}.",
                  "Preferably, the composition is {0}.", "The blend was subsequently {0}.")
_TWO_CONDITIONS = ("The mixture was {0} and then {1}.",
                   "During manufacture, the batch is first {0}, after which it is {1}.",
                   "The composition was {0}; it was then {1}.")
_ONE_PROPERTY = ("The resulting {noun} exhibits {0}.",
                 "Compositions prepared in this way showed {0}.",
                 "Testing of the product confirmed {0}.", "The {noun} is characterised by {0}.")
_TWO_PROPERTIES = ("The resulting {noun} exhibits {0} and {1}.",
                   "Compositions prepared in this way showed {0} together with {1}.",
                   "Testing confirmed {0}, as well as {1}.")
_APPLICATION_SENTENCES = ("The {noun} is particularly suitable for {0}.",
                          "Such formulations find use in {0}.",
                          "Intended applications include {0}.",
                          "This {noun} was developed for {0}.")
_BOILERPLATE = (
    "All percentages are by weight of the total composition unless otherwise indicated.",
    "Variations may be made without departing from the scope of the invention.",
    "The embodiments described herein are illustrative and not limiting.",
    "Unless stated otherwise, the components were used as received from commercial suppliers.",
)


def _listing(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _ingredient_words(ingredient: Ingredient, form: str) -> str:
    return form.format(amount=f"{ingredient.amount:g}", chemical=ingredient.chemical,
                       role=ingredient.role, a_role=_article(ingredient.role))


def _render(formulation: Formulation, domain: Domain, title: str, rng: random.Random) -> Passage:
    """Patent-style prose that states every item of the formulation's entity set."""
    noun = rng.choice(domain.nouns)
    form = rng.choice(_INGREDIENT_FORMS)
    words = [_ingredient_words(i, form) for i in formulation.ingredients]
    split = rng.randint(3, len(words) - 1) if len(words) >= 5 and rng.random() < 0.4 else len(words)
    opener = rng.choice(_OPENERS).format(noun=noun, a_noun=_article(noun).capitalize(),
                                         n=rng.randint(1, 12), items=_listing(words[:split]))
    sentences = [opener]
    if split < len(words):
        more = _listing(words[split:])
        sentences.append(rng.choice(_MORE_INGREDIENTS).format(noun=noun, items=more))
    texts = [c.text for c in formulation.conditions]
    process = rng.choice(_ONE_CONDITION if len(texts) == 1 else _TWO_CONDITIONS).format(*texts)
    texts = [p.text for p in formulation.properties]
    performance = rng.choice(_ONE_PROPERTY if len(texts) == 1 else _TWO_PROPERTIES).format(
        *texts, noun=noun)
    middle = [process, performance] if rng.random() < 0.7 else [performance, process]
    sentences += middle
    sentences.append(rng.choice(_APPLICATION_SENTENCES).format(formulation.application.text,
                                                               noun=noun))
    if rng.random() < 0.5:
        sentences.insert(rng.choice((0, len(sentences))), rng.choice(_BOILERPLATE))
    section = rng.choice(_SECTIONS).format(n=rng.randint(1, 12))
    return Passage(text=" ".join(sentences), title=f"{title} - {section}")


# --------------------------------------------------------------------------- patents

@dataclass(eq=False)
class _Chunk:
    kind: Kind
    formulation: Formulation


@dataclass(eq=False)
class _Patent:
    domain: Domain
    title: str
    chunks: list[_Chunk] = field(default_factory=list)

    def add(self, kind: Kind, formulation: Formulation) -> _Chunk:
        chunk = _Chunk(kind, formulation)
        self.chunks.append(chunk)
        return chunk


@dataclass(eq=False)
class _Triplet:
    key: _Key
    patent: _Patent
    anchor: _Chunk
    hard: _Chunk
    soft: _Chunk


def _new_patent(domain: Domain, rng: random.Random, patents: list[_Patent]) -> _Patent:
    patent = _Patent(domain, rng.choice(domain.titles))
    patents.append(patent)
    return patent


def _add_siblings(patent: _Patent, source: Formulation, count: int, kind: Kind,
                  rng: random.Random, keys: _KeyIndex) -> None:
    """``count`` more passages of ``patent``, derived from ``source``."""
    edit = _Edit(SIBLING_BAND, keep_application=True)
    for _ in range(count):
        patent.add(kind, _derive(source, patent.domain, rng, edit, keys))


def _first_anchor(domain: Domain, rng: random.Random, keys: _KeyIndex) -> tuple[Formulation, _Key]:
    for _ in range(_MAX_TRIES):
        anchor = _new_formulation(domain, rng, keys)
        key = _choose_key(anchor, domain, rng, keys)
        if key is not None:
            return anchor, key
    raise RuntimeError(f"no free query key left in {domain.name} after {_MAX_TRIES} anchors; "
                       "ask for fewer queries")


def _add_anchor_patent(rng: random.Random, keys: _KeyIndex, patents: list[_Patent],
                       wanted: int) -> tuple[_Patent, list[tuple[_Chunk, _Key]]]:
    """A patent holding up to ``wanted`` anchors (the others derived from the first) and
    their keys, which join ``keys`` before any other passage is made."""
    names = list(_DOMAIN_WEIGHTS)
    domain = DOMAINS[rng.choices(names, weights=list(_DOMAIN_WEIGHTS.values()))[0]]
    patent = _new_patent(domain, rng, patents)
    first, key = _first_anchor(domain, rng, keys)
    keys.add(first.entities, key.items)
    anchors = [(patent.add("anchor", first), key)]
    for _ in range(wanted - 1):
        anchor = _derive(first, domain, rng, _Edit(SIBLING_BAND, keep_application=True), keys)
        key = _choose_key(anchor, domain, rng, keys)
        if key is not None:
            keys.add(anchor.entities, key.items)
            anchors.append((patent.add("anchor", anchor), key))
    return patent, anchors


def _complete_anchor_patent(rng: random.Random, keys: _KeyIndex, patents: list[_Patent],
                            patent: _Patent, anchors: list[tuple[_Chunk, _Key]]) -> list[_Triplet]:
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
        hard = _derive(chunk.formulation, domain, rng,
                       _Edit(HARD_BAND, protected, key.signature if key.swap else None,
                             _HARD_REUSE, prefer), keys)
        soft = _derive(chunk.formulation, domain, rng, _Edit(SOFT_BAND, protected), keys)
        negatives = []
        for kind, formulation in (("hard", hard), ("soft", soft)):
            own = _new_patent(domain, rng, patents)
            negatives.append(own.add(kind, formulation))
            _add_siblings(own, formulation, rng.randint(0, 1), "sibling", rng, keys)
        triplets.append(_Triplet(key, patent, chunk, *negatives))
    return triplets


def _add_distractors(rng: random.Random, keys: _KeyIndex, patents: list[_Patent],
                     triplets: list[_Triplet], total: int, variant: Variant) -> None:
    """Unjudged patents of 1-4 passages. ``structured`` (C1): near-misses of a random query's
    anchor, so domains follow the query counts; ``random`` (C0): any domain, any entities."""
    made = 0
    while made < total:
        size = min(rng.randint(1, 4), total - made)
        if variant == "structured":
            triplet = rng.choice(triplets)
            domain = triplet.patent.domain
            prefer = frozenset(rng.sample(sorted(triplet.key.items), rng.randint(1, 2)))
            first = _derive(triplet.anchor.formulation, domain, rng,
                            _Edit(NEAR_MISS_BAND, reuse=_HARD_REUSE, prefer=prefer), keys)
        else:
            domain = rng.choice(_DOMAINS)
            first = _new_formulation(domain, rng, keys)
        patent = _new_patent(domain, rng, patents)
        patent.add("distractor", first)
        _add_siblings(patent, first, size - 1, "distractor", rng, keys)
        made += size


def _assign_splits(triplets: list[_Triplet], fractions: tuple[float, float, float],
                   rng: random.Random) -> dict[_Patent, str]:
    """Split name per anchor patent: whole patents go to the split furthest below its
    target share of queries."""
    sizes = Counter(t.patent for t in triplets)
    order = list(sizes)
    rng.shuffle(order)
    targets = [f * len(triplets) for f in fractions]
    counts = [0, 0, 0]
    split_of: dict[_Patent, str] = {}
    for patent in order:
        index = max(range(3), key=lambda s: targets[s] - counts[s])
        counts[index] += sizes[patent]
        split_of[patent] = SPLITS[index]
    if 0 in counts:
        raise ValueError(f"{len(triplets)} queries in {len(order)} patents cannot fill the three "
                         f"splits {fractions}; ask for more queries")
    return split_of


# --------------------------------------------------------------------------- dataset

@dataclass(frozen=True)
class SynthDoc:
    """One corpus passage with the entity set and provenance it was generated from."""

    doc_id: str
    patent: str
    domain: str
    kind: Kind
    formulation: Formulation
    passage: Passage

    @property
    def labels(self) -> dict[str, str]:
        """Class labels for probes (FormBench's CPC classes stand-in): ``domain``, the
        macro-domain, and ``class``, the application (48 over the seven domains; one per
        patent)."""
        return {"domain": self.domain, "class": self.formulation.application.text}


@dataclass(frozen=True)
class SynthQuery:
    """One query, its triplet and the key items (all in the anchor) it asks about."""

    query_id: str
    text: str
    mode: Mode
    domain: str
    split: str
    anchor: str
    hard: str
    soft: str
    key: frozenset[str]


@dataclass(frozen=True)
class SynthSummary:
    """What :func:`synthesize` wrote (printed by ``tapt data synth``)."""

    variant: str
    seed: int
    queries_per_split: dict[str, int]
    queries_per_mode: dict[str, int]
    queries_per_domain: dict[str, int]
    passages_per_kind: dict[str, int]
    corpus_size: int
    mean_hard_jaccard: float
    mean_soft_jaccard: float
    role_swap_share: float
    """Share of hard negatives that hold an anchor chemical in another role."""


@dataclass(frozen=True)
class SynthDataset:
    """The in-memory dataset; ``docs`` in corpus order, ``queries`` in id order."""

    variant: Variant
    seed: int
    docs: dict[str, SynthDoc]
    queries: dict[str, SynthQuery]

    def corpus(self) -> dict[str, Passage]:
        return {doc_id: doc.passage for doc_id, doc in self.docs.items()}

    def query_texts(self) -> dict[str, str]:
        return {query_id: query.text for query_id, query in self.queries.items()}

    def qrels(self) -> dict[str, Qrels]:
        """Per split: anchor = 3, hard negative = 2, soft negative = 1."""
        qrels: dict[str, Qrels] = {split: {} for split in SPLITS}
        for query in self.queries.values():
            qrels[query.split][query.query_id] = {query.anchor: ANCHOR, query.hard: HARD_NEGATIVE,
                                                  query.soft: SOFT_NEGATIVE}
        return qrels

    def summary(self) -> SynthSummary:
        queries = list(self.queries.values())
        triplets = [(self.docs[q.anchor].formulation, self.docs[q.hard].formulation,
                     self.docs[q.soft].formulation) for q in queries]
        return SynthSummary(
            variant=self.variant, seed=self.seed,
            queries_per_split={s: sum(q.split == s for q in queries) for s in SPLITS},
            queries_per_mode={m: sum(q.mode == m for q in queries) for m in MODES},
            queries_per_domain=dict(sorted(Counter(q.domain for q in queries).items())),
            passages_per_kind={k: sum(d.kind == k for d in self.docs.values())
                               for k in ("anchor", "hard", "soft", "sibling", "distractor")},
            corpus_size=len(self.docs),
            mean_hard_jaccard=round(_mean([jaccard(a.entities, h.entities)
                                           for a, h, _ in triplets]), 4),
            mean_soft_jaccard=round(_mean([jaccard(a.entities, s.entities)
                                           for a, _, s in triplets]), 4),
            role_swap_share=round(_mean([bool(role_swaps(a, h)) for a, h, _ in triplets]), 4),
        )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _check_arguments(queries: int, distractors: int, variant: str,
                     split_fractions: tuple[float, float, float]) -> None:
    if queries < 1:
        raise ValueError(f"queries must be >= 1, got {queries}")
    if distractors < 0:
        raise ValueError(f"distractors must be >= 0, got {distractors}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if len(split_fractions) != 3 or any(f <= 0 for f in split_fractions) \
            or not math.isclose(sum(split_fractions), 1.0, abs_tol=1e-6):
        raise ValueError("split_fractions must be three positive numbers summing to 1 "
                         f"(train, dev, test), got {split_fractions}")


def _documents(patents: list[_Patent], rng: random.Random,
               ) -> tuple[dict[str, SynthDoc], dict[_Chunk, str]]:
    """Rendered passages by doc id (sorted), and the doc id of each chunk.
    Patent numbers and chunk positions are shuffled, so ids say nothing of the role."""
    numbers = list(range(1, len(patents) + 1))
    rng.shuffle(numbers)
    width = max(4, len(str(len(patents))))
    doc_ids: dict[_Chunk, str] = {}
    docs: list[SynthDoc] = []
    for patent, number in zip(patents, numbers, strict=True):
        name = f"p{number:0{width}d}"
        chunks = patent.chunks[:]
        rng.shuffle(chunks)
        for position, chunk in enumerate(chunks, start=1):
            doc_id = doc_ids[chunk] = f"{name}-c{position}"
            docs.append(SynthDoc(doc_id, name, patent.domain.name, chunk.kind, chunk.formulation,
                                 _render(chunk.formulation, patent.domain, patent.title, rng)))
    return {doc.doc_id: doc for doc in sorted(docs, key=lambda d: d.doc_id)}, doc_ids


def build(*, queries: int = 600, distractors: int = 2000, variant: Variant = "structured",
          seed: int = 0, split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
          ) -> SynthDataset:
    """Build a FormBench-like dataset in memory; deterministic for a ``seed``."""
    _check_arguments(queries, distractors, variant, split_fractions)
    rng = random.Random(seed)
    keys = _KeyIndex()
    patents: list[_Patent] = []
    planned: list[tuple[_Patent, list[tuple[_Chunk, _Key]]]] = []
    count = 0
    while count < queries:
        planned.append(_add_anchor_patent(rng, keys, patents,
                                          min(rng.choice(_QUERIES_PER_PATENT), queries - count)))
        count += len(planned[-1][1])
    triplets = [triplet for patent, anchors in planned
                for triplet in _complete_anchor_patent(rng, keys, patents, patent, anchors)]
    _add_distractors(rng, keys, patents, triplets, distractors, variant)
    split_of = _assign_splits(triplets, split_fractions, rng)
    docs, doc_ids = _documents(patents, rng)

    query_width = max(5, len(str(queries)))
    synth_queries: dict[str, SynthQuery] = {}
    for number, t in enumerate(triplets, start=1):
        query_id = f"q{number:0{query_width}d}"
        synth_queries[query_id] = SynthQuery(
            query_id, _query_text(t.key, t.patent.domain, rng), t.key.mode, t.patent.domain.name,
            split_of[t.patent], doc_ids[t.anchor], doc_ids[t.hard], doc_ids[t.soft], t.key.items)
    return SynthDataset(variant, seed, docs, synth_queries)


def synthesize(out_dir: str | Path, *, queries: int = 600, distractors: int = 2000,
               variant: Variant = "structured", seed: int = 0,
               split_fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> SynthSummary:
    """Build a FormBench-like dataset and write it as a BEIR folder at ``out_dir``.

    Everything is built before anything is written; a folder that already holds a
    dataset raises ``FileExistsError`` (from :func:`write_beir`) and is left unchanged.
    """
    dataset = build(queries=queries, distractors=distractors, variant=variant, seed=seed,
                    split_fractions=split_fractions)
    write_dataset(out_dir, dataset)
    return dataset.summary()


def write_dataset(out_dir: str | Path, dataset: SynthDataset) -> Path:
    """Write ``dataset`` as a BEIR folder whose ``corpus.jsonl`` lines also carry
    ``"labels": {"domain": ..., "class": ...}`` (after ``_id``, ``title`` and ``text``; BEIR
    readers, tapt's too, ignore the field; ``tapt probe`` reads it). Refuses a folder that
    already holds a dataset, as :func:`write_beir` does."""
    folder = write_beir(out_dir, dataset.corpus(), dataset.query_texts(), dataset.qrels())
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as handle:
        for doc_id, doc in dataset.docs.items():
            handle.write(json.dumps({"_id": doc_id, "title": doc.passage.title,
                                     "text": doc.passage.text, "labels": doc.labels},
                                    ensure_ascii=False) + "\n")
    return folder
