"""Values refused where they are given (recipe values, numeric flags, output paths): a
recipe value that can be checked without loading anything is checked by the
schema (``tapt validate``, ``load_recipe``), naming the key; every numeric flag of every
command goes through one of ``tapt.cli.number_types.NUMBER_TYPES``; the library functions
behind the flags refuse the same values naming the parameter; and every output path is
checked before a command loads its data or model."""

from __future__ import annotations

import argparse
import math
import typing
from pathlib import Path

import pytest
import yaml

from tapt.cli import build_parser, number_types
from tapt.cli import options as cli_options
from tapt.recipe import DaptRecipe, Recipe, RecipeError, Section, annotation_types, load_recipe

AREA = "validation"


def mark(reader: str, fault: str, behaviour: str):
    return pytest.mark.reliability(area=AREA, reader=reader, fault=fault, behaviour=behaviour)


def case(id: str, *values, reader: str, fault: str, behaviour: str):
    """A parameter set that is its own row of docs/reliability.md."""
    return pytest.param(*values, id=id, marks=mark(reader, fault, behaviour))


# --------------------------------------------------------------------------- recipes

BASE = {"model": {"name": "m"}, "data": {"path": "d"}, "output_dir": "run"}
DAPT_BASE = {**BASE, "objective": {"name": "mlm"}}


def write(tmp_path: Path, data: dict, name: str = "recipe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def refused_key(tmp_path: Path, data: dict, overrides: list[str], key: str,
                kind: str = "tapt") -> str:
    path = write(tmp_path, data)
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, overrides, kind=kind)
    message = str(caught.value)
    assert str(path) in message and f"  {key}:" in message, message
    return message


LATE = "the schema accepts it, recipe.yaml is written, then numpy / sentence-transformers fails"
REFUSED = "refused by the schema (tapt validate, load_recipe), naming the key"


@pytest.mark.parametrize("override,key,says", [
    case("seed -1", "training.seed=-1", "training.seed", "in [0, 4294967295]",
         reader="recipe training.seed", fault=f"training.seed=-1 ({LATE})",
         behaviour=f"seeds outside numpy's [0, 2**32-1] {REFUSED}"),
    case("seed 2**32", "training.seed=4294967296", "training.seed", "in [0, 4294967295]",
         reader="recipe training.seed", fault="training.seed=4294967296",
         behaviour=f"seeds outside numpy's [0, 2**32-1] {REFUSED}"),
    pytest.param("data.dev_seed=-3", "data.dev_seed", "in [0, 4294967295]",
                 id="dev_seed -3"),
    case("model.name /nonexistent", "model.name=/nonexistent", "model.name", "no such folder",
         reader="recipe model.name", fault=f"model.name=/nonexistent ({LATE})",
         behaviour="a value written as a path (/, ./, ../, ~) that does not exist is "
                   f"{REFUSED}"),
    case("model.name empty", "model.name=", "model.name", "must not be empty",
         reader="recipe model.name", fault="model.name= (AttributeError, exit 1)",
         behaviour=f"an empty name or path {REFUSED}"),
    pytest.param("model.name='   '", "model.name", "must not be empty", id="model.name blank"),
    pytest.param("output_dir=", "output_dir", "must not be empty", id="output_dir empty"),
    pytest.param("data.path=", "data.path", "must not be empty", id="data.path empty"),
    pytest.param("data.path=./no-such-folder", "data.path", "no such folder",
                 id="data.path missing"),
    case("mined missing", "data.mined_negatives=./no-such.jsonl", "data.mined_negatives",
         "no such file", reader="recipe data.mined_negatives",
         fault="data.mined_negatives=./no-such.jsonl",
         behaviour=f"a mined-negatives path that does not exist {REFUSED}"),
    case("matryoshka empty", "loss.matryoshka_dims=[]", "loss.matryoshka_dims",
         "at least one", reader="recipe loss.matryoshka_dims",
         fault="loss.matryoshka_dims=[] (MatryoshkaLoss raises after loading)",
         behaviour="dimensions: at least one, each > 0, none twice; " + REFUSED),
    pytest.param("loss.matryoshka_dims=[128, 128]", "loss.matryoshka_dims", "twice",
                 id="matryoshka twice"),
    pytest.param("loss.matryoshka_dims=[128, 0]", "loss.matryoshka_dims", "in [1, 65536]",
                 id="matryoshka zero"),
    pytest.param("loss.matryoshka_weights=[1, -1]", "loss.matryoshka_weights", "in (0, 1000]",
                 id="matryoshka weight"),
    pytest.param("training.max_steps=0", "training.max_steps", "-1", id="max_steps 0"),
    pytest.param("model.lora.target_modules=[]", "model.lora.target_modules", "empty list",
                 id="lora no modules"),
    pytest.param("tracking.project=", "tracking.project", "must not be empty",
                 id="tracking project empty"),
])
def test_values_that_fail_after_loading_are_refused_by_the_schema(override, key, says,
                                                                  tmp_path):
    message = refused_key(tmp_path, BASE, [override], key)
    assert says in message, message


def test_output_dir_that_is_a_file_is_refused(tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("x", encoding="utf-8")
    message = refused_key(tmp_path, BASE, [f"output_dir={taken}"], "output_dir")
    assert "is a file" in message


def test_dapt_files_must_be_passage_files_and_exist(tmp_path):
    data = {**DAPT_BASE, "data": {"files": ["./corpus.csv"]}}
    assert ".jsonl or .txt" in refused_key(tmp_path, data, [], "data.files", kind="dapt")
    data = {**DAPT_BASE, "data": {"files": [str(tmp_path / "missing.txt")]}}
    assert "no such file" in refused_key(tmp_path, data, [], "data.files", kind="dapt")


@mark("recipe (any key)", "a path written with ~ (nothing downstream expands it)",
      "expanded when the recipe is loaded, then checked like any other path")
def test_home_paths_are_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "model").mkdir()
    recipe = load_recipe(write(tmp_path, BASE), ["model.name=~/model", "output_dir=~/run"])
    assert (recipe.model.name, recipe.output_dir) == (str(tmp_path / "model"),
                                                      str(tmp_path / "run"))


@pytest.mark.parametrize("override", [
    "data.path=data/quickstart",           # tapt data synth writes it later
    "model.name=runs/dapt-quickstart/final",  # tapt dapt writes it later
    "data.mined_negatives=runs/mined/x.jsonl data.negatives_per_query=3",  # tapt mine, later
    "training.seed=4294967295",
    "model.query_prompt=",                 # an empty prompt means none
    "training.epochs=1",                   # an int for a float
    "training.per_device_batch_size=8.0",  # an integral float for an int
    "training.learning_rate=1e-5",         # YAML 1.1 reads a string
])
def test_valid_values_still_load(override, tmp_path):
    load_recipe(write(tmp_path, BASE), override.split(" "))


def test_validate_command_refuses_a_bad_path_naming_the_key(tmp_path, quiet_cli, capsys):
    path = write(tmp_path, {**BASE, "model": {"name": "/nonexistent/model"}})
    assert quiet_cli.main(["validate", str(path)]) == 2
    printed = capsys.readouterr().out
    assert "model.name:" in printed and "/nonexistent/model" in printed


@mark("tapt train", "tapt train r.yaml training.seed=-1 (recipe.yaml written, then numpy "
      "fails; the corrected rerun is refused)",
      "refused with exit 2 before the run folder exists")
def test_train_refuses_a_bad_seed_before_the_run_folder_exists(tmp_path, reliability_case,
                                                               quiet_cli, capsys):
    path = write(tmp_path, {**BASE, "output_dir": str(tmp_path / "run")})
    case = reliability_case("tapt train", "training.seed=-1", area=AREA)
    case.cli(["train", str(path), "training.seed=-1"], capsys, watch=[tmp_path],
             must_not_exist=[tmp_path / "run"]).assert_refused(contains="training.seed")


# --- booleans are not numbers (defect 12), for every numeric field --------------------------

def leaf_fields(model: type[Section], prefix: str = ""):
    """(dotted key, annotation, may be empty) of every field, through sub-sections."""
    for name, info in model.model_fields.items():
        sections = [leaf for leaf in annotation_types(info.annotation)
                    if isinstance(leaf, type) and issubclass(leaf, Section)]
        if sections:
            yield from leaf_fields(sections[0], f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", info.annotation, name in model.may_be_empty


def is_list(annotation) -> bool:
    return any(typing.get_origin(arg) is list
               for arg in (annotation, *typing.get_args(annotation)))


def numeric_keys(schema) -> list[tuple[str, bool]]:
    """(key, takes a list) of every int/float field."""
    return [(key, is_list(annotation)) for key, annotation, _ in leaf_fields(schema)
            if annotation_types(annotation) & {int, float}
            and bool not in annotation_types(annotation)]


def text_keys(schema) -> list[tuple[str, bool]]:
    return [(key, is_list(annotation)) for key, annotation, empty_ok in leaf_fields(schema)
            if str in annotation_types(annotation) and not empty_ok]


def test_the_walk_finds_the_fields():
    numeric = {key for key, _ in numeric_keys(Recipe)}
    assert {"training.per_device_batch_size", "training.epochs", "loss.matryoshka_dims",
            "model.lora.r", "eval.top_k", "training.seed"} <= numeric
    assert {"objective.mlm_probability", "chunking.max_length"} <= \
        {key for key, _ in numeric_keys(DaptRecipe)}
    text = {key for key, _ in text_keys(Recipe)}
    assert {"model.name", "data.path", "output_dir", "hub.license"} <= text
    assert "model.query_prompt" not in text


def set_key(data: dict, key: str, value) -> dict:
    data = yaml.safe_load(yaml.safe_dump(data))
    node = data
    *sections, last = key.split(".")
    for section in sections:
        node = node.setdefault(section, {})
    node[last] = value
    return data


@mark("recipe (every int/float key)", "training.per_device_batch_size=true loads as 1, "
      "training.epochs=true as 1.0 (in a file and as an override)",
      "a boolean for a number refused naming the key; 1 for a float and 2.0 for an int load")
@pytest.mark.parametrize("schema,base,kind", [(Recipe, BASE, "tapt"),
                                              (DaptRecipe, DAPT_BASE, "dapt")],
                         ids=["tapt", "dapt"])
def test_no_numeric_key_takes_a_boolean(schema, base, kind, tmp_path):
    for key, listed in numeric_keys(schema):
        override = f"{key}=[true]" if listed else f"{key}=true"
        message = refused_key(tmp_path, base, [override], key, kind=kind)
        assert "boolean" in message or "got True" in message, (key, message)
        in_file = set_key(base, key, [True] if listed else True)
        refused_key(tmp_path, in_file, [], key, kind=kind)


@pytest.mark.parametrize("schema,base,kind", [(Recipe, BASE, "tapt"),
                                              (DaptRecipe, DAPT_BASE, "dapt")],
                         ids=["tapt", "dapt"])
def test_no_text_key_is_empty(schema, base, kind, tmp_path):
    for key, listed in text_keys(schema):
        override = f"{key}=['']" if listed else f"{key}=' '"
        message = refused_key(tmp_path, base, [override], key, kind=kind)
        assert "must not be empty" in message, (key, message)


def test_a_number_is_not_a_boolean(tmp_path):
    refused_key(tmp_path, BASE, ["training.bf16=1"], "training.bf16")


# --------------------------------------------------------------------------- CLI numbers

def subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) for the parser and every subparser below it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from subparsers(child, (*path, name))


def numeric_actions():
    for path, parser in subparsers(build_parser()):
        for action in parser._actions:
            if action.type in number_types.NUMBER_TYPES:
                yield path, parser, action


def test_every_numeric_flag_uses_a_shared_number_type():
    seen = 0
    for path, parser in subparsers(build_parser()):
        for action in parser._actions:
            assert action.type in (None, Path, *number_types.NUMBER_TYPES), (
                f"tapt {' '.join(path)} {action.option_strings or action.dest}: "
                f"type={action.type!r} is not one of number_types.NUMBER_TYPES")
            seen += action.type in number_types.NUMBER_TYPES
    assert seen >= 30  # the walk does reach every command


POSITIVE = (number_types.positive_int, number_types.positive_float, number_types.open_fraction)


@mark("every numeric flag of every command", "0, -5, nan, inf, -inf, true, 1e999 or '' "
      "(an OverflowError traceback, a silently ignored 0, nan scoring every metric 0.0)",
      "refused by argparse with exit 2, naming the flag and its range")
def test_every_numeric_flag_refuses_bad_values_naming_the_flag(capsys):
    checked = 0
    for path, parser, action in numeric_actions():
        flag = action.option_strings[0] if action.option_strings else None
        if flag is None:
            continue
        bad = ["nan", "inf", "-inf", "true", "1e999", "", "abc"]
        if action.type is not number_types.finite_float:
            bad.append("-5")
        if action.type in POSITIVE:
            bad.append("0")
        for value in bad:
            with pytest.raises(SystemExit) as exited:
                parser.parse_args([f"{flag}={value}"])
            assert exited.value.code == 2
            err = capsys.readouterr().err
            assert f"argument {flag}" in err and "must be" in err, (path, flag, value, err)
            checked += 1
    assert checked > 200


@pytest.mark.parametrize("argv,flag", [
    case("max-seq-length -5", ["eval", "--max-seq-length", "-5"], "--max-seq-length",
         reader="tapt eval --max-seq-length", fault="--max-seq-length -5 (OverflowError)",
         behaviour="refused by argparse, exit 2, naming the flag"),
    case("max-seq-length 0", ["eval", "--max-seq-length", "0"], "--max-seq-length",
         reader="tapt eval --max-seq-length", fault="--max-seq-length 0 (silently ignored)",
         behaviour="refused by argparse, exit 2, naming the flag"),
    case("truncate-dim 0", ["eval", "--truncate-dim", "0"], "--truncate-dim",
         reader="tapt eval --truncate-dim", fault="--truncate-dim 0 (silently ignored)",
         behaviour="refused by argparse, exit 2, naming the flag"),
    case("k1 nan", ["bm25", "--k1", "nan"], "--k1", reader="tapt bm25 --k1",
         fault="--k1 nan (exit 0, every metric 0.0000)",
         behaviour="refused by argparse, exit 2, naming the flag"),
    case("rrf-k nan", ["eval", "--hybrid", "bm25", "--rrf-k", "nan"], "--rrf-k",
         reader="tapt eval --rrf-k", fault="--hybrid bm25 --rrf-k nan (nDCG@10 0.4392, "
         "not 0.8770)", behaviour="refused by argparse, exit 2, naming the flag"),
    pytest.param(["eval", "--hybrid", "bm25", "--rrf-k", "inf"], "--rrf-k", id="rrf-k inf"),
    case("batch-size 0", ["eval", "--batch-size", "0"], "--batch-size",
         reader="tapt eval --batch-size", fault="--batch-size 0 (an error naming no flag)",
         behaviour="refused by argparse, exit 2, naming the flag"),
    pytest.param(["mine", "--retriever", "bm25", "--margin", "nan"], "--margin",
                 id="margin nan"),
])
def test_the_reported_flags_are_refused(argv, flag, tmp_path, capsys):
    from tapt.cli import main

    command, *rest = argv
    full = [command, *rest, "--data", str(tmp_path / "data")]
    if command == "eval":
        full += ["--model", "m"]
    if command == "mine":
        full += ["--output", str(tmp_path / "m.jsonl")]
    with pytest.raises(SystemExit) as exited:
        main(full)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err and "must be" in err, err


def test_margin_none_still_turns_the_filter_off():
    assert number_types.margin_or_none("none") is None
    assert number_types.margin_or_none("0.1") == pytest.approx(0.1)


# --- the library refuses the same values, naming the parameter ------------------------------

class _Encoder:
    name, embedding_dim, normalize = "stub", 4, True


def _hybrid(**kwargs):
    from tapt.retrieval.hybrid import HybridRetriever

    return HybridRetriever(object(), object(), **kwargs)


def _library_calls():
    from tapt.analysis.embed import ModelOptions
    from tapt.analysis.geometry import anisotropy
    from tapt.analysis.probes import fixed_split
    from tapt.encoders.base import TruncatedEncoder
    from tapt.encoders.loading import ModelSpec
    from tapt.retrieval.bm25 import BM25Retriever
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.hybrid import cut, linear_fusion, reciprocal_rank_fusion
    from tapt.retrieval.mining import MiningSettings
    from tapt.retrieval.search import ExactIndex

    nan, inf = math.nan, math.inf
    return [
        ("k1", lambda: BM25Retriever(k1=nan)),
        ("k1", lambda: BM25Retriever(k1=-1.0)),
        ("b", lambda: BM25Retriever(b=1.5)),
        ("top_k", lambda: BM25Retriever(top_k=0)),
        ("rrf_k", lambda: _hybrid(rrf_k=nan)),
        ("rrf_k", lambda: _hybrid(rrf_k=inf)),
        ("alpha", lambda: _hybrid(fusion="linear", alpha=nan)),
        ("top_k", lambda: _hybrid(top_k=True)),
        ("k (the RRF constant)", lambda: reciprocal_rank_fusion([], k=nan)),
        ("alpha", lambda: linear_fusion({}, {}, alpha=inf)),
        ("top_k", lambda: cut({}, 0)),
        ("batch_size", lambda: DenseRetriever(_Encoder(), batch_size=0)),
        ("top_k", lambda: DenseRetriever(_Encoder(), top_k=-5)),
        ("top_k", lambda: ExactIndex(4).search(None, top_k=nan)),
        ("truncate dim", lambda: TruncatedEncoder(_Encoder(), True)),
        ("max_seq_length", lambda: ModelSpec("m", max_seq_length=-5)),
        ("max_seq_length", lambda: ModelSpec("m", max_seq_length=0)),
        ("name_or_path", lambda: ModelSpec("")),
        ("margin", lambda: MiningSettings(margin=nan).check()),
        ("seed", lambda: MiningSettings(seed=-1).check()),
        ("batch_size", lambda: ModelOptions(batch_size=0)),
        ("max_tokens_per_batch", lambda: ModelOptions(max_tokens_per_batch=0)),
        ("pairs", lambda: anisotropy(None, pairs=0)),
        ("test_size", lambda: fixed_split([], {}, test_size=1.0)),
    ]


@mark("library functions behind the flags (BM25Retriever, HybridRetriever, DenseRetriever, "
      "ModelSpec, MiningSettings, analyses)", "k1=nan, rrf_k=inf, batch_size=0, "
      "max_seq_length=-5, top_k=True, ...", "ValueError from tapt naming the parameter")
def test_library_functions_refuse_the_same_values_naming_the_parameter():
    for name, call in _library_calls():
        with pytest.raises(ValueError) as caught:
            call()
            pytest.fail(f"{name}: accepted")
        assert str(caught.value).startswith(name), (name, str(caught.value))


def test_api_encoder_refuses_bad_limits(monkeypatch):
    from tapt.encoders.api import load_api_encoder

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for kwargs, name in [({"requests_per_minute": math.nan}, "requests_per_minute"),
                         ({"tokens_per_minute": -1.0}, "tokens_per_minute"),
                         ({"concurrency": 0}, "concurrency"),
                         ({"dimensions": 0}, "dimensions")]:
        with pytest.raises(ValueError, match=name):
            load_api_encoder("openai:text-embedding-3-small", cache=False, **kwargs)


# --------------------------------------------------------------------------- outputs

def _no_load(*args, **kwargs):
    raise AssertionError("the data was loaded before the output paths were checked")


def _commands(tmp: Path, output: str) -> dict[str, list[str]]:
    data = str(tmp / "data")
    return {
        "eval --output": ["eval", "--model", "m", "--data", data, "--output", output],
        "eval --run": ["eval", "--model", "m", "--data", data, "--run", output],
        "bm25 --output": ["bm25", "--data", data, "--output", output],
        "mine --output": ["mine", "--data", data, "--retriever", "bm25", "--output", output],
        "analyze geometry --output": ["analyze", "geometry", "--model", "m", "--data", data,
                                      "--output", output],
        "probe --plot": ["probe", "--model", "m", "--data", data, "--output",
                         str(tmp / "ok.json"), "--plot", output],
        "ablate corpus-size --output": ["ablate", "corpus-size", "--model", "bm25", "--data",
                                        data, "--output", output],
        "compare --markdown": ["compare", str(tmp / "r.json"), "--markdown", output],
        "report --output": ["report", str(tmp / "run"), "--output", output],
        "data synth OUT": ["data", "synth", output],
    }


COMMANDS = list(_commands(Path("/x"), "o"))


@pytest.fixture
def nothing_loads(monkeypatch):
    import tapt.analysis.compare
    import tapt.analysis.report
    import tapt.data.sources
    import tapt.data.synth

    monkeypatch.setattr(tapt.data.sources, "load_data", _no_load)
    monkeypatch.setattr(tapt.analysis.compare, "compare_results", _no_load)
    monkeypatch.setattr(tapt.analysis.report, "build_report", _no_load)
    monkeypatch.setattr(tapt.data.synth, "synthesize", _no_load)


@mark("every output flag of every command (eval, bm25, mine, analyze, probe, ablate, "
      "compare, report, data synth)", "an output under a regular file (file.txt/out.json): "
      "the error came only after the whole evaluation",
      "refused with exit 2 before anything loads, naming the flag and the path")
@pytest.mark.parametrize("command", COMMANDS)
def test_an_output_under_a_file_is_refused_before_anything_loads(command, tmp_path, quiet_cli,
                                                                 capsys, nothing_loads):
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder\n", encoding="utf-8")
    output = blocker / "out.json"
    argv = _commands(tmp_path, str(output))[command]
    assert quiet_cli.main(argv) == 2
    printed = capsys.readouterr().out
    assert str(output) in printed and "is not a folder" in printed, printed
    flag = command.split()[-1]
    assert flag in printed, printed


@pytest.mark.parametrize("command", ["eval --output", "mine --output", "compare --markdown",
                                     "analyze geometry --output"])
def test_an_existing_output_is_refused_without_overwrite(command, tmp_path, quiet_cli, capsys,
                                                         nothing_loads):
    output = tmp_path / "taken.json"
    output.write_text("precious\n", encoding="utf-8")
    assert quiet_cli.main(_commands(tmp_path, str(output))[command]) == 2
    printed = capsys.readouterr().out
    assert "--overwrite" in printed and str(output) in printed
    assert output.read_text(encoding="utf-8") == "precious\n"


def test_an_output_that_is_a_folder_is_refused(tmp_path, quiet_cli, capsys, nothing_loads):
    folder = tmp_path / "results"
    folder.mkdir()
    assert quiet_cli.main(_commands(tmp_path, str(folder))["eval --output"]) == 2
    assert "is a folder" in capsys.readouterr().out


@mark("tapt eval --output / --run", "an output in a folder this user cannot write "
      "(os.access says no; root can write anywhere, so the test asks os.access)",
      "refused with exit 2 before anything loads, naming the flag and the folder")
def test_an_unwritable_folder_is_refused(tmp_path, quiet_cli, capsys, nothing_loads,
                                         monkeypatch):
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(cli_options.os, "access",
                        lambda path, mode, **kw: False if Path(path) == locked
                        else real(path, mode, **kw))
    argv = _commands(tmp_path, str(locked / "sub" / "m.json"))["bm25 --output"]
    assert quiet_cli.main(argv) == 2
    printed = capsys.readouterr().out
    assert "--output" in printed and f"cannot write in {locked}" in printed


def test_one_file_for_two_outputs_is_refused(tmp_path, quiet_cli, capsys, nothing_loads):
    same = str(tmp_path / "same.json")
    argv = ["bm25", "--data", str(tmp_path), "--output", same, "--run", same]
    assert quiet_cli.main(argv) == 2
    assert "the same file as --output" in capsys.readouterr().out


def test_missing_parent_folders_are_fine(tmp_path):
    cli_options.check_outputs([("--output", tmp_path / "a" / "b" / "out.json")])
