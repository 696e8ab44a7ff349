"""What a command opens from its flags, in one shape for every command: the dataset
(:func:`read_data`), the encoder of a model name with the encoding and API options
(:func:`opened_encoder`, closed on exit whatever happens) and the options those build on
(:func:`model_options`, :func:`api_options`, :func:`search_options`).

The library (tapt.data, tapt.encoders, tapt.retrieval) is imported inside the functions:
``tapt --help`` and a refused flag do not import it (the CLI's start).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tapt.cli.options import check_folder

logger = logging.getLogger("tapt")


def read_data(args: argparse.Namespace, splits: Sequence[str], *, train_split: str = "train",
              with_train: bool = False):
    """The dataset the source flags name (:func:`tapt.cli.options.add_source_args`:
    ``--data``, ``--config``, ``--revision``, ``--lenient``, ``--relevant-from`` and the
    corpus store), with ``splits`` loaded. ``with_train``: ``train_split`` too when the data
    has one (for the results' ``train_overlap``). ``--decontaminate SPLIT ...``
    (:func:`tapt.cli.options.add_decontaminate_arg`): those splits are read as well and
    ``train_split`` is decontaminated against them (they stay loaded only when in
    ``splits``). ``--dev-from-train N`` (:func:`tapt.cli.options.add_dev_carve_args`): a
    ``dev`` split is carved from what is left of ``train_split``, as a recipe carves it,
    instead of read from a file."""
    from tapt.data.beir import DataError, strictness
    from tapt.data.overlap import decontaminate
    from tapt.data.sources import config_name, has_split, load_data
    from tapt.data.splits import carve_dev, check_no_split_file

    against = list(getattr(args, "decontaminate", None) or [])
    carve = getattr(args, "dev_from_train", None)
    if carve is not None:
        check_no_split_file(args.data, config_name(args.config), "dev")
    wanted = [split for split in splits if carve is None or split != "dev"]
    needs_train = with_train or against or carve is not None
    extra = [train_split] if needs_train and train_split not in wanted and \
        has_split(args.data, args.config, train_split, revision=args.revision) else []

    def load(names: list[str]):
        return load_data(args.data, args.config, list(dict.fromkeys([*names, *against])),
                         revision=args.revision,
                         relevant_from=getattr(args, "relevant_from", "auto"),
                         corpus_store=args.corpus_store, corpus_cache=args.corpus_cache,
                         **strictness(args.lenient))

    if carve is not None and train_split not in wanted + extra:
        raise DataError(args.data, f"--dev-from-train: the data has no '{train_split}' split "
                                   "to carve a dev split from")
    try:
        dataset = load(wanted + extra)
    except DataError as err:
        if not extra or against or carve is not None or err.path != str(_split_file(args, train_split)):
            raise
        # the train split is read only for train_overlap: a bad line in it must not stop an
        # evaluation of another split (whose own validation passed or fails on its own)
        logger.warning("no train_overlap: the %s split cannot be read (%s)", train_split, err)
        dataset = load(wanted)
    wanted += extra
    if against:
        if train_split not in dataset.qrels:
            raise DataError(args.data, f"--decontaminate: the data has no '{train_split}' "
                                       "split to decontaminate")
        dataset = decontaminate(dataset, against, train_split=train_split, keep=wanted)
    if carve is not None:
        dataset = carve_dev(dataset, size=carve, seed=args.dev_seed, source_split=train_split,
                            split="dev", by=args.dev_carve)
    return dataset


def _split_file(args: argparse.Namespace, split: str):
    """The local ``qrels/<split>.tsv`` the data flags name (a Hub dataset: its id)."""
    from tapt.data.sources import config_name

    folder, config = Path(args.data), config_name(args.config)
    if config and (folder / config).is_dir():
        folder = folder / config
    return folder / "qrels" / f"{split}.tsv" if folder.is_dir() else args.data


@contextmanager
def opened_encoder(args: argparse.Namespace, name: str, *, progress: bool,
                   lexical: bool = False) -> Iterator:
    """The :class:`~tapt.encoders.factory.EncoderLoader` of model ``name`` with the
    command's encoding and API flags, checked now (an API model is built: a missing key
    fails before the data loads) and closed on exit; ``lexical``: ``name`` is BM25, there
    is no encoder (None)."""
    from tapt.encoders.factory import EncoderLoader

    loader = None if lexical else EncoderLoader(name, model_options(args, progress=progress),
                                                api_options(args, [name]))
    try:
        yield loader
    finally:
        if loader is not None:
            loader.close()


def model_options(args: argparse.Namespace, *, progress: bool = False):
    """:class:`tapt.encoders.factory.ModelOptions` from :func:`add_encoding_args`' flags
    (a bad long-passage combination raises
    :class:`~tapt.encoders.long_passages.LongPassageError` naming the flag)."""
    from tapt.encoders.factory import ModelOptions
    from tapt.encoders.long_passages import LongPassageError, LongPassages

    long_passages = LongPassages(getattr(args, "long_passages", "truncate"),
                                 getattr(args, "chunk_tokens", None),
                                 getattr(args, "chunk_stride", None))
    if getattr(args, "one_vector_per_passage", False) and not long_passages.one_vector:
        raise LongPassageError("--long-passages chunk-max keeps one vector per window; this "
                               "command needs one per passage: use chunk-mean or truncate")
    return ModelOptions(family=args.family, max_seq_length=args.max_seq_length,
                        trust_remote_code=args.trust_remote_code, device=args.device,
                        dtype=args.dtype, max_tokens_per_batch=args.max_tokens_per_batch,
                        batch_size=args.batch_size, progress=progress,
                        truncate_dim=args.truncate_dim, long_passages=long_passages,
                        backend=getattr(args, "backend", "torch"),
                        threads=getattr(args, "threads", None))


def api_options(args: argparse.Namespace, names: Iterable[str] = ()):
    """:class:`tapt.encoders.factory.APIOptions` from :func:`add_api_args`' flags; when one
    of ``names`` is an API model that uses the cache, ``--cache-dir`` must be writable."""
    from tapt.encoders.factory import APIOptions, is_api_model

    if (args.cache_dir is not None and not args.no_cache
            and any(is_api_model(name) for name in names)):
        check_folder("--cache-dir", args.cache_dir)
    return APIOptions(base_url=args.api_base_url, cache_dir=args.cache_dir,
                      cache=not args.no_cache, concurrency=args.api_concurrency,
                      requests_per_minute=args.api_rpm, tokens_per_minute=args.api_tpm)


def search_options(args: argparse.Namespace):
    """:class:`tapt.retrieval.retriever_factory.SearchOptions` from :func:`add_encoding_args`' flags;
    the local-model cache lives in ``CACHE_DIR/local`` and is checked for writability."""
    from tapt.retrieval.embedding_cache import local_cache_root
    from tapt.retrieval.retriever_factory import SearchOptions

    cache_dir = None if getattr(args, "no_cache", True) else local_cache_root(args.cache_dir)
    if cache_dir is not None:
        check_folder("--cache-dir", cache_dir)
    return SearchOptions(backend=getattr(args, "search_backend", "auto"),
                         storage=getattr(args, "search_storage", "float32"),
                         cache_dir=None if cache_dir is None else str(cache_dir),
                         precision=getattr(args, "embedding_precision", "float32"),
                         rescore=getattr(args, "rescore", None))
