"""One factory for models and retrievers: every command that takes a
model takes the same model and API flags; only :mod:`tapt.encoders.factory` turns a name
(or a loaded model) into an encoder; the ``lenient`` mapping is written once; every
encoder a command opens is closed."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from tapt.cli import build_parser, main
from tapt.cli.options import add_encoding_args

PACKAGE = Path(__file__).resolve().parents[1] / "tapt"


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("tapt",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, (*path, name))


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def shape(action: argparse.Action) -> tuple:
    """What a flag accepts (not its help wording)."""
    return (type(action).__name__, action.dest, action.type, action.default, action.choices,
            action.nargs)


def shared_flags() -> dict[str, argparse.Action]:
    reference = argparse.ArgumentParser()
    add_encoding_args(reference)
    return {flag: action for flag, action in options(reference).items()
            if flag not in ("-h", "--help")}


MODEL_FLAGS = ("--model", "--retriever", "--teacher")
"""The flags that name a model to encode with (a command taking one is a model command)."""
PARSERS = list(walk(build_parser()))
MODEL_COMMANDS = [(path, parser) for path, parser in PARSERS
                  if any(flag in options(parser) for flag in MODEL_FLAGS)]


def test_the_walk_finds_every_model_command():
    assert {" ".join(path) for path, _ in MODEL_COMMANDS} >= {
        "tapt eval", "tapt mine", "tapt ablate corpus-size", "tapt analyze geometry",
        "tapt probe"}


@pytest.mark.parametrize("path,parser", MODEL_COMMANDS,
                         ids=[" ".join(p) for p, _ in MODEL_COMMANDS])
def test_every_model_command_takes_the_same_model_and_api_flags(path, parser):
    have = options(parser)
    shared = shared_flags()
    assert {"--device", "--truncate-dim", "--api-base-url", "--cache-dir", "--no-cache",
            "--api-concurrency", "--api-rpm", "--api-tpm", "--family", "--dtype"} <= set(shared)
    missing = sorted(set(shared) - set(have))
    assert not missing, f"{' '.join(path)} lacks {missing}"
    differ = [flag for flag in shared if shape(have[flag]) != shape(shared[flag])]
    assert not differ, f"{' '.join(path)}: {differ} differ from add_encoding_args'"


def test_merge_model_flags_are_the_shared_ones():
    """tapt merge loads weights (no API model can be merged), so it takes a subset; each
    flag it shares accepts what every other command's does."""
    merge = options({" ".join(p): q for p, q in PARSERS}["tapt merge"])
    shared = shared_flags()
    common = [flag for flag in merge if flag in shared]
    assert {"--family", "--trust-remote-code", "--dtype", "--device", "--batch-size",
            "--max-tokens-per-batch"} <= set(common)
    assert [flag for flag in common if shape(merge[flag]) != shape(shared[flag])] == []


# --- the encoder factory is the only place that turns a name into an encoder -----------

CONSTRUCTORS = {"SentenceTransformerEncoder", "TruncatedEncoder", "OpenAIEncoder",
                "VoyageEncoder", "APIEncoder", "load_api_encoder", "load_sentence_transformer",
                "ExportedEncoder"}
"""Calls that make an encoder (or the model behind one) from a name or a loaded model; the
API encoder classes are found from ``tapt.encoders.api.ENCODERS`` too."""

ALLOWED = {
    "tapt.encoders.factory": "the factory itself",
    "tapt.encoders.loading": "the SentenceTransformer loader the factory calls",
    "tapt.encoders.sentence": "SentenceTransformerEncoder.load, the loader the factory calls",
    "tapt.encoders.api": "load_api_encoder, the API loader the factory calls",
}
ALLOWED_CALLS = {
    ("tapt.serving.export_folder", "ExportedEncoder"):
        "tapt export loads the folder it just wrote to check it against the torch model",
    ("tapt.training.assembly", "load_sentence_transformer"):
        "tapt train loads the model it trains from the recipe's ModelSpec (not an encoder)",
    ("tapt.training.dapt", "load_sentence_transformer"):
        "tapt dapt loads the model it trains from the recipe's ModelSpec (not an encoder)",
    ("tapt.training.losses", "load_sentence_transformer"):
        "GIST's frozen guide model, part of a loss (not an encoder); being written by "
        "another engineer: tapt.encoders.factory.load_model would do",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Attribute):
        if func.attr == "load" and isinstance(func.value, ast.Name | ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else func.value.attr
            return owner if owner == "SentenceTransformerEncoder" else None
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def test_only_the_factory_turns_a_name_into_an_encoder():
    from tapt.encoders.api import ENCODERS

    constructors = CONSTRUCTORS | {cls.__name__ for cls in ENCODERS.values()}
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module in ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = called_name(node) if isinstance(node, ast.Call) else None
            if name in constructors and (module, name) not in ALLOWED_CALLS:
                found.append(f"{module}:{node.lineno} {name}(")
    assert not found, f"encoders made outside tapt.encoders.factory: {found}"


def test_the_lenient_mapping_is_written_once():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.keyword) and node.arg == "require_anchor" \
                    and isinstance(node.value, ast.UnaryOp):
                found.append(f"{module_name(path)}:{node.value.lineno}")
    assert not found, f"require_anchor=not ... outside tapt.data.beir.strictness: {found}"


# --- every encoder a command opens is closed ---------------------------------------------

@pytest.fixture
def closed(monkeypatch):
    """Names of the encoders closed (through Encoder.close or TruncatedEncoder.close)."""
    from tapt.encoders.base import Encoder, TruncatedEncoder

    seen: list[str] = []
    for cls in (Encoder, TruncatedEncoder):
        original = cls.close

        def spy(self, _original=original):
            seen.append(self.name)
            _original(self)

        monkeypatch.setattr(cls, "close", spy)
    return seen


def test_eval_mine_and_analyze_close_their_encoder(tiny_bert_path, tiny_beir_path, tmp_path,
                                                   closed):
    model = str(tiny_bert_path)
    assert main(["eval", "--model", model, "--data", str(tiny_beir_path), "--split", "test",
                 "--truncate-dim", "8", "--quiet"]) == 0
    assert closed[:1] == [f"{model}@8"], closed
    closed.clear()
    assert main(["mine", "--retriever", model, "--data", str(tiny_beir_path), "--device",
                 "cpu", "--output", str(tmp_path / "mined.jsonl"), "--quiet"]) == 0
    assert closed[:1] == [model], closed
    closed.clear()
    assert main(["analyze", "geometry", "--model", f"tiny={model}", "--data",
                 str(tiny_beir_path), "--distractors", "2", "--random-per-query", "2",
                 "--pairs", "10", "--output", str(tmp_path / "g.json"), "--quiet"]) == 0
    assert closed[:1] == [model], closed
