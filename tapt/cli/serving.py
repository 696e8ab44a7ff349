"""``tapt export`` (a model as an ONNX or OpenVINO folder for serving) and the serving flags
of ``tapt eval``: ``--backend`` (:func:`add_backend_args`) and ``--embedding-precision``
/ ``--rescore`` (:func:`add_precision_args`, checked by :func:`check_serving_args`).
Models and sentence-transformers are imported inside the handler."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from tapt.cli import terminal
from tapt.cli.number_types import calibration_size, rescore, seed, sequence_length, threads
from tapt.cli.options import check_folder, family_help

BACKEND_CHOICES = ("torch", "onnx", "openvino")
PRECISION_CHOICES = ("float32", "int8", "uint8", "binary", "ubinary")


def add_backend_args(parser: argparse.ArgumentParser) -> None:
    """``--backend torch|onnx|openvino`` and ``--threads`` of a command that loads a local
    model."""
    parser.add_argument("--backend", choices=BACKEND_CHOICES, default="torch",
                        help="torch, or a folder written by tapt export run by ONNX Runtime "
                             "(onnx, tapt[onnx]) or OpenVINO (openvino, tapt[openvino])")
    parser.add_argument("--threads", type=threads, default=None,
                        help="--backend onnx|openvino: intra-op threads (default: the "
                             "runtime's, all cores)")


def add_precision_args(parser: argparse.ArgumentParser) -> None:
    """``--embedding-precision`` and ``--rescore`` of ``tapt eval``."""
    group = parser.add_argument_group(
        "quantised embeddings (the corpus index holds quantised rows: "
        "sentence-transformers' quantize_embeddings, FAISS on the CPU)")
    group.add_argument("--embedding-precision", choices=PRECISION_CHOICES, default="float32",
                       help="corpus rows: float32 (exact search), int8 / uint8 (1 byte per "
                            "dimension, ranges calibrated on the passages), binary / ubinary "
                            "(1 bit per dimension, FAISS binary index, Hamming distance)")
    group.add_argument("--rescore", type=rescore, default=None, metavar="K",
                       help="rescore the quantised search's top (--top-k x K) passages with "
                            "the float32 query embedding (sentence-transformers' "
                            "rescore_multiplier; 4 is its usual value); default: rank by the "
                            "quantised scores")


def check_serving_args(args: argparse.Namespace) -> None:
    """Refuse, before anything loads, serving flags that do not combine (naming them)."""
    precision = getattr(args, "embedding_precision", "float32")
    backend = getattr(args, "backend", "torch")
    if getattr(args, "rescore", None) is not None and precision == "float32":
        raise ValueError("--rescore rescores a quantised index: add --embedding-precision "
                         "int8, uint8, binary or ubinary")
    if precision != "float32":
        if getattr(args, "search_backend", "auto") == "torch":
            raise ValueError(f"--embedding-precision {precision}: the quantised index is "
                             "FAISS's; drop --search-backend torch")
        for flag, value in (("--dims", getattr(args, "dims", None)),
                            ("--hybrid", getattr(args, "hybrid", None))):
            if value:
                raise ValueError(f"--embedding-precision {precision} and {flag}: the quantised "
                                 "index serves plain dense evaluation; drop one of them")
    if backend == "torch" and getattr(args, "threads", None) is not None:
        raise ValueError("--threads sets ONNX Runtime's or OpenVINO's threads: add --backend "
                         "onnx or openvino (torch takes OMP_NUM_THREADS)")
    # --dtype, --max-seq-length, --family, --device, --trust-remote-code with an export:
    # checked against its manifest when it is opened (tapt.encoders.exported.check_export_options)


def show_index(info: dict) -> None:
    """One line on a quantised corpus index (``evaluated.search``): precision, rescoring,
    bytes; nothing for float32."""
    search = info.get("search") or {}
    precision = search.get("embedding_precision", "float32")
    if precision == "float32":
        return
    from tapt.util.files import human

    rescore = search.get("rescore_multiplier")
    terminal.console.print(
        f"index: {search.get('index_rows', 0):,} {precision} rows of {search.get('dim')} "
        f"dimensions, {human(search.get('index_bytes', 0))}; "
        + (f"top {info.get('top_k')} x {rescore} rescored with the float32 query"
           if rescore else "ranked by the quantised scores"), highlight=False)


def add_parsers(commands) -> None:
    """``tapt export``."""
    export = commands.add_parser(
        "export", help="convert a model to one ONNX or OpenVINO graph (token ids to the "
                       "sentence embedding) for CPU serving, optionally int8, with a "
                       "checked manifest and a card")
    export.add_argument("model", help="Hub id, local path (e.g. runs/x/final) or "
                                      "package:NAME/sub/path")
    export.add_argument("--backend", choices=("onnx", "openvino"), required=True,
                        help="onnx (ONNX Runtime, tapt[onnx]) or openvino (tapt[openvino])")
    export.add_argument("--quantize", choices=("int8", "int8-dynamic", "int8-weights"),
                        default=None,
                        help="int8: static quantisation (weights and activations; ONNX "
                             "Runtime's quantize_static or NNCF), activation ranges "
                             "calibrated on --calibration-data: a passage's embedding does "
                             "not depend on its batch; onnx int8-dynamic: activations "
                             "quantised at run time over the whole batch, so an embedding "
                             "depends on its batch and tapt runs it one text per run "
                             "(slower); openvino int8-weights: weights only (NNCF), no "
                             "calibration")
    export.add_argument("--per-tensor", action="store_true",
                        help="onnx int8 / int8-dynamic: one scale per weight tensor instead "
                             "of per output channel (smaller, less exact)")
    export.add_argument("--calibration-data", type=Path, default=None, metavar="DIR",
                        help="int8: a local BEIR folder whose corpus.jsonl passages "
                             "calibrate the activation ranges (your own passages)")
    export.add_argument("--calibration-size", type=calibration_size, default=300,
                        help="int8: calibration passages drawn from --calibration-data")
    export.add_argument("--seed", type=seed, default=0, help="seed of the calibration sample")
    export.add_argument("--output", type=Path, required=True,
                        help="the export folder (must not exist; never the source)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace an existing --output that is a tapt export")
    export.add_argument("--family", default="auto", help=family_help())
    export.add_argument("--max-seq-length", type=sequence_length, default=None,
                        help="tokens per text the export truncates to (default: the "
                             "family's or the model's)")
    export.add_argument("--trust-remote-code", action="store_true",
                        help="allow the model's own code from the Hub (off by default)")
    export.add_argument("--quiet", action="store_true",
                        help="no progress bars and no info lines, only results and warnings")


def calibration_file(args: argparse.Namespace) -> Path | None:
    """``--calibration-data``'s corpus.jsonl (None without the flag)."""
    return None if args.calibration_data is None else \
        Path(args.calibration_data) / "corpus.jsonl"


def calibration_texts(args: argparse.Namespace) -> tuple[str, ...]:
    """The sampled passages of ``--calibration-data`` (read and checked before loading),
    sampled as the corpus streams by: only the sample is held in memory."""
    path = calibration_file(args)
    if path is None:
        return ()
    from tapt.data.beir import DataError, checked_passages, iter_jsonl
    from tapt.serving.export_folder import calibration_sample

    if not path.is_file():
        raise DataError(path, "not found or not a regular file (--calibration-data: a local "
                              "BEIR folder holding corpus.jsonl)")
    passages = checked_passages(iter_jsonl(path), path)
    return calibration_sample((passage.as_text() for _, passage in passages),
                              args.calibration_size, args.seed)


def cmd_export(args: argparse.Namespace) -> int:
    from tapt.encoders.backends import require_export
    from tapt.encoders.factory import ModelOptions
    from tapt.encoders.loading import (
        check_model_source,
        refuse_run_folder,
        refuse_serving_export,
    )
    from tapt.encoders.model_paths import resolve_model_path
    from tapt.serving.export_folder import (
        ExportSettings,
        check_export_output,
        export_for_serving,
    )

    static = args.quantize == "int8"
    settings = ExportSettings(backend=args.backend, quantize=args.quantize,
                              per_tensor=args.per_tensor,
                              calibration_source=None if args.calibration_data is None
                              else Path(args.calibration_data).name,
                              calibration_seed=args.seed if static else None)
    settings.check()  # flag combinations, before anything is read
    source = resolve_model_path(args.model)
    inputs = [("--calibration-data", calibration_file(args))]
    check_export_output(args.output, source, overwrite=args.overwrite, inputs=inputs)
    check_folder("--output", args.output.parent, shown=args.output)
    require_export(args.backend, args.quantize)  # one line naming tapt[onnx] / [openvino]
    refuse_run_folder(source, verb="export")  # RUN_DIR, not RUN_DIR/final
    check_model_source(source)
    refuse_serving_export(args.model, "tapt export converts a torch model", verb="export")
    settings = replace(settings, calibration_texts=calibration_texts(args))
    settings.check()  # an empty calibration corpus
    options = ModelOptions(family=args.family, max_seq_length=args.max_seq_length,
                           trust_remote_code=args.trust_remote_code, device="cpu",
                           dtype="float32")
    output = export_for_serving(args.model, args.output, settings, options=options,
                                overwrite=args.overwrite, inputs=inputs,
                                progress=terminal.show_progress(args))
    terminal.console.print(f"{settings.label()} export of {args.model} written to {output} "
                           f"({settings.conversion()})", highlight=False, soft_wrap=True,
                           markup=False)
    return 0


COMMANDS = {"export": cmd_export}
