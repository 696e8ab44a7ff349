"""What the ``tapt`` commands share in their options, and what they check before they load
anything.

- :func:`check_outputs`: every output path a command will write is checked before the
  model or the data loads (an existing file without ``--overwrite``, a folder in the way,
  a parent that is a file, a folder that cannot be written).
- The option groups several commands declare (data source, model loading, analysis
  outputs) and the help formatter of every parser.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from pathlib import Path

from tapt.cli.number_types import (
    batch_size,
    concurrency,
    count,
    dev_carve_size,
    fraction,
    rate,
    relevant_from,
    seed,
    sequence_length,
    tokens_per_batch,
    top_k,
    width,
)
from tapt.data.beir import SPLITS
from tapt.encoders.precision import DTYPE_NAMES
from tapt.util.families import registered_families
from tapt.util.ids import path_component


def check_outputs(paths: Iterable[tuple[str, Path | None]], *, overwrite: bool = True,
                  inputs: Iterable[tuple[str, str | os.PathLike | None]] = ()) -> None:
    """Refuse, before any work, outputs that could not be written at the end, or that would
    land on an input.

    ``paths``: (flag, path) pairs; ``None`` paths are skipped. A missing parent folder is
    fine (writers create it) when its nearest existing ancestor is a writable folder.
    ``overwrite=False`` refuses existing files. ``inputs``: (flag, path) pairs of what the
    command reads (:func:`data_inputs`, :func:`model_inputs`); an output that is, holds or
    lies inside one is refused whatever ``overwrite`` says
    (:func:`tapt.util.outputs.check_apart`). Raises ``FileExistsError``, ``NotADirectoryError``
    / ``IsADirectoryError`` / ``PermissionError`` or
    :class:`~tapt.util.outputs.OutputOnInputError` naming the flag and the path.
    """
    from tapt.util.outputs import check_apart

    paths = list(paths)
    check_apart(paths, inputs)
    seen: dict[Path, str] = {}
    for flag, path in paths:
        if path is None:
            continue
        path = Path(path).expanduser()
        key = Path(os.path.abspath(path))
        if key in seen:
            raise ValueError(f"{flag} {path}: the same file as {seen[key]}")
        seen[key] = flag
        if path.is_dir():
            raise IsADirectoryError(f"{flag} {path}: is a folder; give a file name")
        if path.exists() or path.is_symlink():
            if not overwrite:
                raise FileExistsError(f"{flag} {path}: exists; pass --overwrite to replace it")
            if path.exists() and not os.access(path, os.W_OK):
                raise PermissionError(f"{flag} {path}: exists and cannot be written")
        check_folder(flag, path.parent, shown=path)


CACHE_FLAGS = (("--corpus-cache", "corpus_cache"), ("--cache-dir", "cache_dir"))
"""The cache folders a command may take: checked by :func:`check_cache_folders`."""


def check_cache_folders(args: argparse.Namespace) -> None:
    """Before any command runs (``tapt.cli.main``): ``--config`` is one folder name; a cache
    folder must be a folder or one that can be created (a file there is an error naming the
    flag; a read-only shared cache is read as it is)."""
    from tapt.util.files import check_writable

    if getattr(args, "config", None) is not None:  # a subfolder of the data: one name
        path_component(args.config, "--config")
    for flag, dest in CACHE_FLAGS:
        folder = getattr(args, dest, None)
        if folder is None:
            continue
        try:
            check_writable(folder)
        except NotADirectoryError as err:
            raise NotADirectoryError(f"{flag} {folder}: {err}; give a folder for the "
                                     "cache") from None
        except PermissionError:
            pass


BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels")
"""What a local BEIR folder is read from (:func:`tapt.data.beir.load_beir_folder`)."""


def data_inputs(flag: str, data: str | os.PathLike | None, config: str | None = None
                ) -> list[tuple[str, Path]]:
    """The files a local BEIR folder given to ``flag`` is read from (its corpus, queries and
    ``qrels/``, also under ``config`` when given): outputs must not land on them. A Hub id
    gives paths that do not exist, which :func:`tapt.util.outputs.check_apart` skips."""
    if not data:
        return []
    folders = [Path(data).expanduser()]
    if config:
        folders.append(folders[0] / config)
    return [(flag, folder / name) for folder in folders for name in BEIR_FILES]


def model_inputs(flag: str, specs: str | Iterable[str] | None) -> list[tuple[str, str]]:
    """The local model folders of ``flag``'s values (``package:`` models resolved, a
    ``NAME=`` label dropped as :func:`tapt.analysis.result_files.split_spec` does); a Hub id, an
    API model or ``bm25`` names no local folder and is skipped by the check."""
    from tapt.encoders.model_paths import resolve_model_path

    if specs is None:
        return []
    found = []
    for spec in [specs] if isinstance(specs, str) else specs:
        name, _, value = spec.partition("=")
        if name and value and not Path(spec).exists():
            spec = value
        try:
            found.append((flag, resolve_model_path(spec)))
        except (FileNotFoundError, ValueError):  # a missing package: loading names it
            continue
    return found


def check_folder(flag: str, folder: Path, *, shown: Path | None = None) -> None:
    """``folder`` exists and is writable, or can be created in its nearest existing
    ancestor; else an error naming ``flag`` and ``shown`` (default: ``folder``)."""
    from tapt.util.files import check_writable

    shown = folder if shown is None else shown
    try:
        check_writable(folder)
    except (NotADirectoryError, PermissionError) as err:
        raise type(err)(f"{flag} {shown}: {err}") from None


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter,
                    argparse.RawDescriptionHelpFormatter):
    """Help that ends each option with its default, unless the help already states it or
    there is none to show (``None``, an off switch); descriptions are kept as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        bound = getattr(action.type, "bound", None)
        if bound is not None and action.option_strings:  # the range from tapt.util.bounds
            text = f"{text} [range: {bound.description}]"
        default = action.default
        if ("default" in text or not action.option_strings or default is None
                or default is False or default is argparse.SUPPRESS):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, list | tuple) else default
        return f"{text} (default: {str(shown).replace('%', '%%')})"


class CommandParser(argparse.ArgumentParser):
    """The parser of ``tapt`` and of each of its commands (``add_subparsers`` makes its
    sub-parsers of the same class): help with defaults (:class:`HelpFormatter`)."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs) -> None:
        super().__init__(*args, formatter_class=formatter_class, **kwargs)


def family_help() -> str:
    """``--family``'s help: the families registered when the parser is built."""
    return (f"preset: {', '.join(registered_families())} (tapt.register_family adds one), "
            "or auto (default: the preset a tapt export records, else from the model name)")


def add_relevance_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--relevant-from", type=relevant_from, default="auto",
                        metavar="auto|N",
                        help="lowest grade that counts as relevant (binary metrics, training "
                             "anchors): auto (default) is 3 when the qrels hold a grade >= 3 "
                             "(FormBench: 3 anchor, 2 hard, 1 soft negative), else 1 (BEIR: "
                             "grade >= 1 relevant)")


def add_decontaminate_arg(parser: argparse.ArgumentParser, trained: str = "train") -> None:
    """``--decontaminate SPLIT ...``: drop from the ``trained`` split the judgments of
    passages relevant in those splits (:func:`tapt.data.overlap.decontaminate`), as a
    recipe's ``data.decontaminate`` does."""
    parser.add_argument("--decontaminate", nargs="+", choices=SPLITS, default=[],
                        metavar="SPLIT",
                        help=f"drop from the {trained} split every judgment of a passage "
                             "relevant in these splits (e.g. test), and the queries left "
                             "without a relevant passage, as data.decontaminate does")


def add_dev_carve_args(parser: argparse.ArgumentParser) -> None:
    """``--dev-from-train N --dev-carve --dev-seed``: a dev split carved as a recipe does."""
    parser.add_argument("--dev-from-train", type=dev_carve_size, default=None, metavar="N",
                        help="carve a dev split of N train queries (or a fraction below 1) "
                             "after --decontaminate, as data.dev_from_train")
    parser.add_argument("--dev-carve", choices=("group", "query"), default="group",
                        help="carve groups of queries sharing relevant passages (default: "
                             "no dev passage is trained on) or single queries")
    parser.add_argument("--dev-seed", type=seed, default=0,
                        help="seed of the dev carve (data.dev_seed)")


def add_source_args(parser: argparse.ArgumentParser, *, split: str | None = "test",
                    relevance: bool = True) -> None:
    """Where the data comes from and how it is read: ``--data --config --revision``,
    ``--split`` (unless ``split`` is None), ``--lenient``, ``--relevant-from`` (unless
    ``relevance`` is false) and ``--no-title``."""
    parser.add_argument("--data", required=True,
                        help="local BEIR folder, or a Hub dataset id such as vinven7/FormBench")
    parser.add_argument("--config", default=None,
                        help="Hub config or subfolder: structured (C1), random (C0), sample")
    parser.add_argument("--revision", default=None, help="Hub dataset revision (tag/commit)")
    if split is not None:
        parser.add_argument("--split", default=split, choices=SPLITS,
                            help="qrels split to use")
    parser.add_argument("--lenient", action="store_true",
                        help="accept empty passages and queries without a relevant passage "
                             "(public BEIR sets such as Cranfield); FormBench passes the "
                             "strict checks")
    if relevance:
        add_relevance_arg(parser)
    parser.add_argument("--no-title", action="store_true",
                        help="encode passages without their title (default: title + ' ' + text)")


def add_encoding_args(parser: argparse.ArgumentParser, *, one_vector: bool = False) -> None:
    """How a model is loaded and encodes, declared once for every command that takes a
    model: ``--family --max-seq-length --batch-size --max-tokens-per-batch --dtype
    --trust-remote-code --device --truncate-dim``, the long-passage group
    (:func:`add_long_passage_args`; ``one_vector``: the command needs one vector per
    passage, so ``chunk-max`` is refused) and the API group (:func:`add_api_args`).
    :func:`model_options` and :func:`api_options` read them back."""
    parser.add_argument("--family", default="auto", help=family_help())
    parser.add_argument("--max-seq-length", type=sequence_length, default=None,
                        help="truncate texts to N tokens (default: the preset's)")
    add_batching_args(parser)
    add_device_args(parser)
    parser.add_argument("--trust-remote-code", action="store_true",
                        help="allow the model's own code from the Hub (off by default)")
    parser.add_argument("--truncate-dim", type=width, default=None,
                        help="use the first N embedding dimensions (Matryoshka; an API "
                             "model is asked for N dimensions)")
    cache = parser.add_argument_group(
        "embedding cache and search (local models: passage embeddings in memory-mapped "
        "shards, reused while the weights, tokenizer, prompt, length and dtype are the same; "
        "API models: an SQLite cache of responses)")
    cache.add_argument("--cache-dir", type=Path, default=None,
                       help="cache folder (default: $TAPT_CACHE_DIR/embeddings, else "
                            "~/.cache/tapt/embeddings)")
    cache.add_argument("--no-cache", action="store_true",
                       help="do not read or write the cache")
    cache.add_argument("--search-backend", choices=("auto", "faiss", "torch"), default="auto",
                       help="exact search: faiss (the paper's), or torch (matmul + top-k on "
                            "the GPUs or the CPU; same rankings up to ties, and ~10x faster "
                            "than faiss-cpu on CPUs); auto picks torch only on a GPU that "
                            "faiss cannot use")
    cache.add_argument("--search-storage", choices=("float32", "float16"), default="float32",
                       help="row storage of the torch search (float16 halves its memory)")
    add_long_passage_args(parser, one_vector=one_vector)
    add_api_args(parser)


def add_batching_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                      token_budget: bool = True) -> None:
    """``--batch-size`` and (``token_budget``) ``--max-tokens-per-batch``: how texts are
    batched for encoding, declared here once for every command that encodes
    (:func:`add_encoding_args`, ``tapt merge --pick-on-dev``, ``tapt combine``)."""
    parser.add_argument("--batch-size", type=batch_size, default=32,
                        help="texts per encoding batch")
    if token_budget:
        parser.add_argument("--max-tokens-per-batch", type=tokens_per_batch, default=None,
                            help="padded tokens per encoding batch (default: batch size x "
                                 "maximum sequence length)")


def add_device_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--dtype --device``: the precision and the torch device a model is loaded and
    encodes in, declared here once (:func:`add_encoding_args`, ``tapt merge
    --pick-on-dev``)."""
    parser.add_argument("--dtype", choices=DTYPE_NAMES, default="auto",
                        help="load and encode in this precision; auto: bfloat16 where the "
                             "device runs it natively (a CUDA GPU with bf16, a CPU with AMX "
                             "or AVX512-BF16), float32 elsewhere")
    parser.add_argument("--device", default=None,
                        help="torch device such as cuda:1 or cpu (default: a GPU when "
                             "there is one)")


def add_long_passage_args(parser: argparse.ArgumentParser, *, one_vector: bool = False) -> None:
    """``--long-passages --chunk-tokens --chunk-stride`` (:mod:`tapt.encoders.long_passages`);
    ``one_vector``: the command needs one vector per passage, so :func:`model_options`
    refuses ``chunk-max`` (one vector per window) before anything loads (the flag itself
    is the same on every command)."""
    from tapt.encoders.long_passages import MODES

    if one_vector:
        parser.set_defaults(one_vector_per_passage=True)
    group = parser.add_argument_group(
        "long passages (longer than the model's maximum length; local models)")
    group.add_argument("--long-passages", choices=MODES, default="truncate",
                       help="truncate: the first max-length tokens; chunk-mean: split into "
                            "token windows, encode each, mean of the window embeddings; "
                            "chunk-max: each window its own index row, a passage scored by "
                            "its best window (MaxSim)"
                            + ("; chunk-max is refused here: this command needs one vector "
                               "per passage" if one_vector else ""))
    group.add_argument("--chunk-tokens", type=sequence_length, default=None,
                       help="content tokens per window (default: the model's maximum length "
                            "minus its prompt and special tokens)")
    group.add_argument("--chunk-stride", type=sequence_length, default=None,
                       help="tokens between window starts, at most --chunk-tokens (default: "
                            "--chunk-tokens, no overlap)")


def add_api_args(parser: argparse.ArgumentParser) -> None:
    """The options of an API model (``openai:MODEL`` / ``voyage:MODEL``): endpoint,
    embedding cache, concurrency and client-side rate limits."""
    api = parser.add_argument_group(
        "API models (openai:MODEL or voyage:MODEL; key from OPENAI_API_KEY or "
        "VOYAGE_API_KEY; --truncate-dim is sent as the API's dimensions)")
    api.add_argument("--api-base-url", default=None,
                     help="endpoint base URL (default: OPENAI_BASE_URL / VOYAGE_BASE_URL, "
                          "else the provider's)")
    api.add_argument("--api-concurrency", type=concurrency, default=4,
                     help="requests in flight at once (default 4)")
    api.add_argument("--api-rpm", type=rate, default=None,
                     help="client-side requests per minute (default: the provider's tier-1 "
                          "limit for the model; 0: none)")
    api.add_argument("--api-tpm", type=rate, default=None,
                     help="client-side tokens per minute (default: tier-1 limit; 0: none)")


def add_subcorpus_args(parser, what: str = "sub-corpus", *, seed_flag: bool = True,
                       distractors_default: str = "") -> None:
    """``--distractors N`` | ``--fraction F`` (one of them): every judged passage plus a
    seeded sample of distractors; with ``seed_flag``, ``--seed`` of that sample."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--distractors", type=count, default=None,
                       help=f"{what}: every judged passage plus N distractors"
                            f"{distractors_default}")
    group.add_argument("--fraction", type=fraction, default=None,
                       help=f"{what}: every judged passage plus this fraction of distractors")
    if seed_flag:
        parser.add_argument("--seed", type=seed, default=0,
                            help="seed of the sub-corpus sample")


def add_data_args(parser: argparse.ArgumentParser, split_default: str = "test") -> None:
    """``tapt eval`` and ``tapt bm25``: the data, the sub-corpus, the outputs."""
    add_source_args(parser, split=split_default)
    add_decontaminate_arg(parser, trained="train split the result's train_overlap compares with")
    add_dev_carve_args(parser)  # e.g. --tune-on dev on the dev a recipe carves
    add_subcorpus_args(parser)
    add_corpus_store_args(parser)
    parser.add_argument("--top-k", type=top_k, default=100,
                        help="passages retrieved per query (recall@100 needs at least 100)")
    parser.add_argument("--output", type=Path, default=None, help="write metrics as JSON")
    parser.add_argument("--run", type=Path, default=None, help="write the TREC run file")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing --output/--run files")
    add_quiet_arg(parser)


def add_corpus_store_args(parser: argparse.ArgumentParser) -> None:
    """``--corpus-store memory|arrow|auto`` and ``--corpus-cache DIR``
    (:mod:`tapt.data.arrow_corpus`)."""
    parser.add_argument("--corpus-store", choices=("memory", "arrow", "auto"), default="auto",
                        help="hold the corpus as Python objects (memory) or in a memory-mapped "
                             "Arrow file (arrow: bounded memory for ~1M passages); auto "
                             "(default): arrow when corpus.jsonl is 256 MiB or more")
    parser.add_argument("--corpus-cache", type=Path, default=None, metavar="DIR",
                        help="where --corpus-store arrow keeps its validated Arrow file "
                             "(default: $TAPT_CACHE_DIR/corpus or ~/.cache/tapt/corpus)")


def add_quiet_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quiet", action="store_true",
                        help="no progress bars and no info lines, only results and warnings")


def add_model_options(parser: argparse.ArgumentParser, *, several: bool,
                      bm25: bool = False, one_vector: bool = False) -> None:
    """The analysis commands' ``--model [NAME=]MODEL`` and the encoding options
    (``one_vector``: see :func:`add_encoding_args`)."""
    parser.add_argument("--model", required=True, action="append" if several else "store",
                        metavar="[NAME=]MODEL",
                        help="Hub id, local path, package:NAME/sub/path or openai:/voyage:"
                             "MODEL, optionally labelled NAME=MODEL"
                             + (" (repeat for several)" if several else "")
                             + ("; bm25 for the lexical baseline" if bm25 else ""))
    add_encoding_args(parser, one_vector=one_vector)


def add_analysis_data(parser: argparse.ArgumentParser, *, split: bool = True,
                      output: str = "results.json") -> None:
    add_source_args(parser, split="test" if split else None, relevance=False)
    add_corpus_store_args(parser)
    parser.add_argument("--seed", type=seed, default=0, help="seed of every sample")
    add_analysis_outputs(parser, required=True, example=output)
    add_quiet_arg(parser)


def add_analysis_outputs(parser: argparse.ArgumentParser, *, required: bool,
                         example: str) -> None:
    parser.add_argument("--output", type=Path, required=required, metavar=example.upper(),
                        help=f"write the results as JSON (e.g. {example})")
    parser.add_argument("--plot", type=Path, default=None,
                        help="PNG path (default: --output with .png)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace existing --output/--plot files")
