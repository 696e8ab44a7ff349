"""``tapt compare --baseline`` on the novel queries: is a gain more than memorised passages?

A result file's ``train_overlap`` section (:mod:`tapt.data.overlap`) names the evaluated
queries that are **seen** (a relevant passage was a training positive) and, by elimination,
the **novel** ones. A fine-tuned model can gain on seen queries by remembering the passages
it trained on while retrieving no better on new documents, so every system tested against
the baseline is tested again on the novel queries alone, with the same machinery
(:func:`tapt.analysis.significance.against_baseline`: mean difference, 95 % percentile
bootstrap interval, paired randomization test, Holm across the systems of a corpus), on the
queries both hold that neither calls seen.

Each pair is tested on the queries novel to **both**: those neither the system's files
nor the baseline's call seen. A trained system and its baseline may have trained on
different queries (a run's ``test.json`` counts against the train split it trained on,
after its dev carve and decontamination; ``tapt eval`` of an untrained model against the
data's whole train split): a query either of them saw is left out, so a gain there cannot
come from remembered passages. Every file of one system (its seeds) must agree on what it
saw. A system whose files have no ``train_overlap`` (data without a train split, or a file
not written by ``tapt eval``), whose seeds disagree, or that shares fewer than 2 novel
queries with the baseline is skipped with the reason kept, never paired on unlike things.

**A gain only on seen queries**: a system whose overall difference from the baseline is
positive and significant (p (Holm) < 0.05) while on the novel queries it is <= 0 ("all of
the gain comes from seen queries") or not significant ("the gain is not significant on
novel queries: it may come from seen queries alone") gets a note saying so. A gain that is
not significant overall is not attributed to either part: there is no gain to explain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tapt.analysis.significance import CONFIDENCE, Versus, against_baseline, seed_average
from tapt.run_folder.split_records import record_problem


@dataclass
class NovelTests:
    """Per corpus: the systems' tests on the novel queries, and why a system has none."""

    results: dict[str, dict[str, Versus]] = field(default_factory=dict)
    skipped: dict[str, dict[str, str]] = field(default_factory=dict)
    queries: dict[str, int] = field(default_factory=dict)
    """Novel queries of each corpus's baseline (what the tests pair on)."""

    def to_dict(self, corpus: str, name: str) -> dict:
        """``{"novel": test}`` or ``{"novel_skipped": reason}`` of one system (or nothing)."""
        if name in self.results.get(corpus, {}):
            return {"novel": self.results[corpus][name].to_dict()}
        reason = self.skipped.get(corpus, {}).get(name)
        return {"novel_skipped": reason} if reason else {}


def seen_key(cell, name: str) -> tuple | str:
    """What every file of a comparison cell calls seen: ``(train split, decontaminated
    splits, seen ids)``, or the reason there is no one answer (a missing or differing
    section). A malformed section is a ``ValueError`` naming the file and field."""
    keys = set()
    for overlap, source in zip(cell.overlaps, cell.sources, strict=True):
        if overlap is None:
            return (f"{source} has no train_overlap section (its data has no train split, "
                    "or it was not written by tapt eval)")
        problem = record_problem("train_overlap", overlap)
        if problem is not None:
            raise ValueError(f"{source}: field '{problem[0]}': {problem[1]}")
        keys.add((overlap["train_split"], tuple(overlap.get("decontaminated", [])),
                  frozenset(overlap["seen_query_ids"])))
    if len(keys) > 1:
        return f"the seeds of {name} disagree on which queries are seen"
    return keys.pop()


def novel_tests(cells: Mapping[str, Mapping[str, object]], baseline: str, metric: str, *,
                n_resamples: int, seed: int) -> NovelTests:
    """The novel-query tests of every corpus: ``cells[corpus][system]`` are the comparison's
    cells (:class:`tapt.analysis.compare.Cell`) of the systems on that corpus."""
    tests = NovelTests()
    for corpus, here in cells.items():
        if baseline not in here or not any(overlap is not None for cell in here.values()
                                           for overlap in cell.overlaps):
            continue  # no file here records seen queries: nothing to test or to explain
        base_key = seen_key(here[baseline], baseline)
        skipped = tests.skipped.setdefault(corpus, {})
        if isinstance(base_key, str):  # the baseline's seen queries are not known
            skipped.update({name: base_key for name in here if name != baseline})
            continue
        base_seen = base_key[2]
        base_values = {q: v for q, v in seed_average(here[baseline], metric, baseline,
                                                     corpus).items() if q not in base_seen}
        values = {baseline: base_values}
        for name, cell in here.items():
            if name == baseline:
                continue
            key = seen_key(cell, name)
            if isinstance(key, str):
                skipped[name] = key
                continue
            seen = base_seen | key[2]  # novel to both
            own = {q: v for q, v in seed_average(cell, metric, name, corpus).items()
                   if q not in seen}
            if len(own.keys() & base_values.keys()) < 2:
                skipped[name] = f"{name} and {baseline} share fewer than 2 novel queries"
                continue
            values[name] = own
        tests.queries[corpus] = len(base_values)
        if len(values) > 1:
            sources = {name: ", ".join(here[name].sources) for name in values}
            tests.results[corpus] = against_baseline(values, baseline, sources=sources,
                                                     corpus=f"{corpus} (novel queries)",
                                                     n_resamples=n_resamples, seed=seed)
    return tests


def seen_only_notes(overall: Mapping[str, Mapping[str, Versus]], novel: NovelTests,
                    baseline: str) -> list[str]:
    """A note for every system whose significant overall gain over ``baseline`` is <= 0 or
    not significant on the novel queries (see the module docstring); a skipped novel test
    is named once per corpus."""
    notes = []
    for corpus, by in overall.items():
        for name, versus in by.items():
            on_novel = novel.results.get(corpus, {}).get(name)
            if not (versus.significant and versus.test.delta > 0) or on_novel is None:
                continue
            t = on_novel.test
            figures = (f"{t.delta:+.4f} [{t.ci_low:+.4f}, {t.ci_high:+.4f}], p (Holm) "
                       f"{on_novel.p_holm:.4f} on {t.queries} novel queries")
            gain = f"{name}'s gain over {baseline} on {corpus} ({versus.test.delta:+.4f})"
            if t.delta <= 0:
                notes.append(f"{gain} all comes from seen queries (a relevant passage was a "
                             f"training positive): {figures}")
            elif not on_novel.significant:
                notes.append(f"{gain} is not significant on novel queries: {figures}; it may "
                             f"come from seen queries alone (detectable Δ {t.detectable:.4f})")
    for corpus, reasons in novel.skipped.items():
        if reasons:
            notes.append(f"{corpus}: no novel-query test for "
                         + "; ".join(f"{name} ({why})" for name, why in reasons.items()))
    return notes


def novel_header(novel: NovelTests | None, short: str, baseline: str) -> list[str]:
    """The table's novel-query columns: per corpus with a novel test, Δ, CI and p (Holm)."""
    if novel is None:
        return []
    return [header for corpus, by in novel.results.items() if by
            for header in ((f"{corpus} Δ {short} vs {baseline}, novel queries (up to "
                            f"{novel.queries[corpus]})"), f"{corpus} novel {CONFIDENCE:.0%} CI",
                           f"{corpus} novel p (Holm)")]


def novel_cells(novel: NovelTests | None, name: str) -> list[str]:
    """One row's novel-query cells, as :func:`novel_header` orders them."""
    if novel is None:
        return []
    cells = []
    for by in novel.results.values():
        if not by:
            continue
        versus = by.get(name)
        if versus is None:
            cells += ["-", "-", "-"]
            continue
        t = versus.test
        cells += [f"{t.delta:+.4f}", f"[{t.ci_low:+.4f}, {t.ci_high:+.4f}]",
                  f"{versus.p_holm:.4f}"]
    return cells
