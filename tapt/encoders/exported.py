"""An export folder as an :class:`~tapt.encoders.base.Encoder`: texts tokenized by the
``tokenizers`` library from the folder's ``tokenizer.json`` (prompt prepended, truncated
to the preset's length), batched by a token budget longest first
(:mod:`tapt.encoders.token_batches`, as tapt's torch path batches), padded on the preset's
side and run through ONNX Runtime or OpenVINO with a set number of threads. The graph
holds pooling and normalisation, so its output is the embedding.

A graph whose activations are quantised at run time over the whole batch (int8 dynamic:
:attr:`~tapt.encoders.export_manifest.Manifest.batch_dependent`) is run one text per run: its
embedding of a text then depends on that text alone, as every other export's does, so
metrics do not move with the batch size or with what the embedding cache already held
(batched, the same evaluation scored nDCG@10 0.597 cold and 0.515 with 17 passages
cached). Slower than batching, but reproducible and cacheable; a static int8 export
(``--quantize int8``) batches.

The folder's manifest is checked before anything loads (:mod:`tapt.encoders.export_manifest`);
the embedding cache is keyed on the digests of the graph and tokenizer files.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from tapt.encoders.base import EncodedBatch, Encoder, TextKind, collect_in_order
from tapt.encoders.export_manifest import MANIFEST_FILE, ExportFolderError, Manifest, read_manifest
from tapt.encoders.token_batches import TokenizedTexts, pad_rows, token_budget_batches
from tapt.util.bounds import POSITIVE_INT, check_optional

TOKEN_BUDGET = 4096
"""Padded tokens per batch by default (as tapt's torch path on a CPU)."""
BLOCK_TEXTS = 16_384
"""Texts tokenized at a time: memory stays bounded on a 1M-passage corpus."""
TOKENIZER_FILE = "tokenizer.json"


class ExportOptionError(ValueError):
    """A torch loading flag given with an export, which fixed that setting when it was
    made: the message names the flag and the export's own setting."""


def check_export_options(manifest: Manifest, options) -> None:
    """Refuse, before anything loads, the torch loading options (a
    :class:`~tapt.encoders.factory.ModelOptions`) that an export cannot honour: its
    preset (prompts, pooling, maximum length) and precision were fixed when it was made,
    and it runs on the CPU without the model's code. Each :class:`ExportOptionError` names
    the flag and the export's setting; the defaults, and a value equal to the export's
    (``--max-seq-length`` its length, ``--dtype float32`` on a float32 export,
    ``--device cpu``), pass."""
    preset = manifest.preset
    where = manifest.folder / MANIFEST_FILE
    source = (manifest.record.get("source") or {}).get("name") or "SOURCE"
    again = f"tapt export {source} --backend {manifest.backend}"
    length = options.max_seq_length
    if length is not None and length != preset.max_seq_length:
        raise ExportOptionError(
            f"--max-seq-length {length}: the export was made with max length "
            f"{preset.max_seq_length} ({where}); drop the flag, or re-export with "
            f"{again} --max-seq-length {length}")
    if options.family not in (None, "auto"):
        raise ExportOptionError(
            f"--family {options.family}: the export's preset was fixed when it was made "
            f"(query prompt {preset.query_prompt!r}, passage prompt "
            f"{preset.document_prompt!r}, {preset.pooling} pooling, max length "
            f"{preset.max_seq_length}; {where}); drop the flag, or re-export with {again} "
            f"--family {options.family}")
    dtype = options.dtype or "auto"
    if dtype != "auto" and not (dtype == "float32" and manifest.precision == "float32"):
        raise ExportOptionError(
            f"--dtype {dtype}: the export runs in the precision it was made in, "
            f"{manifest.precision} ({where}); drop the flag (--dtype applies to the torch "
            "backend)")
    if options.device not in (None, "cpu"):
        raise ExportOptionError(
            f"--device {options.device}: an {manifest.backend} export runs on the CPU, "
            f"with {'ONNX Runtime' if manifest.backend == 'onnx' else 'OpenVINO'} ({where}); "
            "drop the flag, or evaluate the torch model on that device")
    if options.trust_remote_code:
        raise ExportOptionError(
            "--trust-remote-code: an export runs no model code (its graph holds the "
            f"model; {where}); drop the flag")


def runtime_session(manifest: Manifest, threads: int | None):
    """``run(feed) -> embeddings``: the folder's graph compiled by its runtime on the CPU,
    with ``threads`` intra-op threads (None: the runtime's default, all cores)."""
    path = str(manifest.folder / manifest.graph)
    if manifest.backend == "onnx":
        import onnxruntime

        options = onnxruntime.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initialisers are noise here
        session = onnxruntime.InferenceSession(path, options,
                                               providers=["CPUExecutionProvider"])
        return lambda feed: session.run(None, feed)[0]
    import openvino

    config = {"INFERENCE_PRECISION_HINT": "f32"}  # not bf16 on AMX CPUs: as exported
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = openvino.Core().compile_model(path, "CPU", config)
    request = compiled.create_infer_request()
    return lambda feed: np.array(request.infer(feed)[0], copy=True)


class ExportedEncoder(Encoder):
    """Encode with a ``tapt export`` folder through ONNX Runtime or OpenVINO.

    Args:
        folder: The export folder (its manifest is checked first).
        backend: ``onnx`` or ``openvino``; None takes the folder's.
        threads: Intra-op threads (None: the runtime's default).
        max_tokens_per_batch: Padded tokens per batch (default :data:`TOKEN_BUDGET`).
        show_progress: A progress bar over the texts.
        manifest: The folder's manifest, already checked (:func:`read_manifest`): not
            hashed again.

    Raises:
        ExportFolderError: the folder is no export, a file differs from its manifest, or
            it was exported for the other backend.
        ValueError: ``threads`` or ``max_tokens_per_batch`` is not a positive whole
            number.

    Example::

        with ExportedEncoder("runs/x/onnx-int8") as encoder:
            encoder.encode_queries(["Which binder does the primer use?"]).shape  # (1, 384)
    """

    def __init__(self, folder: str | os.PathLike, backend: str | None = None, *,
                 threads: int | None = None, max_tokens_per_batch: int | None = None,
                 show_progress: bool = False, manifest: Manifest | None = None) -> None:
        from tokenizers import Tokenizer

        self.manifest = manifest or read_manifest(folder, backend)
        self.name = str(folder)
        self.backend = self.manifest.backend
        self.threads = check_optional(POSITIVE_INT, threads, "threads")
        self.max_tokens = check_optional(POSITIVE_INT, max_tokens_per_batch,
                                         "max_tokens_per_batch") or TOKEN_BUDGET
        self.show_progress = show_progress
        preset = self.manifest.preset
        self.normalize = preset.similarity == "cosine"
        tokenizer_file = Path(folder) / TOKENIZER_FILE
        if TOKENIZER_FILE not in self.manifest.files:
            raise ExportFolderError(f"{tokenizer_file}: the export holds no tokenizer.json")
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(preset.max_seq_length)
        self._run = runtime_session(self.manifest, self.threads)

    @property
    def embedding_dim(self) -> int:
        return self.manifest.preset.dim

    @property
    def compute_dtype(self) -> str | None:
        """The export's precision: ``float32`` or its quantisation."""
        return self.manifest.precision

    def prompt(self, kind: TextKind) -> str:
        preset = self.manifest.preset
        return preset.query_prompt if kind == "query" else preset.document_prompt

    def cache_key(self, kind: TextKind = "document") -> dict:
        """The digests of every file the encoder reads, the prompt and the backend (and,
        for a batch-dependent graph, that it runs one text per run: embeddings an older
        tapt cached from its batches are not read back)."""
        key = {"export": self.manifest.graph_digest, "backend": self.backend,
               "kind": kind, "prompt": self.prompt(kind),
               "max_length": self.manifest.preset.max_seq_length}
        if self.manifest.batch_dependent:
            key["rows_per_run"] = 1
        return key

    def result_info(self) -> dict:
        """``evaluated.backend`` / ``evaluated.export`` of a result JSON."""
        return {"backend": self.backend,
                "export": {"precision": self.manifest.precision, "threads": self.threads,
                           "source": (self.manifest.record.get("source") or {}).get("name")}}

    def tokenize(self, texts: Sequence[str], kind: TextKind) -> TokenizedTexts:
        """Token ids of ``texts`` with ``kind``'s prompt, truncated, special tokens added."""
        prompt = self.prompt(kind)
        encodings = self.tokenizer.encode_batch([prompt + text for text in texts])
        return TokenizedTexts.from_lists([encoding.ids for encoding in encodings])

    def _feed(self, tokenized: TokenizedTexts, positions: np.ndarray) -> dict:
        preset = self.manifest.preset
        input_ids, mask = pad_rows(tokenized, positions, preset.pad_id,
                                   left=preset.padding_side == "left")
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in preset.inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        return feed

    def encode_stream(self, texts: Sequence[str], kind: TextKind = "document",
                      batch_size: int = 32) -> Iterator[EncodedBatch]:
        """Blocks of :data:`BLOCK_TEXTS` texts, each tokenized once and cut into batches
        of at most ``batch_size`` texts and ``max_tokens_per_batch`` padded tokens, longest
        first (one text per batch for a batch-dependent graph)."""
        rows = 1 if self.manifest.batch_dependent else check_optional(
            POSITIVE_INT, batch_size, "batch_size")
        bar = tqdm(total=len(texts), desc=f"encode {kind}s ({self.backend})", unit="text",
                   disable=None if self.show_progress else True)
        try:
            for start in range(0, len(texts), BLOCK_TEXTS):
                tokenized = self.tokenize(texts[start:start + BLOCK_TEXTS], kind)
                for positions in token_budget_batches(tokenized.lengths, self.max_tokens,
                                                      max_rows=rows):
                    embeddings = self._run(self._feed(tokenized, positions))
                    bar.update(len(positions))
                    yield EncodedBatch(positions=positions + start,
                                       embeddings=np.asarray(embeddings, dtype=np.float32),
                                       tokens=int(tokenized.lengths[positions].sum()))
        finally:
            bar.close()

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return collect_in_order(self.encode_stream(texts, "query", batch_size), len(texts),
                                self.embedding_dim)

    def encode_corpus(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return collect_in_order(self.encode_stream(texts, "document", batch_size),
                                len(texts), self.embedding_dim)

    def text_length(self, text: str) -> int:
        return len(self.tokenizer.encode(text).ids)

    def count_tokens(self, texts: Sequence[str]) -> int:
        return self.tokenize(texts, "document").total_tokens
