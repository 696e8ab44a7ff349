"""The generator's vocabulary as data (``tapt/data/synth/tables/*.json``): the output of
``tapt data synth`` is byte-identical to the generator's before its tables moved out of code,
the tables ship as package data, and a malformed table is refused with its file and field.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

import tapt
from tapt.cli import main
from tapt.data.synth import DOMAINS, ROLE_SYNONYMS, VocabularyError, build, vocabulary

GOLDEN = {
    ("structured", 0, "small"): {
        "corpus.jsonl": "f5a04db9f58d75c8d2c0b6ab23a1dae167e35066bdca96fbf01d8c88487a4125",
        "queries.jsonl": "cf8baf8114037274fb302c969c6279c0815bcdfed1768f1e74736c9af3ba5c1f",
        "qrels/train.tsv": "46a0d58a8b52ef3ae62f465d037a60f723de90ff276fba5916465b124e29e767",
        "qrels/dev.tsv": "fb60e88d5743e4e72811fe17a4f52a2bfd1d3654977d24586cdcd9d480de6610",
        "qrels/test.tsv": "94e9a8aef4298783f53a9d7410b735c312739dc2f2f71221d43dfe55efd783ef",
    },
    ("structured", 7, "small"): {
        "corpus.jsonl": "ca332010f4e34e28c3fa8dbb488befae7138020c6abc484d25c04d64e7c1a4e9",
        "queries.jsonl": "dd03191bd309df495cbc738f26eece4fa203e536c53a35aa7e9db8b65c896c98",
        "qrels/train.tsv": "2a1c23ce1275f60463b54f83ca097f26902d76d1c7977d46232da0c5cbd58a44",
        "qrels/dev.tsv": "c04c68af93e053ba350b4d732c1de726ae9d017958cb08bab2d1b3f6e343e23d",
        "qrels/test.tsv": "d7c262cb55b1dcee0abc4a04962ea18ca7216088c83f23ae2a54683634b7f423",
    },
    ("random", 0, "small"): {
        "corpus.jsonl": "e47e5707e13557b35f16a379c32938d2c331aac15181d73f21eb7d751f3f09fa",
        "queries.jsonl": "b16c64d8a48c407522ef49820a7994434e40c6af0d1b57b547b0cf33747a5632",
        "qrels/train.tsv": "8de8f0be16ba2c497ad290bb70dad0ab4cfc502b1fbe7698543c6d2691f0d740",
        "qrels/dev.tsv": "1c95486a2debe8b2586d50a006c01e72df653bfaf76f3cf1f1f1291aeb1b3d0e",
        "qrels/test.tsv": "79b54b300745bbe3f0d84f62559c42ff189201c5b721fa11819c7d63ddbc2eaf",
    },
    ("random", 7, "small"): {
        "corpus.jsonl": "ec958bf50b58f851fb8fd9928c0f98c949e4455df9dfedee8244b26c50febc10",
        "queries.jsonl": "46bbf6cd8dbc94246675dbf15525edd1e827ecb43f721309f889e4b4078454a3",
        "qrels/train.tsv": "922b876075fa3ed5cc7c951111defd681b00381b0581f437d6f1cb92c374f8ff",
        "qrels/dev.tsv": "f1b59717a9f345dddae2249eeb04d0b8894e8ea5bd7775d6a0f53802978988d5",
        "qrels/test.tsv": "5333df04a85d51cf698da54b6a11b552107a76b2a50ccf809b15f0fe9a99d235",
    },
    ("structured", 0, "default"): {
        "corpus.jsonl": "9a1af3ca866392a53ed69efbcc3a41d60c400fafb390bf891c5d9d3345f8dffc",
        "queries.jsonl": "c18ea1b80b43b8c1a247ebc4786610bdbfd61d43726d610ce60ac03fccb7cb6c",
        "qrels/train.tsv": "bb65e1fd20b952ca3d9de2319367cf88d566bedf22935f39066203f837038b38",
        "qrels/dev.tsv": "7672ce5b98c906e7b68e05c5fb515e4fe2deaf031a3273231e7a71eac8a50534",
        "qrels/test.tsv": "07bb6d9c9e9e819774df438f7235b9a64b2771add25a934871b88cecba5f71a1",
    },
    ("structured", 7, "default"): {
        "corpus.jsonl": "e772010ad10bfeda8ebcba9a60524411b3c23b1cc35c75e4cda382a4dc0cd490",
        "queries.jsonl": "9b04fbcef9a1758567e279bb0c26c624a6c84599d0646bd7d17ff0a227620279",
        "qrels/train.tsv": "1ec072e39563d1db4b94981e53cec73e1d5e42243283d8afbeb837865ea49c7f",
        "qrels/dev.tsv": "f30820edebe0a6750d21d0e900bbe9819c2cc085d1ac117d7a5407b9beddd41c",
        "qrels/test.tsv": "bcdaf91496ab2b0bb9e6b0fb263f0738aff22ab3aebbe379015847b88e823a8c",
    },
    ("random", 0, "default"): {
        "corpus.jsonl": "155ed20872fa044c65359fa170d285c128650b9cd67d88654c7be287fbc9c338",
        "queries.jsonl": "3006f2310455ee8d7e7d08377d95b6cd60de660e0069b85f571992b0eabd58a0",
        "qrels/train.tsv": "4635ed813186d482e1f5b1ba557e67c709663a4b342b2dca233ca4f7a37ced1f",
        "qrels/dev.tsv": "801d12cf7c9ef1b9c24311e0cffb67b3f1179a5dd561dbf630310f98483eb775",
        "qrels/test.tsv": "c98a3d5a0ad241fd20123d4e31c29bc3fa09f0207908efdc42eaf9d6f83b9e44",
    },
    ("random", 7, "default"): {
        "corpus.jsonl": "549a090a3895168b9cefc6683ee63fdd27ffddb5f866ad17a936aac71b4723c8",
        "queries.jsonl": "b0eda0cd3dc7661a6aee2d0c1143a17fbf176f40543924067dccd18ca0c24841",
        "qrels/train.tsv": "4f468d561fb1af962b5d6feb5d1f0d1b67942be670dd6410a2294caa45f3f621",
        "qrels/dev.tsv": "50432c7c23e13537d6fad13756860a05fd2c696e44685fe91cb37b29c66d983e",
        "qrels/test.tsv": "d64925ae4c843daedbc904ff55ac5619be134476e7e9d137f051305029a56b58",
    },
}
"""SHA-256 of every file ``tapt data synth OUT --seed S --variant V`` writes, at the default
size (600 queries, 2,000 distractors) and at ``--queries 60 --distractors 120`` ("small").
Made with the single-module generator (``tapt/data/synth.py``, tables in code) at commit
e352bf2b421f5788cb4586917f25ab68ff25ea77, before its tables moved to
``tapt/data/synth/tables/``: ``.venv/bin/python -m tapt data synth OUT ...`` then
``sha256sum``. Changing a table or the logic's draws breaks these on purpose.

Since queries carry group labels (``"labels": {"mode": ..., "domain": ...}``, for ``tapt eval
--by``), ``queries.jsonl``'s hash is that of the file with the ``labels`` field removed from
each line and the line re-serialized as ``write_beir`` writes it (:func:`draws`): the labels
are no draw of their own (they restate the mode and domain drawn for the query), so the ids
and texts must stay byte-identical, and the labels are checked apart against what
:func:`build` drew for each query."""

SIZES = {"small": ["--queries", "60", "--distractors", "120"], "default": []}
BUILD_SIZES = {"small": {"queries": 60, "distractors": 120}, "default": {}}
SYNTH_FILES = ("domains.json", "lexicon.json", "templates.json")
RESOURCES = Path(tapt.__file__).parent / "data" / "synth" / "tables"


@pytest.mark.parametrize(("variant", "seed", "size"), list(GOLDEN))
def test_tapt_data_synth_is_byte_identical_to_the_tables_in_code(tmp_path, variant, seed, size):
    """The draws are byte-identical (``queries.jsonl`` without its labels, see
    :data:`GOLDEN`), and each query's labels are the mode and domain the generator drew."""
    out = tmp_path / "ds"
    argv = ["data", "synth", str(out), "--seed", str(seed), "--variant", variant, *SIZES[size]]
    assert main(argv) == 0
    written = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in sorted(out.rglob("*")) if p.is_file()}
    written["queries.jsonl"] = hashlib.sha256(draws(out / "queries.jsonl")).hexdigest()
    assert written == GOLDEN[(variant, seed, size)]
    drawn = build(variant=variant, seed=seed, **BUILD_SIZES[size]).queries
    labels = {}
    for line in (out / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        assert list(record) == ["_id", "text", "labels"]
        labels[record["_id"]] = record["labels"]
    assert labels == {q.query_id: {"mode": q.mode, "domain": q.domain} for q in drawn.values()}


def draws(path: Path) -> bytes:
    """``queries.jsonl`` without the ``labels`` field of each line, every line re-serialized
    as ``write_beir`` writes a query (``{"_id", "text"}``, ``ensure_ascii=False``)."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        record.pop("labels", None)
        lines.append(json.dumps(record, ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


def test_the_tables_are_package_data_and_the_logic_modules_are_small():
    assert Path(str(vocabulary.RESOURCES)) == RESOURCES
    assert all((RESOURCES / name).is_file() for name in SYNTH_FILES)
    pyproject = (Path(tapt.__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    assert '"data/synth/tables/*.json"' in pyproject  # package data, or a wheel lacks them
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines())
             for p in (Path(tapt.__file__).parent / "data" / "synth").glob("*.py")}
    assert max(sizes.values()) <= 500, sizes
    assert len(DOMAINS) == 7 and "binder" in ROLE_SYNONYMS


def _copy_tables(tmp_path: Path) -> Path:
    folder = tmp_path / "synth"
    shutil.copytree(RESOURCES, folder)
    return folder


def _edit(folder: Path, name: str, edit) -> None:
    path = folder / name
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def test_a_copy_of_the_tables_loads_to_the_same_vocabulary(tmp_path):
    folder = _copy_tables(tmp_path)
    roles, aliases, amounts = vocabulary.load_lexicon(folder)
    assert (roles, aliases, amounts) == (vocabulary.ROLE_SYNONYMS, vocabulary.CHEMICAL_ALIASES,
                                         vocabulary.AMOUNTS)
    domains, shares = vocabulary.load_domains(roles, folder)
    assert list(domains) == list(DOMAINS) and shares == vocabulary.DOMAIN_WEIGHTS
    assert [d.conditions for d in domains.values()] == [d.conditions for d in DOMAINS.values()]
    assert vocabulary.load_templates(folder) == (vocabulary.QUERY_TEMPLATES,
                                                 vocabulary.PASSAGE_TEMPLATES)


def test_a_role_without_synonyms_is_refused_with_its_file_and_field(tmp_path):
    folder = _copy_tables(tmp_path)
    _edit(folder, "domains.json",
          lambda d: d["domains"][0]["chemicals"].update({"talc": ["filler", "glue"]}))
    with pytest.raises(VocabularyError, match=r"domains\.json: field "
                                              r"'domains\[0\]\.chemicals\.talc': role 'glue'"):
        vocabulary.load_domains(vocabulary.ROLE_SYNONYMS, folder)


def test_a_placeholder_without_a_slot_is_refused_with_its_file_and_field(tmp_path):
    folder = _copy_tables(tmp_path)
    _edit(folder, "domains.json",
          lambda d: d["domains"][1]["properties"][0].update({"pattern": "a {0} of {1}"}))
    with pytest.raises(VocabularyError,
                       match=r"domains\.json: field 'domains\[1\]\.properties\[0\]'"):
        vocabulary.load_domains(vocabulary.ROLE_SYNONYMS, folder)


def test_a_duplicate_key_and_a_missing_field_are_refused(tmp_path):
    folder = _copy_tables(tmp_path)
    path = folder / "lexicon.json"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace('"amounts": {', '"amounts": {\n    "solvent": [1.0, 2.0],', 1),
                    encoding="utf-8")
    with pytest.raises(VocabularyError, match=r"lexicon\.json: field 'solvent': duplicate key"):
        vocabulary.load_lexicon(folder)
    _edit(folder, "templates.json", lambda d: d["passages"].pop("openers"))
    with pytest.raises(VocabularyError, match=r"templates\.json: field 'passages'"):
        vocabulary.load_templates(folder)
