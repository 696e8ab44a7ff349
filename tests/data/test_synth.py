"""The FormBench-like generator: determinism, BEIR validity, Jaccard tiers, role swaps,
unique query keys, patent-level splits, C0/C1 distractors and lexical difficulty."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tapt.data.beir import ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE, SPLITS, load_beir_folder
from tapt.data.synth import (
    DOMAINS,
    MODES,
    ROLE_SYNONYMS,
    Formulation,
    SynthDataset,
    build,
    synthesize,
)

QUERIES = 300
DISTRACTORS = 600


@pytest.fixture(scope="module")
def structured() -> SynthDataset:
    return build(queries=QUERIES, distractors=DISTRACTORS, variant="structured", seed=1)


@pytest.fixture(scope="module")
def random_variant() -> SynthDataset:
    return build(queries=QUERIES, distractors=DISTRACTORS, variant="random", seed=1)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("synth") / "ds"
    synthesize(folder, queries=120, distractors=200, seed=3)
    return folder


def entity_set(f: Formulation) -> set[str]:
    """Recomputed here from the formulation's parts, independently of the module."""
    items = {f"{i.role}:{i.chemical}" for i in f.ingredients}
    items |= {f"process:{c.text}" for c in f.conditions}
    items |= {f"property:{p.text}" for p in f.properties}
    return items | {f"application:{f.application.text}"}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def tokens(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


# --------------------------------------------------------------------------- determinism

def test_same_seed_same_bytes_other_seed_other_data(tmp_path):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        synthesize(tmp_path / name, queries=80, distractors=100, seed=seed)
    first, again, other = (files(tmp_path / n) for n in "abc")
    assert set(first) == {"corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/dev.tsv",
                          "qrels/test.tsv"}
    assert first == again
    assert first["corpus.jsonl"] != other["corpus.jsonl"]
    assert first["queries.jsonl"] != other["queries.jsonl"]


@pytest.mark.slow
def test_same_bytes_under_another_hash_seed(tmp_path):
    """Set iteration order changes with PYTHONHASHSEED; the output must not."""
    synthesize(tmp_path / "here", queries=60, distractors=80, seed=2)
    hash_seed = "123" if os.environ.get("PYTHONHASHSEED") != "123" else "321"
    code = ("import sys; from tapt.data.synth import synthesize; "
            "synthesize(sys.argv[1], queries=60, distractors=80, seed=2)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "there")], check=True,
                   env={**os.environ, "PYTHONHASHSEED": hash_seed},
                   cwd=Path(__file__).resolve().parents[2])
    assert files(tmp_path / "here") == files(tmp_path / "there")


# --------------------------------------------------------------------------- BEIR output

def test_output_loads_and_every_query_has_one_anchor_hard_and_soft(written):
    dataset = load_beir_folder(written)
    seen: Counter[str] = Counter()
    for split in SPLITS:
        for judged in dataset.split(split).values():
            assert sorted(judged.values()) == [SOFT_NEGATIVE, HARD_NEGATIVE, ANCHOR]
        seen.update(list(dataset.split(split)))
    assert set(seen) == set(dataset.queries) and set(seen.values()) == {1}
    assert len(dataset.queries) == 120
    assert all(re.fullmatch(r"q\d{5}", q) for q in dataset.queries)
    assert all(re.fullmatch(r"p\d{4,}-c\d+", d) for d in dataset.corpus)
    for line in (written / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        assert list(json.loads(line)) == ["_id", "text", "labels"]  # readers ignore labels


def test_summary_describes_what_was_written(tmp_path):
    summary = synthesize(tmp_path / "ds", queries=100, distractors=150, variant="random", seed=4)
    dataset = load_beir_folder(tmp_path / "ds")
    assert summary.corpus_size == len(dataset.corpus)
    assert summary.queries_per_split == {s: len(dataset.split(s)) for s in SPLITS}
    assert sum(summary.queries_per_mode.values()) == 100
    assert set(summary.queries_per_mode) == set(MODES)
    assert summary.passages_per_kind["distractor"] == 150
    assert summary.passages_per_kind["anchor"] == summary.passages_per_kind["hard"] == 100
    assert 0.30 <= summary.mean_hard_jaccard <= 0.50
    assert 0.05 <= summary.mean_soft_jaccard <= 0.15


def test_existing_dataset_raises_and_is_left_unchanged(written):
    before = files(written)
    with pytest.raises(FileExistsError):
        synthesize(written, queries=50, distractors=10, seed=99)
    assert files(written) == before


@pytest.mark.parametrize("arguments", [{"queries": 0}, {"distractors": -1}, {"variant": "C2"},
                                       {"split_fractions": (0.8, 0.2, 0.0)},
                                       {"split_fractions": (0.5, 0.2, 0.2)}])
def test_bad_arguments_raise_before_anything_is_written(tmp_path, arguments):
    with pytest.raises(ValueError):
        synthesize(tmp_path / "ds", **arguments)
    assert not (tmp_path / "ds").exists()


# --------------------------------------------------------------------------- entity sets

def test_negatives_lie_in_the_jaccard_bands(structured):
    for query in structured.queries.values():
        anchor, hard, soft = (entity_set(structured.docs[d].formulation)
                              for d in (query.anchor, query.hard, query.soft))
        assert 0.30 <= jaccard(anchor, hard) <= 0.50, query.query_id
        assert 0.05 <= jaccard(anchor, soft) <= 0.15, query.query_id


def test_entity_sets_match_what_the_module_reports(structured):
    for doc in list(structured.docs.values())[:300]:
        assert doc.formulation.entities == entity_set(doc.formulation)


def test_passages_state_every_entity(structured):
    for doc in structured.docs.values():
        f, text = doc.formulation, doc.passage.text
        for ingredient in f.ingredients:
            assert ingredient.chemical in text and ingredient.role in text
        for phrase in (*f.conditions, *f.properties, f.application):
            assert phrase.text in text, (doc.doc_id, phrase.text)


def test_hard_negatives_reuse_anchor_chemicals_in_other_roles(structured):
    def swapped(query) -> bool:
        anchor = structured.docs[query.anchor].formulation.roles()
        hard = structured.docs[query.hard].formulation.roles()
        return any(c in hard and hard[c] != role for c, role in anchor.items())

    share = sum(map(swapped, structured.queries.values())) / len(structured.queries)
    assert share > 0.5
    assert structured.summary().role_swap_share == pytest.approx(share, abs=1e-4)


def test_each_query_key_is_held_by_its_anchor_alone(structured):
    holders: dict[str, set[str]] = defaultdict(set)
    for doc in structured.docs.values():
        for item in entity_set(doc.formulation):
            holders[item].add(doc.doc_id)
    for query in structured.queries.values():
        assert len(query.key) >= 3
        assert set.intersection(*(holders[item] for item in query.key)) == {query.anchor}


# --------------------------------------------------------------------------- patents and splits

def test_patents_do_not_cross_splits(structured):
    patents_of: dict[str, set[str]] = {split: set() for split in SPLITS}
    for query in structured.queries.values():
        anchor_patent = structured.docs[query.anchor].patent
        assert structured.docs[query.hard].patent != anchor_patent
        assert structured.docs[query.soft].patent != anchor_patent
        assert structured.docs[query.hard].patent != structured.docs[query.soft].patent
        patents_of[query.split] |= {structured.docs[d].patent
                                    for d in (query.anchor, query.hard, query.soft)}
    assert not patents_of["train"] & patents_of["dev"]
    assert not patents_of["train"] & patents_of["test"]
    assert not patents_of["dev"] & patents_of["test"]


def test_anchor_patents_have_other_passages_and_one_domain(structured):
    passages = Counter(doc.patent for doc in structured.docs.values())
    domains = defaultdict(set)
    for doc in structured.docs.values():
        domains[doc.patent].add(doc.domain)
    assert all(len(d) == 1 for d in domains.values())
    for query in structured.queries.values():
        assert passages[structured.docs[query.anchor].patent] >= 2


@pytest.mark.parametrize("fractions", [(0.8, 0.1, 0.1), (0.5, 0.3, 0.2)])
def test_split_sizes_follow_the_fractions(fractions):
    dataset = build(queries=200, distractors=0, seed=7, split_fractions=fractions)
    counts = Counter(q.split for q in dataset.queries.values())
    for split, fraction in zip(SPLITS, fractions, strict=True):
        assert abs(counts[split] - fraction * 200) <= 3  # a patent holds at most 3 queries


# --------------------------------------------------------------------------- corpus variants

def _nearest_anchor_jaccard(dataset: SynthDataset) -> list[float]:
    anchors = defaultdict(list)
    for query in dataset.queries.values():
        doc = dataset.docs[query.anchor]
        anchors[doc.domain].append(entity_set(doc.formulation))
    return [max((jaccard(entity_set(doc.formulation), a) for a in anchors[doc.domain]),
                default=0.0)
            for doc in dataset.docs.values() if doc.kind == "distractor"]


def test_structured_distractors_are_in_domain_near_misses(structured, random_variant):
    query_domains = Counter(q.domain for q in structured.queries.values())
    structured_domains = Counter(d.domain for d in structured.docs.values()
                                 if d.kind == "distractor")
    random_domains = Counter(d.domain for d in random_variant.docs.values()
                             if d.kind == "distractor")
    assert sum(structured_domains.values()) == sum(random_domains.values()) == DISTRACTORS
    assert set(structured_domains) <= set(query_domains)
    biggest = max(query_domains, key=query_domains.get)
    smallest = min(query_domains, key=query_domains.get)
    assert structured_domains[biggest] > structured_domains[smallest]
    assert set(random_domains) == set(DOMAINS)
    assert max(random_domains.values()) < 2 * min(random_domains.values())
    near_structured = _nearest_anchor_jaccard(structured)
    near_random = _nearest_anchor_jaccard(random_variant)
    assert sum(near_structured) / len(near_structured) > sum(near_random) / len(near_random) + 0.03


# --------------------------------------------------------------------------- queries

def test_queries_cover_the_four_modes_in_paraphrase(structured):
    modes = Counter(q.mode for q in structured.queries.values())
    assert set(modes) == set(MODES) and min(modes.values()) > 0.15 * QUERIES
    roles = verbatim = 0
    for query in structured.queries.values():
        assert query.text not in structured.docs[query.anchor].passage.as_text()
        for item in query.key:
            role = item.split(":", 1)[0]
            if role in ROLE_SYNONYMS:
                roles += 1
                verbatim += re.search(rf"\b{re.escape(role)}\b", query.text) is not None
    assert 0 < verbatim / roles < 0.4  # mostly synonyms, sometimes the passage's own word


def test_token_overlap_alone_does_not_always_find_the_anchor(structured):
    """A bag-of-tokens ranking of (anchor, hard, soft) must put the anchor strictly first
    for clearly more than chance (1/3: the queries are answerable) but clearly less than
    always (the hard negative shares the chemicals, only their roles differ)."""
    first = 0
    for query in structured.queries.values():
        words = tokens(query.text)
        scores = [len(words & tokens(structured.docs[d].passage.as_text()))
                  for d in (query.anchor, query.hard, query.soft)]
        first += scores[0] > max(scores[1:])
    assert 0.4 < first / len(structured.queries) < 0.85


# --------------------------------------------------------------------------- class labels

TEXT_DIGESTS = {
    "structured": "12971bfdad7f3409e5a8122a88f323ec599c048c5121159f4b7e9fdd29bec2b8",
    "random": "909931c875b67b45975b1983226dc395ea4a3397c9987e3376b3a2a5aa225fa3",
}
"""sha256 of (id, title, text) per passage, queries.jsonl and the qrels for
``synthesize(queries=80, distractors=100, seed=5)``, taken before passages and queries had
labels: adding labels must not change what a seed generates (queries.jsonl is hashed with
each line's ``labels`` field removed, the line re-serialized as ``write_beir`` writes it)."""


@pytest.mark.parametrize("variant", ["structured", "random"])
def test_labels_leave_what_a_seed_generates_unchanged(tmp_path, variant):
    synthesize(tmp_path / "ds", queries=80, distractors=100, seed=5, variant=variant)
    digest = hashlib.sha256()
    for line in (tmp_path / "ds" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        digest.update(json.dumps([record["_id"], record["title"], record["text"]]).encode())
    for line in (tmp_path / "ds" / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        record.pop("labels")
        digest.update((json.dumps(record, ensure_ascii=False) + "\n").encode())
    for name in ("qrels/train.tsv", "qrels/dev.tsv", "qrels/test.tsv"):
        digest.update((tmp_path / "ds" / name).read_bytes())
    assert digest.hexdigest() == TEXT_DIGESTS[variant]


def test_every_passage_carries_its_domain_and_class(written):
    expected = build(queries=120, distractors=200, seed=3)
    classes_of_patent: defaultdict[str, set[str]] = defaultdict(set)
    lines = (written / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(expected.docs)
    for line in lines:
        record = json.loads(line)
        assert list(record) == ["_id", "title", "text", "labels"]
        doc = expected.docs[record["_id"]]
        labels = record["labels"]
        assert labels == {"domain": doc.domain, "class": doc.formulation.application.text}
        assert labels["class"] in {a.text for a in DOMAINS[labels["domain"]].applications}
        assert labels["class"] in record["text"]  # the class is what the passage says
        classes_of_patent[doc.patent].add(labels["class"])
    assert all(len(classes) == 1 for classes in classes_of_patent.values())
    assert len({c for cs in classes_of_patent.values() for c in cs}) > 20
    assert len(load_beir_folder(written).corpus) == len(lines)  # readers ignore the field


# --------------------------------------------------------------------------- vocabulary and speed

def test_vocabulary_is_role_aware_and_domain_specific():
    chemicals_in: Counter[str] = Counter()
    used: set[str] = set()
    for domain in DOMAINS.values():
        assert 25 <= len(domain.chemicals) <= 40, domain.name
        roles = {r for rs in domain.chemicals.values() for r in rs}
        assert roles <= set(ROLE_SYNONYMS), roles - set(ROLE_SYNONYMS)
        assert not roles & {"process", "property", "application"}
        multi = sum(len(rs) > 1 for rs in domain.chemicals.values())
        assert multi > 0.5 * len(domain.chemicals), domain.name
        chemicals_in.update(list(domain.chemicals))
        used |= roles
    assert used == set(ROLE_SYNONYMS)
    assert sum(count > 1 for count in chemicals_in.values()) >= 10


def test_default_size_builds_whole():
    """The default size builds every query and distractor (its speed is measured by
    benchmarks/bench_synth.py, not asserted here)."""
    dataset = build(queries=600, distractors=2000, seed=0)
    assert len(dataset.queries) == 600
