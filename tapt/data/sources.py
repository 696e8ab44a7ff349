"""Open a dataset from a local BEIR folder or from the HuggingFace Hub.

FormBench on the Hub (``vinven7/FormBench``) has one config per corpus variant, each with
``corpus`` and ``queries`` splits for ``datasets.load_dataset`` and qrels under
``<config>/qrels/{split}.tsv``. Hub rows go through the same validation as local files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from tapt.data.arrow_corpus import (
    ArrowCorpus,
    cached_arrow_corpus,
    choose_store,
    open_arrow_corpus,
    store_for_bytes,
)
from tapt.data.beir import (
    SPLITS,
    BeirDataset,
    DataError,
    LeakPolicy,
    build_dataset,
    load_beir_folder,
    parse_corpus,
    parse_qrels,
    parse_queries,
    read_corpus,
    read_judged_ids,
)
from tapt.util.files import check_writable
from tapt.util.ids import is_hub_id

# datasets and huggingface_hub are imported when a Hub dataset is loaded: reading a local
# BEIR folder (and importing tapt) does not import them.

FORMBENCH_REPO = "vinven7/FormBench"
CONFIG_ALIASES = {
    "c0": "formbench-random", "random": "formbench-random",
    "c1": "formbench-structured", "structured": "formbench-structured",
    "sample": "formbench-sample",
}


def config_name(config: str | None) -> str | None:
    """Map paper names (``C0``, ``C1``, ``sample``, ``random``, ``structured``) to Hub configs."""
    if config is None:
        return None
    return CONFIG_ALIASES.get(config.lower(), config)


def load_data(source: str | os.PathLike, config: str | None = None,
              splits: Iterable[str] = SPLITS, *, revision: str | None = None,
              require_anchor: bool = True, relevant_from: int | str = "auto",
              allow_empty: bool = False, leaks: LeakPolicy = "warn",
              corpus_store: str = "memory",
              corpus_cache: str | os.PathLike | None = None) -> BeirDataset:
    """Load ``source``: a local BEIR folder, a local folder holding configs as subfolders,
    or a Hub dataset id (with ``config``). Every line is validated as
    :func:`~tapt.data.beir.load_beir_folder` validates a local folder.

    Args:
        source: A BEIR folder, a folder of configs (``<source>/<config>/``), or a Hub
            dataset id such as ``vinven7/FormBench``.
        config: The config (subfolder) to load; FormBench's paper names work too (``C0``,
            ``C1``, ``random``, ``structured``, ``sample``). Required for a Hub dataset.
        splits: The qrels splits to read.
        revision: The Hub revision (branch, tag or commit) of a Hub dataset.
        require_anchor: Every query must have a relevant passage (FormBench); False
            keeps queries without one.
        relevant_from: The relevance rule: ``auto`` or the lowest relevant grade.
        allow_empty: Keep passages whose text is empty.
        leaks: A query also judged in another qrels file: ``error`` or ``warn``.
        corpus_store: ``memory`` (a dict), ``arrow`` (a memory-mapped Arrow corpus,
            validated once and cached) or ``auto`` (Arrow for a corpus of 256 MiB or more).
        corpus_cache: The Arrow corpus cache folder (None: ``$TAPT_CACHE_DIR/corpus``
            or ``~/.cache/tapt/corpus``).

    Returns:
        The validated :class:`~tapt.data.beir.BeirDataset`.

    Raises:
        DataError: no such folder or config, a Hub dataset that cannot be loaded (the
            message says how to download it), or invalid data (file, line and field).
        ValueError: an unknown ``corpus_store`` or an invalid ``relevant_from``.

    Example::

        dataset = load_data("data/scifact", splits=["test"], require_anchor=False,
                            allow_empty=True)
        formbench = load_data("vinven7/FormBench", config="structured", splits=["test"])
    """
    config = config_name(config)
    splits = tuple(splits)
    check_corpus_cache(corpus_cache)
    path = Path(source)
    if path.is_dir():
        folder = path / config if config and (path / config).is_dir() else path
        if config and folder == path and path.name != config:
            raise DataError(path, f"config '{config}' asked for, but there is no subfolder "
                                  f"'{config}' here and the folder is not named so")
        return load_beir_folder(folder, splits, require_anchor=require_anchor,
                                relevant_from=relevant_from, allow_empty=allow_empty,
                                leaks=leaks, corpus=arrow_store(folder, corpus_store,
                                                                corpus_cache, allow_empty))
    if path.exists() or not is_hub_id(str(source)) or not config:
        raise DataError(source, "no such folder (expected a BEIR folder with corpus.jsonl, "
                                "queries.jsonl and qrels/); a Hub dataset needs a config, e.g. "
                                "vinven7/FormBench with config structured")
    return load_hub(str(source), config, splits, revision=revision,
                    require_anchor=require_anchor, relevant_from=relevant_from,
                    allow_empty=allow_empty, leaks=leaks, corpus_store=corpus_store,
                    corpus_cache=corpus_cache)


def has_split(source: str | os.PathLike, config: str | None, split: str, *,
              revision: str | None = None) -> bool:
    """Whether ``source`` has a ``qrels/<split>.tsv``: a file of the local folder; for a
    Hub dataset, a file in the local HF cache, else one the Hub lists (asked, not
    downloaded; offline, or when the Hub cannot be reached, the cache alone answers)."""
    config = config_name(config)
    path = Path(source)
    if path.is_dir():
        folder = path / config if config and (path / config).is_dir() else path
        return (folder / "qrels" / f"{split}.tsv").is_file()
    if not config or not is_hub_id(str(source)):
        return False
    from huggingface_hub import try_to_load_from_cache

    name = f"{config}/qrels/{split}.tsv"
    try:
        cached = try_to_load_from_cache(str(source), name, revision=revision,
                                        repo_type="dataset")
    except (ValueError, OSError):
        cached = None
    if isinstance(cached, str):
        return True
    from huggingface_hub import HfApi
    from huggingface_hub.constants import HF_HUB_OFFLINE

    if HF_HUB_OFFLINE:
        return False
    try:
        return bool(HfApi().file_exists(str(source), name, repo_type="dataset",
                                        revision=revision))
    except Exception:  # noqa: BLE001  (not reachable, no access: no train split to use)
        return False


def check_corpus_cache(folder: str | os.PathLike | None) -> None:
    """``corpus_cache`` must be a folder, or one that can be created: a file there (or
    above it) is a :class:`DataError` naming it, before anything is read. A read-only
    folder passes (a shared cache is read as it is)."""
    if folder is None:
        return
    try:
        check_writable(folder)
    except NotADirectoryError as err:
        raise DataError(folder, f"the Arrow corpus cache (--corpus-cache) must be a folder: "
                                f"{err}") from None
    except PermissionError:
        pass


def arrow_store(folder: Path, store: str, cache: str | os.PathLike | None,
                allow_empty: bool) -> ArrowCorpus | None:
    """The folder's corpus as an :class:`~tapt.data.arrow_corpus.ArrowCorpus` when
    ``store`` (``memory``, ``arrow``, ``auto``) says so, else None (read into a dict)."""
    corpus = folder / "corpus.jsonl"
    if not folder.is_dir() or choose_store(store, corpus) != "arrow":
        return None
    return open_arrow_corpus(corpus, allow_empty=allow_empty, cache_dir=cache)


def hub_arrow_corpus(rows, label: str, revision: str | None, store: str,
                     cache: str | os.PathLike | None, allow_empty: bool) -> ArrowCorpus | None:
    """The Hub corpus ``rows`` (a ``datasets.Dataset``) as an
    :class:`~tapt.data.arrow_corpus.ArrowCorpus` when ``store`` says so, else None (read
    into a dict; also for rows that are not a ``Dataset`` with a fingerprint)."""
    fingerprint = getattr(rows, "_fingerprint", None)
    table = getattr(rows, "data", None)
    if fingerprint is None or table is None or \
            store_for_bytes(store, int(table.nbytes)) != "arrow":
        return None
    return cached_arrow_corpus(lambda: enumerate(rows, start=1), f"{label}/corpus.jsonl",
                               f"{label}@{revision or 'main'}", [fingerprint],
                               allow_empty=allow_empty, cache_dir=cache)


def load_hub(repo_id: str, config: str | None, splits: Iterable[str] = SPLITS, *,
             revision: str | None = None, require_anchor: bool = True,
             relevant_from: int | str = "auto", allow_empty: bool = False,
             leaks: LeakPolicy = "warn", corpus_store: str = "memory",
             corpus_cache: str | os.PathLike | None = None) -> BeirDataset:
    """Load one config of a BEIR dataset on the Hub through ``datasets.load_dataset``.

    ``corpus_store`` ``arrow`` (or ``auto`` for a corpus of 256 MiB or more) validates the
    corpus rows once into tapt's Arrow corpus cache, keyed by the ``datasets`` fingerprint
    of the downloaded files, instead of a dict. The split-leak check reads the other
    splits' qrels only when they are in the local HF cache (no extra download)."""
    from datasets import load_dataset
    from huggingface_hub import hf_hub_download, try_to_load_from_cache

    if not config:
        raise DataError(repo_id, "a Hub dataset needs a config, e.g. --config structured "
                                 "(FormBench: structured/C1, random/C0, sample)")
    label = f"hf://datasets/{repo_id}/{config}"
    try:
        corpus_rows = load_dataset(repo_id, config, split="corpus", revision=revision)
        query_rows = load_dataset(repo_id, config, split="queries", revision=revision)
        qrel_files = {split: hf_hub_download(repo_id, f"{config}/qrels/{split}.tsv",
                                             repo_type="dataset", revision=revision)
                      for split in splits}
    except Exception as err:  # datasets/hub raise many types for "not reachable/not cached"
        raise DataError(label, offline_help(repo_id, config, err)) from err
    corpus = hub_arrow_corpus(corpus_rows, label, revision, corpus_store, corpus_cache,
                              allow_empty)
    if corpus is None:
        corpus = parse_corpus(enumerate(corpus_rows, start=1), f"{label}/corpus.jsonl",
                              allow_empty=allow_empty)
    queries = parse_queries(enumerate(query_rows, start=1), f"{label}/queries.jsonl")
    parsed = {split: parse_qrels(path, corpus, queries) for split, path in qrel_files.items()}
    others = {}
    for split in (split for split in SPLITS if split not in qrel_files):
        try:
            cached = try_to_load_from_cache(repo_id, f"{config}/qrels/{split}.tsv",
                                            revision=revision, repo_type="dataset")
        except (ValueError, OSError):  # e.g. a local mimic's path as repo id
            cached = None
        if isinstance(cached, str):
            others[cached] = read_judged_ids(cached)
    dataset = build_dataset(corpus, queries, parsed, qrel_files, others, source=label,
                            require_anchor=require_anchor, relevant_from=relevant_from,
                            leaks=leaks)
    dataset.content_files = {"corpus": cache_files(corpus_rows),
                             "queries": cache_files(query_rows)}
    return dataset


def cache_files(rows) -> tuple[str, ...]:
    """The Arrow files ``datasets`` holds ``rows`` in (empty for rows held in memory): what
    the data fingerprint of a Hub dataset digests (:mod:`tapt.data.fingerprint`)."""
    files = getattr(rows, "cache_files", None) or []
    return tuple(str(item["filename"]) for item in files
                 if isinstance(item, dict) and item.get("filename"))


def offline_help(repo_id: str, config: str, err: Exception) -> str:
    """The one message a user gets when the Hub copy cannot be had."""
    target = f"data/{repo_id.split('/')[-1]}"
    return (f"cannot load config '{config}' of {repo_id} ({type(err).__name__}: {err}). "
            "If this machine is offline, download it elsewhere with\n"
            f"  hf download {repo_id} --repo-type dataset --include '{config}/*' "
            f"--local-dir {target}\n"
            f"copy {target}/ here and pass --data {target}/{config} (a local BEIR folder), "
            "or fill the HF cache and set HF_HUB_OFFLINE=1.")


def load_corpus(source: str | os.PathLike, config: str | None = None, *,
                revision: str | None = None, allow_empty: bool = False,
                corpus_store: str = "memory",
                corpus_cache: str | os.PathLike | None = None) -> BeirDataset:
    """The corpus of ``source`` alone, as a :class:`~tapt.data.beir.BeirDataset` with no
    query and no split: ``corpus.jsonl`` (or the Hub config's ``corpus`` split) is the only
    file read, validated line by line as :func:`load_data` validates it. For what is made
    from passages alone (``tapt pseudo``), which must not read a query or a judgment.

    Raises:
        DataError: no such folder or config, a Hub corpus that cannot be loaded, or an
            invalid line (file, line and field).
    """
    config = config_name(config)
    check_corpus_cache(corpus_cache)
    path = Path(source)
    if path.is_dir():
        folder = path / config if config and (path / config).is_dir() else path
        if not (folder / "corpus.jsonl").is_file():
            raise DataError(folder, "no corpus.jsonl here (expected a BEIR folder)")
        corpus = arrow_store(folder, corpus_store, corpus_cache, allow_empty)
        if corpus is None:
            corpus = read_corpus(folder / "corpus.jsonl", allow_empty=allow_empty)
        dataset = BeirDataset(corpus=corpus, queries={}, source=str(folder))
        dataset.content_files = {"corpus": (str(folder / "corpus.jsonl"),)}
        return dataset
    if path.exists() or not is_hub_id(str(source)) or not config:
        raise DataError(source, "no such folder (expected a BEIR folder with corpus.jsonl); "
                                "a Hub dataset needs a config, e.g. vinven7/FormBench with "
                                "config structured")
    from datasets import load_dataset

    label = f"hf://datasets/{source}/{config}"
    try:
        rows = load_dataset(str(source), config, split="corpus", revision=revision)
    except Exception as err:  # datasets/hub raise many types for "not reachable/not cached"
        raise DataError(label, offline_help(str(source), config, err)) from err
    corpus = hub_arrow_corpus(rows, label, revision, corpus_store, corpus_cache, allow_empty)
    if corpus is None:
        corpus = parse_corpus(enumerate(rows, start=1), f"{label}/corpus.jsonl",
                              allow_empty=allow_empty)
    dataset = BeirDataset(corpus=corpus, queries={}, source=label)
    dataset.content_files = {"corpus": cache_files(rows)}
    return dataset
