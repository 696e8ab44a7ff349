"""``tapt export``'s folder: a SentenceTransformer converted to one ONNX or OpenVINO graph
(:mod:`tapt.serving.onnx_export`, :mod:`tapt.serving.openvino_export`), optionally int8,
beside its tokenizer files, a checked manifest (:mod:`tapt.encoders.export_manifest`), the
source's LICENSE and a card that shows how to run it without tapt.

Every export is checked before it is published: the folder is loaded back through
:class:`~tapt.encoders.exported.ExportedEncoder` and its embeddings of a few hundred texts of
mixed length (fixed ones and the calibration sample) are compared with the torch model's
(a float32 export that disagrees is an error; an int8 one records its cosines), and a few
of them are embedded alone as well as in batches (the largest difference is recorded: a
passage's embedding must not depend on the texts batched with it). The folder is staged
and renamed into place; an existing one is replaced only with ``overwrite`` and only
when its manifest reads back checked and it holds nothing else
(:mod:`tapt.util.folder_replace`, :data:`EXPORT_RECORD`); the source is never written to.
"""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tapt.cards.serving_card import export_card, source_file, source_license
from tapt.encoders.backends import require_export
from tapt.encoders.export_manifest import (
    DYNAMIC_LABEL,
    MANIFEST_FILE,
    Preset,
    read_manifest,
    write_manifest,
)
from tapt.encoders.exported import ExportedEncoder
from tapt.encoders.model_digest import weights_digest
from tapt.encoders.model_paths import PACKAGE_SCHEME, resolve_model_path
from tapt.encoders.preset_record import portable_model_name
from tapt.encoders.st_inference import stored_prompt
from tapt.serving import onnx_export, openvino_export
from tapt.serving.graph import ExportError, check_exportable, input_names
from tapt.serving.onnx_export import export_onnx, quantize_onnx_dynamic, quantize_onnx_static
from tapt.serving.openvino_export import export_openvino, quantize_openvino_int8
from tapt.util.bounds import CALIBRATION
from tapt.util.digests import bytes_digest
from tapt.util.files import atomic_write_text, staging_folder
from tapt.util.folder_replace import FolderRecord, check_replaceable, replace_folder
from tapt.util.outputs import check_apart
from tapt.util.provenance import installed_version, tapt_version
from tapt.util.redaction import redact

BACKENDS = ("onnx", "openvino")
QUANTIZATIONS = {"onnx": ("int8", "int8-dynamic"), "openvino": ("int8", "int8-weights")}
"""What each backend quantises: int8 is static on both (weights and activations, activation
ranges calibrated on the user's passages: ONNX Runtime's ``quantize_static``, NNCF's
``quantize``); onnx int8-dynamic quantises activations at run time over the whole batch
(so the runtime runs it one text per run); openvino int8-weights is weight-only."""
FLOAT32_MIN_COSINE = 0.9999
"""A float32 export whose embedding of a check passage has a lower cosine to torch's is
wrong (traced with the wrong shapes, a pooling the graph lost): refused."""
CHECK_TEXTS = ("An epoxy primer with zinc phosphate pigment and a bisphenol-A binder.",
               "A silicone sealant cured by an oxime crosslinker.", "Titanium dioxide.")
"""Passages every export is checked on (with :func:`mixed_length_texts` and the
calibration sample)."""
CHECK_WORDS = ("epoxy", "primer", "zinc", "phosphate", "pigment", "bisphenol", "binder",
               "silicone", "sealant", "oxime", "crosslinker", "titanium", "dioxide", "acrylic",
               "latex", "emulsion", "viscosity", "thickener", "surfactant", "solvent", "cure",
               "adhesion", "hardness", "gloss", "film", "coating", "polymer", "resin",
               "filler", "dispersant", "defoamer", "25", "%", "wt", "pH", "7.5", "C")
"""The words of the fixed check texts."""
CHECK_MIXED = 200
"""Fixed texts of mixed length (1 to :data:`CHECK_LONGEST` words) every export is checked
on: short ones, long ones and ones past the maximum length, whatever the corpus."""
CHECK_LONGEST = 400
CHECK_QUERIES = 20
"""Check texts also embedded as queries (the query prompt is checked too)."""
CHECK_ALONE = 24
"""Check texts also embedded one per run, compared with their embeddings in batches."""
PACKAGES = {"onnx": ("torch", "onnx", "onnxscript", "onnxruntime"),
            "openvino": ("torch", "openvino", "nncf")}


@dataclass(frozen=True)
class ExportSettings:
    """What ``tapt export`` makes: ``backend`` onnx | openvino; ``quantize`` None or one of
    :data:`QUANTIZATIONS` of the backend; ``per_tensor`` ONNX int8 weight scales per tensor
    instead of per output channel; ``calibration_source`` the name of the data a static
    int8 export calibrates on (``--calibration-data``, required there, refused elsewhere),
    ``calibration_texts`` its sampled passages and ``calibration_seed`` the sample's
    seed."""

    backend: str
    quantize: str | None = None
    per_tensor: bool = False
    calibration_source: str | None = None
    calibration_texts: tuple[str, ...] = ()
    calibration_seed: int | None = None

    @property
    def static(self) -> bool:
        """int8 with calibrated activation ranges (``--quantize int8``, either backend)."""
        return self.quantize == "int8"

    @property
    def dynamic(self) -> bool:
        """ONNX int8 with activation ranges taken per run (``--quantize int8-dynamic``)."""
        return self.backend == "onnx" and self.quantize == "int8-dynamic"

    def check(self) -> None:
        """An :class:`ExportError` naming the flags of a combination that cannot be made."""
        if self.backend not in BACKENDS:
            raise ExportError(f"--backend must be onnx or openvino, got {self.backend!r}")
        if self.quantize is not None and self.quantize not in QUANTIZATIONS[self.backend]:
            raise ExportError(f"--quantize {self.quantize}: the {self.backend} backend "
                              f"quantises {' or '.join(QUANTIZATIONS[self.backend])}")
        if self.per_tensor and (self.backend != "onnx" or self.quantize is None):
            raise ExportError("--per-tensor applies to --backend onnx --quantize int8 or "
                              "int8-dynamic only")
        if self.static and self.calibration_source is None:
            other = ("int8-weights for weights only" if self.backend == "openvino" else
                     "int8-dynamic for activations quantised per batch (an embedding "
                     "then depends on its batch: it runs one text per run)")
            raise ExportError(f"--backend {self.backend} --quantize int8 calibrates its "
                              "activation ranges on passages: give --calibration-data (a "
                              f"local BEIR folder of your corpus), or --quantize {other}")
        if self.calibration_source is not None and not self.static:
            raise ExportError("--calibration-data applies to --quantize int8 (static) only")
        if self.static and self.calibration_texts and not any(
                text.strip() for text in self.calibration_texts):
            raise ExportError(f"--calibration-data {self.calibration_source}: no non-empty "
                              "passage to calibrate on")

    def label(self) -> str:
        """``onnx``, ``onnx int8``, ``openvino int8-weights``."""
        return " ".join(part for part in (self.backend, self.quantize) if part)

    def quantization(self) -> dict | None:
        """The manifest's ``quantization`` entry (None for float32)."""
        if self.quantize is None:
            return None
        scales = "per tensor" if self.per_tensor else "per channel"
        if self.dynamic:
            return {"label": DYNAMIC_LABEL, "method": "onnxruntime.quantization."
                    f"quantize_dynamic, QInt8 weights {scales}, activations at run time",
                    "per_channel": not self.per_tensor,
                    "activations": ("quantised at run time over the whole batch: an "
                                    "embedding depends on the texts run with it, so tapt "
                                    "runs this graph one text per run")}
        if self.quantize == "int8-weights":
            return {"label": "int8 weights", "method": "nncf.compress_weights INT8_ASYM "
                    "(weights only; activations float32)"}
        sample = "\n".join(self.calibration_texts).encode("utf-8")
        calibration = {"source": self.calibration_source,
                       "passages": len(self.calibration_texts),
                       "seed": self.calibration_seed, "sample_sha256": bytes_digest(sample)}
        if self.backend == "onnx":
            return {"label": "int8 static", "method": "onnxruntime.quantization."
                    f"quantize_static, QDQ, QInt8 weights {scales} (symmetric), QUInt8 "
                    "activations with MinMax-calibrated ranges; linear layers only, but "
                    "those reading the activation function (the feed-forward's down "
                    "projection)", "per_channel": not self.per_tensor,
                    "activations": "ranges calibrated once, fixed in the graph",
                    "calibration": calibration}
        return {"label": "int8 static", "method": "nncf.quantize, transformer preset "
                "(weights and activations; activation ranges calibrated)",
                "activations": "ranges calibrated once, fixed in the graph",
                "calibration": calibration}

    def conversion(self) -> str:
        """One sentence on what was done, for the card."""
        made = ("torch.onnx.export (dynamo exporter), opset 18" if self.backend == "onnx"
                else "openvino.convert_model, IR in float32")
        quantization = self.quantization()
        return made if quantization is None else f"{made}; then {quantization['method']}"


def export_entries(folder: Path) -> list[str]:
    """What an export folder holds by its manifest, checked (:func:`read_manifest`: every
    file it lists as written): those files and the manifest itself."""
    return [*read_manifest(folder).files, MANIFEST_FILE]


EXPORT_RECORD = FolderRecord("tapt export", MANIFEST_FILE, export_entries)
"""What ``--overwrite`` may replace: a tapt export, by its checked manifest."""


def check_export_output(output: Path, source: str, *, overwrite: bool,
                        inputs: Sequence[tuple[str, str | os.PathLike | None]] = ()) -> None:
    """Refuse, before anything loads, an ``--output`` that is, holds or lies inside the
    source model or another input (``inputs``: the calibration corpus), or whose path holds
    a secret (:func:`tapt.util.outputs.check_apart`); a symbolic link; or that exists
    (unless ``overwrite``, and then only a tapt export that holds nothing else:
    :mod:`tapt.util.folder_replace`)."""
    output = Path(output)
    check_apart([("--output", output)], [("model", source), *inputs])
    check_replaceable(output, overwrite=overwrite, error=ExportError, record=EXPORT_RECORD)


def calibration_sample(texts: Iterable[str], size: int, seed: int) -> tuple[str, ...]:
    """``size`` of the non-blank ``texts`` drawn without replacement (all of them, in order,
    when fewer), seeded. ``texts`` is read once as it streams by, holding only the sample:
    reservoir sampling (Vitter's Algorithm R; the standard library samples only sequences
    already in memory)."""
    CALIBRATION.check(size, "calibration size")
    draw = random.Random(seed)
    sample: list[str] = []
    seen = 0
    for text in texts:
        if not text.strip():
            continue
        if len(sample) < size:
            sample.append(text)
        else:
            slot = draw.randrange(seen + 1)
            if slot < size:
                sample[slot] = text
        seen += 1
    return tuple(sample)


def model_preset(model) -> Preset:
    """The manifest's preset of a loaded SentenceTransformer."""
    tokenizer = model.tokenizer
    if tokenizer.pad_token_id is None:
        raise ExportError("the tokenizer has no padding token: batches of the exported "
                          "graph cannot be padded (set tokenizer.pad_token first)")
    pooling = next((module for module in model if type(module).__name__ == "Pooling"), None)
    mode = str(pooling.get_config_dict().get("pooling_mode", "?")) if pooling is not None else "none"
    return Preset(query_prompt=stored_prompt(model, "query") or "",
                  document_prompt=stored_prompt(model, "document") or "",
                  max_seq_length=int(model.max_seq_length),
                  padding_side=tokenizer.padding_side, pad_id=int(tokenizer.pad_token_id),
                  inputs=list(input_names(model)), dim=int(model.get_embedding_dimension()),
                  normalized=any(type(module).__name__ == "Normalize" for module in model),
                  similarity=model.similarity_fn_name or "cosine", pooling=mode)


def calibration_inputs(model, texts: Sequence[str], names: Sequence[str]
                       ) -> list[dict[str, np.ndarray]]:
    """The graph's inputs of each calibration passage (document prompt, truncated)."""
    prompt = stored_prompt(model, "document") or ""
    rows = []
    for text in texts:
        features = model.tokenizer([prompt + text], truncation=True,
                                   max_length=model.max_seq_length, return_tensors="np")
        row = {name: np.asarray(features[name], dtype=np.int64) for name in names
               if name in features}
        if "token_type_ids" in names and "token_type_ids" not in row:
            row["token_type_ids"] = np.zeros_like(row["input_ids"])
        rows.append(row)
    return rows


def write_graph(model, folder: Path, settings: ExportSettings, *,
                progress: bool = True) -> str:
    """Convert and (when asked) quantise into ``folder``; returns the graph's file name.
    ``progress``: the quantiser's own progress bars (NNCF's)."""
    calibration = (calibration_inputs(model, settings.calibration_texts, input_names(model))
                   if settings.static else None)
    if settings.backend == "onnx":
        export_onnx(model, folder)
        if settings.static:
            quantize_onnx_static(folder, calibration, per_channel=not settings.per_tensor)
        elif settings.dynamic:
            quantize_onnx_dynamic(folder, per_channel=not settings.per_tensor)
        return onnx_export.GRAPH_FILE
    export_openvino(model, folder)
    if settings.quantize:
        quantize_openvino_int8(folder, calibration=calibration, progress=progress)
    return openvino_export.GRAPH_FILE


def mixed_length_texts(count: int = CHECK_MIXED, seed: int = 0) -> list[str]:
    """``count`` fixed texts of :data:`CHECK_WORDS`, 1 to :data:`CHECK_LONGEST` words long
    (log-uniform: as many short as long ones), the same on every run."""
    draw = random.Random(seed)
    lengths = [max(1, round(CHECK_LONGEST ** draw.random())) for _ in range(count)]
    return [" ".join(draw.choices(CHECK_WORDS, k=length)) for length in lengths]


def check_texts(settings: ExportSettings) -> list[str]:
    """What every export is checked on: :data:`CHECK_TEXTS`, :func:`mixed_length_texts`
    and the calibration sample."""
    return list(CHECK_TEXTS) + mixed_length_texts() + list(settings.calibration_texts)


def check_against_torch(model, folder: Path, settings: ExportSettings) -> dict:
    """Embed :func:`check_texts` as passages (the first :data:`CHECK_QUERIES` as queries
    too) through the written folder and through torch: the lowest and mean cosine between
    them; and :data:`CHECK_ALONE` of them, spread over the list, one per run: the largest
    difference to their embeddings in batches. A float32 export below
    :data:`FLOAT32_MIN_COSINE` raises :class:`ExportError`."""
    texts = check_texts(settings)
    queries = texts[:CHECK_QUERIES]
    reference = np.concatenate([model.encode_document(texts, convert_to_numpy=True),
                                model.encode_query(queries, convert_to_numpy=True)])
    alone = texts[::max(1, len(texts) // CHECK_ALONE)][:CHECK_ALONE]
    with ExportedEncoder(folder, settings.backend, threads=1) as encoder:
        exported = np.concatenate([encoder.encode_corpus(texts),
                                   encoder.encode_queries(queries)])
        batched = encoder.encode_corpus(alone)
    with ExportedEncoder(folder, settings.backend, threads=1,
                         max_tokens_per_batch=1) as encoder:  # one text per run
        single = encoder.encode_corpus(alone)
    cosine = (exported * reference).sum(1) / np.maximum(
        np.linalg.norm(exported, axis=1) * np.linalg.norm(reference, axis=1), 1e-12)
    lowest = float(cosine.min())
    if settings.quantize is None and lowest < FLOAT32_MIN_COSINE:
        raise ExportError(f"the {settings.backend} graph's embeddings differ from the torch "
                          f"model's (cosine {lowest:.5f} on a check passage): the export "
                          "is wrong, not written")
    return {"passages": len(texts), "queries": len(queries),
            "min_cosine_to_torch": round(lowest, 6),
            "mean_cosine_to_torch": round(float(cosine.mean()), 6),
            "alone_and_batched": len(alone),
            "max_batch_difference": float(np.abs(batched - single).max())}


def export_for_serving(name: str, output: Path, settings: ExportSettings, *,
                       options=None, overwrite: bool = False,
                       inputs: Sequence[tuple[str, str | os.PathLike | None]] = (),
                       progress: bool = True) -> Path:
    """Load the model ``name`` with torch (``options``, a
    :class:`~tapt.encoders.factory.ModelOptions`) and write the serving folder ``output``;
    returns ``output``. ``inputs``: (flag, path) of further inputs the output must stay
    apart from (the calibration corpus; :func:`check_export_output`); ``progress``: the
    quantiser's progress bars."""
    from tapt.encoders.factory import ModelOptions, load_model

    settings.check()
    if settings.static and not settings.calibration_texts:
        raise ExportError("a static int8 export needs calibration passages")
    source = resolve_model_path(name)
    check_export_output(output, source, overwrite=overwrite, inputs=inputs)
    require_export(settings.backend, settings.quantize)
    model, spec = load_model(name, options or ModelOptions(device="cpu", dtype="float32"))
    check_exportable(model)
    preset = model_preset(model)
    output = Path(output)
    staging = staging_folder(output)
    staging.mkdir(parents=True)
    try:
        graph = write_graph(model, staging, settings, progress=progress)
        model.tokenizer.save_pretrained(str(staging))
        record = {"tapt_version": tapt_version(),
                  "source": source_record(name, spec.revision, weights_digest(model)),
                  "conversion": settings.conversion(),
                  "opset": 18 if settings.backend == "onnx" else None,
                  "quantization": settings.quantization(),
                  "made_with": {package: installed_version(package)
                                for package in PACKAGES[settings.backend]}}
        write_manifest(staging, backend=settings.backend, graph=graph, preset=preset,
                       **record)
        record["check"] = check_against_torch(model, staging, settings)
        body = write_manifest(staging, backend=settings.backend, graph=graph,
                              preset=preset, **record)
        copy_license(source, spec.revision, staging)
        atomic_write_text(staging / "README.md",
                          export_card(spec, settings, body, source_license(source,
                                                                             spec.revision)))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return replace_folder(staging, output, overwrite=overwrite, record=EXPORT_RECORD,
                          error=ExportError)


def source_record(name: str, revision: str | None, weights: str) -> dict:
    """The manifest's ``source``: the model as given to ``tapt export`` (``name``) with its
    ``revision`` and the BLAKE2b of the weights converted (``weights_blake2b``). A Hub id
    and ``package:NAME/...`` are kept as they are, a Hub cache snapshot becomes its Hub id
    and commit, and a local folder is its path as given (``runs/scifact/final``, not its
    last part ``final``, which every run's export shares), a secret in it redacted."""
    portable, portable_revision = portable_model_name(name, revision)
    if Path(name).exists() and portable_revision is None and \
            not name.startswith(PACKAGE_SCHEME):  # a local folder, not a Hub snapshot
        portable = redact(name)
    return {"name": portable, "revision": portable_revision, "weights_blake2b": weights}


def copy_license(source: str, revision: str | None, folder: Path) -> None:
    """The source's LICENSE beside the export (the export is the same model's weights)."""
    license_file = source_file(source, revision, "LICENSE")
    if license_file is not None:
        shutil.copyfile(license_file, folder / "LICENSE")


__all__ = [
    "BACKENDS",
    "MANIFEST_FILE",
    "QUANTIZATIONS",
    "ExportSettings",
    "calibration_sample",
    "check_export_output",
    "export_for_serving",
]
