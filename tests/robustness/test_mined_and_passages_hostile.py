"""Hostile mined-negatives files (``tapt mine`` output, read by ``tapt train``) and DAPT
passage files (``.txt`` / ``.jsonl``, read by ``tapt dapt``): through the public readers and
through the commands, which must exit with code 2 before creating their run folder."""

from __future__ import annotations

import json

import pytest

import tapt
from robustness.cases import line_expectations
from robustness.conftest import jsonl_lines, write_dataset
from robustness.hostile import VALID, deep_json, line_variants
from tapt.data.mined import read_mined
from tapt.data.passages import collect_passages
from tapt.recipe import DaptDataSettings

LIMIT_PAD = 5000

# Train q1-q3 (the mined file has one line per training query), dev q4, test q5-q6.
SPLITS = {
    "train": b"query-id\tcorpus-id\tscore\nq1\td1\t3\nq2\td3\t3\nq3\td5\t3\n",
    "dev": b"query-id\tcorpus-id\tscore\nq4\td1\t3\n",
    "test": b"query-id\tcorpus-id\tscore\nq5\td3\t3\nq6\td5\t3\n",
}
MINED = [
    {"query_id": "q1", "negatives": [{"id": "d2", "rank": 1, "score": 0.81},
                                     {"id": "d4", "rank": 2, "score": 0.5}], "retriever": "bm25"},
    {"query_id": "q2", "negatives": [{"id": "d4", "rank": 1, "score": 12.5}],
     "retriever": "bm25"},
    {"query_id": "q3", "negatives": [{"id": "d6", "rank": 3, "score": -0.25}],
     "retriever": "bm25", "note": "é"},
]


@pytest.fixture
def mined_data(tmp_path):
    folder = write_dataset(tmp_path / "data", **SPLITS)
    return folder, tapt.load_data(folder)


def train_recipe(tmp_path, data, **extra) -> tuple:
    """A TAPT recipe reading ``data`` and, via ``extra``, the file under test."""
    output = tmp_path / "run"
    lines = ["model: {name: sentence-transformers/all-MiniLM-L6-v2}",
             f"data: {json.dumps({'path': str(data), **extra})}",
             f"output_dir: {output}"]
    path = tmp_path / "recipe.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, output


def dapt_recipe(tmp_path, files) -> tuple:
    output = tmp_path / "run"
    lines = ["model: {name: sentence-transformers/all-MiniLM-L6-v2}",
             f"data: {json.dumps({'files': [str(f) for f in files], 'dev_split': None})}",
             "objective: {name: mlm}", f"output_dir: {output}"]
    path = tmp_path / "dapt.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, output


# --------------------------------------------------------------------------- mined negatives

@pytest.mark.parametrize("variant", list(line_variants(jsonl_lines(MINED), limit_pad=LIMIT_PAD)))
def test_mined_framing_and_encoding(variant, tmp_path, mined_data, reliability_case, quiet_cli,
                                    capsys, line_limit):
    folder, dataset = mined_data
    lines = jsonl_lines(MINED)
    path = tmp_path / "mined.jsonl"
    path.write_bytes(line_variants(lines, limit_pad=LIMIT_PAD)[variant])
    expected, line, field = line_expectations("mined", len(lines))[variant]
    case = reliability_case("mined negatives (JSONL)", variant, expected=expected)
    api = case.api(read_mined, path, dataset, "train")
    if expected == "accepted":
        api.assert_accepted()
        assert read_mined(path, dataset, "train")["q1"] == ["d2", "d4"]
        return
    api.assert_refused(path, line, field)
    recipe, output = train_recipe(tmp_path, folder, mined_negatives=str(path),
                                  negatives_per_query=1)
    case.cli(["train", str(recipe)], capsys, watch=[tmp_path],
             must_not_exist=[output]).assert_refused(path, line, field)


def negative(**fields) -> dict:
    return {"query_id": "q2", "negatives": [{"id": "d4", "rank": 1, "score": 1.0, **fields}]}


def raw(text: str) -> str:
    return text


# (name, line 2 of the mined file, expected, field)
MINED_FIELDS = [
    ("score NaN", raw('{"query_id": "q2", "negatives": [{"id": "d4", "score": NaN}]}'),
     "refused", "negatives[0].score"),
    ("score Infinity", raw('{"query_id": "q2", "negatives": [{"id": "d4", "score": Infinity}]}'),
     "refused", "negatives[0].score"),
    ("score 1e999 (inf once parsed)",
     raw('{"query_id": "q2", "negatives": [{"id": "d4", "score": 1e999}]}'),
     "refused", "negatives[0].score"),
    ("rank a 400-digit integer (no float holds it)",
     raw('{"query_id": "q2", "negatives": [{"id": "d4", "rank": 1' + "0" * 400 + "}]}"),
     "refused", "negatives[0].rank"),
    ("rank a boolean", negative(rank=True), "refused", "negatives[0].rank"),
    ("score a string", negative(score="0.5"), "refused", "negatives[0].score"),
    ("score negative (cosine can be)", negative(score=-3.5), "accepted", None),
    ("rank null (optional)", negative(rank=None), "accepted", None),
    ("negatives null", {"query_id": "q2", "negatives": None}, "refused", "negatives"),
    ("negatives an object", {"query_id": "q2", "negatives": {"id": "d4"}}, "refused",
     "negatives"),
    ("negatives empty (a query with none mined)", {"query_id": "q2", "negatives": []},
     "accepted", None),
    ("a negative that is a bare string", {"query_id": "q2", "negatives": ["d4"]}, "refused",
     "negatives[0]"),
    ("unknown passage id", negative(id="d99"), "refused", "negatives[0].id"),
    ("passage id with a tab", negative(id="d\t4"), "refused", "negatives[0].id"),
    ("the query's anchor as a negative", negative(id="d3"), "refused", "negatives[0].id"),
    ("the same passage twice",
     {"query_id": "q2", "negatives": [{"id": "d4"}, {"id": "d4"}]}, "refused",
     "negatives[1].id"),
    ("query_id missing", {"negatives": []}, "refused", "query_id"),
    ("query_id an integer", {"query_id": 2, "negatives": []}, "refused", "query_id"),
    ("query_id of the dev split", {"query_id": "q4", "negatives": []}, "refused", "query_id"),
    ("unknown query_id", {"query_id": "q99", "negatives": []}, "refused", "query_id"),
    ("a value nested 100,000 deep",
     raw('{"query_id": "q2", "negatives": ' + deep_json().decode() + "}"), "refused", None),
]


@pytest.mark.parametrize("name,record,expected,field", MINED_FIELDS,
                         ids=[c[0] for c in MINED_FIELDS])
def test_mined_fields(name, record, expected, field, tmp_path, mined_data, reliability_case):
    _, dataset = mined_data
    records = [MINED[0], record, MINED[2]]
    path = tmp_path / "mined.jsonl"
    path.write_bytes(b"\n".join(jsonl_lines(records)) + b"\n")
    case = reliability_case("mined negatives (JSONL)", name, expected=expected)
    outcome = case.api(read_mined, path, dataset, "train")
    if expected == "accepted":
        outcome.assert_accepted()
    else:
        outcome.assert_refused(path, 2, field)


# --------------------------------------------------------------------------- DAPT passages

TXT = [b"The primer uses a bisphenol epoxy binder.", b"The topcoat uses an acrylic binder.",
       b"The sealant cures with an isocyanate hardener (\xc3\xa9)."]
PASSAGES = [{"title": "Primer", "text": "The primer uses an epoxy binder."},
            {"text": "The topcoat uses an acrylic binder."},
            {"title": "Sealant", "text": "The sealant cures with an isocyanate (é)."}]


@pytest.mark.parametrize("variant", list(line_variants(TXT, limit_pad=LIMIT_PAD)))
@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_passage_files(suffix, variant, tmp_path, reliability_case, quiet_cli, capsys,
                       line_limit):
    lines = TXT if suffix == ".txt" else jsonl_lines(PASSAGES)
    path = tmp_path / f"passages{suffix}"
    path.write_bytes(line_variants(lines, limit_pad=LIMIT_PAD)[variant])
    kind = "txt" if suffix == ".txt" else "passages"
    expected, line, field = line_expectations(kind, len(lines))[variant]
    case = reliability_case(f"DAPT passages ({suffix})", variant, expected=expected)
    api = case.api(collect_passages, DaptDataSettings(files=[str(path)]))
    if expected == "accepted":
        api.assert_accepted()
        texts = collect_passages(DaptDataSettings(files=[str(path)]))
        assert all("\r" not in t and "\ufeff" not in t for t in texts), texts
        return
    api.assert_refused(path, line, field)
    recipe, output = dapt_recipe(tmp_path, [path])
    case.cli(["dapt", str(recipe)], capsys, watch=[tmp_path],
             must_not_exist=[output]).assert_refused(path, line, field)


def _passages_folder(path):
    path.mkdir()


PASSAGE_FILES = [
    ("file missing", "passages.txt", None),
    ("unknown suffix (.csv)", "passages.csv", b"a passage\n"),
    ("upper-case suffix (.TXT)", "passages.TXT", b"a passage\n"),
    ("a folder named passages.txt", "passages.txt", _passages_folder),
    ("a FIFO named passages.txt", "passages.txt", "fifo"),
    ("a symlink loop named passages.txt", "passages.txt", "loop"),
]


@pytest.mark.parametrize("name,filename,content", PASSAGE_FILES,
                         ids=[c[0] for c in PASSAGE_FILES])
def test_passage_file_kinds(name, filename, content, tmp_path, reliability_case, quiet_cli,
                            capsys):
    import os

    path = tmp_path / filename
    if callable(content):
        content(path)
    elif content == "fifo":
        os.mkfifo(path)
    elif content == "loop":
        os.symlink(path, path)
    elif content is not None:
        path.write_bytes(content)
    case = reliability_case("DAPT passages (.txt)", name)
    # the schema refuses these too (tested with the CLI below): build the settings without it,
    # so the reader's own refusal is what the API row tests
    unchecked = DaptDataSettings.model_construct(files=[str(path)])
    case.api(collect_passages, unchecked, timeout=10).assert_refused(path)
    recipe, output = dapt_recipe(tmp_path, [path])
    case.cli(["dapt", str(recipe)], capsys, timeout=10, watch=[tmp_path],
             must_not_exist=[output]).assert_refused(path)


def test_passages_text_kept_exactly(tmp_path):
    """Accepted framing changes nothing in the passages (BOM and CR are not text)."""
    expected = collect_passages(DaptDataSettings(files=[str(_write(tmp_path, "a.txt", TXT))]))
    for variant in ("UTF-8 BOM and CRLF line ends", "no newline at the end of the file"):
        data = line_variants(TXT)[variant]
        got = collect_passages(DaptDataSettings(files=[str(_write(tmp_path, "b.txt", data))]))
        assert got == expected, variant
    assert VALID in line_variants(TXT)


def _write(folder, name, data):
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else b"\n".join(data) + b"\n")
    return path
