"""``tapt cases``: the ranks it shows are those of the result files' stored rankings (and
agree with the per-query MRR@10 tapt eval computed), the top passages are the stored ones."""

from __future__ import annotations

import json
import re

import pytest

from tapt.cli import main
from tapt.data.beir import load_beir_folder


@pytest.fixture(scope="module")
def results(tmp_path_factory, tiny_bert_path, synth_path):
    """A tiny model's and BM25's test results on the synthetic data, with --save-run 100
    and a TREC run file each."""
    folder = tmp_path_factory.mktemp("cases")
    common = ["--data", str(synth_path), "--split", "train", "--save-run", "100", "--quiet"]
    assert main(["eval", "--model", str(tiny_bert_path), *common,
                 "--output", str(folder / "tiny.json"), "--run", str(folder / "tiny.trec")]) == 0
    assert main(["bm25", *common, "--output", str(folder / "bm25.json"),
                 "--run", str(folder / "bm25.trec")]) == 0
    return folder


def shown_ranks(markdown: str) -> dict[str, dict[str, int | None]]:
    """{query id: {system: rank}} from the cases' rank tables."""
    ranks: dict[str, dict[str, int | None]] = {}
    query = None
    for line in markdown.splitlines():
        if found := re.match(r"## Query `([^`]+)`", line):
            query = found.group(1)
            ranks[query] = {}
        elif query and (row := re.match(r"\| (tiny|bm25) \| (\d+|> \d+)[^|]* \|", line)):
            ranks[query][row.group(1)] = None if row.group(2).startswith(">") \
                else int(row.group(2))
    return ranks


def stored_first_relevant(result: dict, qrels: dict, query_id: str) -> int | None:
    ranked = [doc for doc, _ in result["ranking"]["queries"][query_id]]
    return next((i for i, doc in enumerate(ranked, 1) if qrels[query_id].get(doc, 0) >= 3),
                None)


def test_cases_ranks_equal_the_result_files(results, synth_path, tmp_path):
    output = tmp_path / "cases.md"
    assert main(["cases", f"tiny={results / 'tiny.json'}", f"bm25={results / 'bm25.json'}",
                 "--data", str(synth_path), "--top", "1000", "--output", str(output)]) == 0
    markdown = output.read_text()
    # the file carries its digest record: its own digest and the result files' it shows
    from tapt.util.digests import file_record, read_sidecar

    record = read_sidecar(output)
    assert record["sha256"] == file_record(output)["sha256"]
    assert record["results"]["bm25"] == file_record(results / "bm25.json")
    shown = shown_ranks(markdown)
    files = {name: json.loads((results / f"{name}.json").read_text())
             for name in ("tiny", "bm25")}
    qrels = load_beir_folder(synth_path, ["train"]).split("train")
    assert len(shown) == len(qrels) > 20
    disagree = 0
    for query_id, ranks in shown.items():
        assert set(ranks) == {"tiny", "bm25"}
        for name, rank in ranks.items():
            assert rank == stored_first_relevant(files[name], qrels, query_id)
            # the metric tapt eval computed (pytrec_eval) says the same rank
            mrr = files[name]["per_query"][query_id]["mrr@10"]
            assert mrr == pytest.approx(1 / rank if rank is not None and rank <= 10 else 0.0)
        disagree += ranks["tiny"] != ranks["bm25"]
    assert disagree  # the two systems differ somewhere: the ranks were really compared
    order = list(shown)  # by decreasing spread of 1 / rank
    spreads = [abs((1 / shown[q]["tiny"] if shown[q]["tiny"] else 0)
                   - (1 / shown[q]["bm25"] if shown[q]["bm25"] else 0)) for q in order]
    assert spreads == sorted(spreads, reverse=True)


def test_stored_ranking_is_the_trec_run(results):
    """--save-run stores the ranking --run writes (same passages, same order)."""
    stored = json.loads((results / "tiny.json").read_text())["ranking"]["queries"]
    trec: dict[str, list[str]] = {}
    for line in (results / "tiny.trec").read_text().splitlines():
        query_id, _, doc_id, _, _, _ = line.split()
        trec.setdefault(query_id, []).append(doc_id)
    assert {q: [doc for doc, _ in rows] for q, rows in stored.items()} == trec


def test_one_query_shows_the_stored_top_passages(results, synth_path, tmp_path, capsys):
    tiny = json.loads((results / "tiny.json").read_text())
    query_id = min(tiny["ranking"]["queries"])
    assert main(["cases", f"tiny={results / 'tiny.json'}", f"bm25={results / 'bm25.json'}",
                 "--data", str(synth_path), "--query", query_id, "--passages", "4",
                 "--chars", "40"]) == 0
    shown = capsys.readouterr().out
    assert shown.count("## Query `") == 1 and f"## Query `{query_id}`" in shown
    section = shown.split("### tiny: top 4", 1)[1].split("###", 1)[0]
    ids = re.findall(r"^\| \d+ \| `([^`]+)`", section, flags=re.MULTILINE)
    assert ids == [doc for doc, _ in tiny["ranking"]["queries"][query_id][:4]]
    texts = [line.rsplit("|", 2)[1].strip() for line in section.splitlines()
             if line.startswith(("| 1 ", "| 2 "))]
    assert all(len(text) <= 42 for text in texts)  # cut to --chars (plus " …")


def test_result_without_a_stored_ranking_is_refused(synth_path, tmp_path, capsys):
    plain = tmp_path / "plain.json"
    assert main(["bm25", "--data", str(synth_path), "--output", str(plain), "--quiet"]) == 0
    assert main(["cases", str(plain), "--data", str(synth_path)]) == 2
    shown = capsys.readouterr().out
    assert f"{plain}: no 'ranking' section" in shown and "--save-run" in shown


def test_save_run_deeper_than_top_k_is_refused(synth_path, capsys):
    assert main(["bm25", "--data", str(synth_path), "--top-k", "10", "--save-run", "20",
                 "--quiet"]) == 2
    assert "--save-run 20" in capsys.readouterr().out


def test_files_stored_at_other_depths_are_compared_at_the_shallower(results, synth_path,
                                                                      tmp_path, capsys):
    """A relevant passage at rank 40 of a file that stored 100 and absent from one that
    stored 5 is not a disagreement: both are cut to the top 5, and the header says so."""
    shallow = tmp_path / "bm25-5.json"
    assert main(["bm25", "--data", str(synth_path), "--split", "train", "--save-run", "5",
                 "--output", str(shallow), "--quiet"]) == 0
    output = tmp_path / "cases.md"
    assert main(["cases", f"tiny={results / 'tiny.json'}", f"bm25={shallow}",
                 "--data", str(synth_path), "--top", "1000", "--output", str(output)]) == 0
    markdown = output.read_text()
    assert "within the top 5 of every system: tiny's file stored 100" in markdown
    ranks = shown_ranks(markdown)
    assert all(rank is None or rank <= 5 for row in ranks.values() for rank in row.values())
    tiny = json.loads((results / "tiny.json").read_text())
    qrels = load_beir_folder(synth_path, ["train"]).split("train")
    deep = [q for q in ranks if (stored_first_relevant(tiny, qrels, q) or 0) > 5]
    assert deep and all(ranks[q]["tiny"] is None for q in deep)


def test_pipes_and_backticks_in_ids_and_texts_keep_the_table_whole():
    from tapt.analysis.cases import code, cut

    row = f"| 1 | {code('p`1|x')} | 3 | 0.5 | {cut('a | b `c` d', 100)} |"
    unescaped = re.findall(r"(?<!\\)\|", row)
    assert len(unescaped) == 6  # the row's own five cells, nothing from inside them
    assert code("``") == "``` `` ```" and code("plain") == "`plain`"
