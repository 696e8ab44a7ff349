"""``tapt export``: a model as an ONNX or OpenVINO folder for serving, converted by
sentence-transformers' backend functions (none of the conversion is tapt's).

- ``onnx``: the model loaded with ``SentenceTransformer(..., backend="onnx")`` (Optimum
  exports it) and saved; ``quantize="int8"`` then runs
  ``sentence_transformers.backend.export_dynamic_quantized_onnx_model`` (ONNX Runtime's
  dynamic int8 quantisation, for one of its CPU targets), ``optimize="O1".."O4"``
  ``export_optimized_onnx_model`` (ONNX Runtime's graph optimisation levels; O4 is fp16
  and for GPUs).
- ``openvino``: loaded with ``backend="openvino"`` (Optimum Intel exports it) and saved;
  ``quantize="int8"`` runs ``export_static_quantized_openvino_model`` (NNCF post-training
  static quantisation), calibrated on passages the caller gives (by default it would
  download GLUE/SST-2; tapt runs offline).

The folder holds one weights file at the name its backend loads by default
(``onnx/model.onnx``, ``openvino/openvino_model.xml`` + ``.bin``): a quantised or
optimised file replaces the float32 one sentence-transformers wrote, so
``SentenceTransformer(DIR, backend=...)`` loads what the card describes. Beside it: the
tokenizer, modules and prompts, ``tapt_preset.json`` (``stage: export``, the backend and
conversion), the source's LICENSE when it has one, and a model card saying what was done.
The folder is staged and renamed into place (:mod:`tapt.util.files`); an existing one is
replaced only with ``overwrite`` and only when it is a tapt export; the source is never
written to.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tapt.encoders.backends import BACKENDS, require_backend
from tapt.encoders.model_paths import resolve_model_path
from tapt.encoders.preset_record import portable_model_name, write_preset_record
from tapt.training.export import base_model_id, check_replaceable, replace_folder
from tapt.util.bounds import CALIBRATION
from tapt.util.files import atomic_write_text, staging_folder
from tapt.util.outputs import check_apart

QUANTIZATIONS = ("int8",)
OPTIMIZATIONS = ("O1", "O2", "O3", "O4")
ONNX_TARGETS = ("arm64", "avx2", "avx512", "avx512_vnni")
"""sentence-transformers' dynamic-quantisation configurations (ONNX Runtime's CPU targets)."""
DEFAULT_FILES = {"onnx": ("onnx/model.onnx",),
                 "openvino": ("openvino/openvino_model.xml", "openvino/openvino_model.bin")}
"""The weights files each backend loads when no ``file_name`` is given."""
CALIBRATION_SAMPLES = 300
"""Calibration passages of an OpenVINO int8 export (Optimum Intel's default sample count)."""


class ExportError(ValueError):
    """An export that cannot be made as asked (flags, output folder, source)."""


def cpu_onnx_target() -> str:
    """The ONNX Runtime quantisation target of this CPU: arm64 on ARM, else the widest of
    avx512_vnni / avx512 / avx2 that ``/proc/cpuinfo`` lists (avx2 when it cannot be read)."""
    if platform.machine().lower() in ("arm64", "aarch64"):
        return "arm64"
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="utf-8").split())
    except OSError:
        return "avx2"
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


@dataclass(frozen=True)
class ExportSettings:
    """What ``tapt export`` does: ``backend`` onnx | openvino, then at most one of
    ``quantize`` (int8) and ``optimize`` (O1..O4, ONNX only); ``onnx_target`` the dynamic
    quantisation configuration (None: :func:`cpu_onnx_target`); ``calibration_source``
    the name of the data an OpenVINO int8 export calibrates on (its ``--calibration-data``;
    required there, refused elsewhere) and ``calibration_texts`` its sampled passages."""

    backend: str
    quantize: str | None = None
    optimize: str | None = None
    onnx_target: str | None = None
    calibration_texts: tuple[str, ...] = ()
    calibration_source: str | None = None

    def check(self) -> None:
        """An :class:`ExportError` naming the flags of a combination that cannot be made."""
        if self.backend not in BACKENDS or self.backend == "torch":
            raise ExportError(f"--backend must be onnx or openvino, got {self.backend!r}")
        if self.quantize is not None and self.quantize not in QUANTIZATIONS:
            raise ExportError(f"--quantize must be one of {', '.join(QUANTIZATIONS)}")
        if self.optimize is not None and self.optimize not in OPTIMIZATIONS:
            raise ExportError(f"--optimize must be one of {', '.join(OPTIMIZATIONS)}")
        if self.quantize and self.optimize:
            raise ExportError("--quantize and --optimize: give one (sentence-transformers "
                              "writes a quantised or an optimised file, not both)")
        if self.optimize and self.backend != "onnx":
            raise ExportError(f"--optimize {self.optimize}: ONNX Runtime's optimisation "
                              "levels apply to --backend onnx only")
        if self.onnx_target is not None and (self.backend != "onnx" or self.quantize is None):
            raise ExportError("--quantize-for applies to --backend onnx --quantize int8 only")
        if self.onnx_target is not None and self.onnx_target not in ONNX_TARGETS:
            raise ExportError(f"--quantize-for must be one of {', '.join(ONNX_TARGETS)}")
        static = self.backend == "openvino" and self.quantize == "int8"
        if static and self.calibration_source is None:
            raise ExportError("--backend openvino --quantize int8 calibrates on passages: "
                              "give --calibration-data (a local BEIR folder)")
        if self.calibration_source is not None and not static:
            raise ExportError("--calibration-data applies to --backend openvino --quantize "
                              "int8 only")
        if static and self.calibration_texts == ():
            return  # read after the flags are checked; export_for_serving checks again
        if static and not any(text.strip() for text in self.calibration_texts):
            raise ExportError(f"--calibration-data {self.calibration_source}: no non-empty "
                              "passage to calibrate on")

    @property
    def target(self) -> str:
        return self.onnx_target or cpu_onnx_target()

    def conversion(self) -> str:
        """One sentence on what was done, for the card and the record."""
        if self.backend == "onnx":
            if self.quantize:
                return ("ONNX export by Optimum, then dynamic int8 quantisation by ONNX Runtime "
                        "(sentence_transformers.backend.export_dynamic_quantized_onnx_model, "
                        f"configuration {self.target}): int8 weights, activations quantised "
                        "at run time")
            if self.optimize:
                return ("ONNX export by Optimum, then ONNX Runtime graph optimisation level "
                        f"{self.optimize} (sentence_transformers.backend."
                        "export_optimized_onnx_model)"
                        + ("; O4 stores fp16 weights and is meant for GPUs"
                           if self.optimize == "O4" else ""))
            return "ONNX export by Optimum (float32 weights)"
        if self.quantize:
            return ("OpenVINO IR export by Optimum Intel, then static int8 post-training "
                    "quantisation by NNCF (sentence_transformers.backend."
                    "export_static_quantized_openvino_model), calibrated on "
                    f"{len(self.calibration_texts)} passages of {self.calibration_source}")
        return "OpenVINO IR export by Optimum Intel (float32 weights)"

    def label(self) -> str:
        """``onnx``, ``onnx int8``, ``onnx O3``, ``openvino int8``."""
        return " ".join(part for part in (self.backend, self.quantize, self.optimize) if part)

    def record(self) -> dict:
        """The ``export`` entry of ``tapt_preset.json``."""
        data = asdict(self)
        data.pop("calibration_texts")
        data["calibration_passages"] = len(self.calibration_texts) or None
        data["onnx_target"] = self.target if self.backend == "onnx" and self.quantize else None
        data["conversion"] = self.conversion()
        data["weights_files"] = list(DEFAULT_FILES[self.backend])
        return data


def check_export_output(output: Path, source: str, *, overwrite: bool,
                        inputs: Sequence[tuple[str, str | os.PathLike | None]] = ()) -> None:
    """Refuse, before anything loads, an ``--output`` that is, holds or lies inside the
    source model or another input (``inputs``: the calibration corpus), or whose path holds
    a secret, ``--overwrite`` or not (:func:`tapt.util.outputs.check_apart`); or that exists
    (unless ``overwrite``, and then only a tapt export)."""
    output = Path(output)
    check_apart([("--output", output)], [("model", source), *inputs])
    check_replaceable(output, overwrite=overwrite, error=ExportError)


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


def export_for_serving(name: str, output: Path, settings: ExportSettings, *,
                       options=None, overwrite: bool = False,
                       inputs: Sequence[tuple[str, str | os.PathLike | None]] = ()) -> Path:
    """Load the model ``name`` (with ``options``, a
    :class:`~tapt.encoders.factory.ModelOptions`; its backend is set to
    ``settings.backend``) and write the serving folder ``output``; returns ``output``.
    ``inputs``: (flag, path) of further inputs the output must stay apart from (the
    calibration corpus; :func:`check_export_output`)."""
    from tapt.encoders.factory import ModelOptions, load_model

    settings.check()
    if settings.backend == "openvino" and settings.quantize and not settings.calibration_texts:
        raise ExportError("an OpenVINO int8 export needs calibration passages")
    source = resolve_model_path(name)
    check_export_output(output, source, overwrite=overwrite, inputs=inputs)
    require_backend(settings.backend)
    options = replace(options or ModelOptions(device="cpu"), backend=settings.backend)
    model, spec = load_model(name, options)  # Optimum converts a torch model on the fly
    output = Path(output)
    staging = staging_folder(output)
    staging.mkdir(parents=True)
    try:
        model.save(str(staging), create_model_card=False)
        if settings.quantize or settings.optimize:
            convert_in_place(model, staging, settings)
        copy_license(source, spec.revision, staging)
        record = write_preset_record(staging, model, spec, stage="export",
                                     backend=settings.backend, export=settings.record())
        atomic_write_text(staging / "README.md",
                          export_card(spec, settings, record, source_license(source,
                                                                             spec.revision)))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return replace_folder(staging, output, overwrite=overwrite)


def convert_in_place(model, folder: Path, settings: ExportSettings) -> None:
    """Run sentence-transformers' quantisation or optimisation on ``model`` into
    ``folder`` and put its file at the backend's default name (replacing the float32 one)."""
    from sentence_transformers import backend as st_backend

    if settings.backend == "onnx":
        suffix = f"qint8_{settings.target}" if settings.quantize else settings.optimize
        if settings.quantize:
            st_backend.export_dynamic_quantized_onnx_model(model, settings.target, str(folder),
                                                           file_suffix=suffix)
        else:
            st_backend.export_optimized_onnx_model(model, settings.optimize, str(folder),
                                                   file_suffix=suffix)
        replace_default_file(folder / "onnx", f"model_{suffix}.onnx", "model.onnx")
        return
    with tempfile.TemporaryDirectory() as calibration:
        Path(calibration, "train.jsonl").write_text(
            "".join(json.dumps({"text": text}) + "\n" for text in settings.calibration_texts),
            encoding="utf-8")
        suffix = "qint8_quantized"
        st_backend.export_static_quantized_openvino_model(
            model, None, str(folder), dataset_name=calibration, dataset_config_name="default",
            dataset_split="train", column_name="text", file_suffix=suffix)
    for extension in (".xml", ".bin"):
        replace_default_file(folder / "openvino", f"openvino_model_{suffix}{extension}",
                             f"openvino_model{extension}")


def replace_default_file(folder: Path, produced: str, default: str) -> None:
    """Move ``folder/produced`` over ``folder/default`` (and drop the default's external
    weights file, ``default_data``, which belonged to the float32 graph)."""
    made = folder / produced
    if not made.is_file():
        raise ExportError(f"sentence-transformers wrote no {made} (found: "
                          f"{sorted(p.name for p in folder.iterdir())})")
    (folder / f"{default}_data").unlink(missing_ok=True)
    made.replace(folder / default)


def source_file(source: str, revision: str | None, name: str) -> Path | None:
    """``name`` in the source model's folder, or in the Hub cache for a Hub id; None when
    there is none."""
    local = Path(source)
    if local.is_dir():
        return local / name if (local / name).is_file() else None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(source, name, revision=revision)
    return Path(cached) if isinstance(cached, str) else None


def copy_license(source: str, revision: str | None, folder: Path) -> None:
    """The source's LICENSE beside the export (the export is the same model's weights)."""
    license_file = source_file(source, revision, "LICENSE")
    if license_file is not None:
        shutil.copyfile(license_file, folder / "LICENSE")


def source_license(source: str, revision: str | None) -> str | None:
    """The ``license`` of the source's model card front matter, or None."""
    card = source_file(source, revision, "README.md")
    if card is None:
        return None
    from huggingface_hub import ModelCard

    try:
        value = ModelCard.load(card).data.license
    except (OSError, ValueError):  # an unreadable card: no license claim
        return None
    return value if isinstance(value, str) else None


def package_versions(backend: str) -> dict[str, str | None]:
    """The installed versions of the packages that made the export."""
    names = ["sentence-transformers", "optimum", *(
        ("optimum-onnx", "onnxruntime") if backend == "onnx" else
        ("optimum-intel", "openvino", "nncf"))]
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return versions


def export_card(spec, settings: ExportSettings, record: dict, license_id: str | None) -> str:
    """The model card: front matter (library, backend tags, base model, ``quantized``
    relation for int8) and a table of what was done and how to load it."""
    from huggingface_hub import ModelCardData

    source, revision = portable_model_name(spec.name_or_path, spec.revision)
    base = base_model_id(spec.name_or_path)
    title = f"{source} for serving ({settings.label()})"
    card = ModelCardData(license=license_id, library_name="sentence-transformers",
                         pipeline_tag="sentence-similarity", model_name=title,
                         tags=["sentence-transformers", "sentence-similarity", "tapt",
                               settings.backend, *([settings.quantize] if settings.quantize
                                                   else [])],
                         base_model=base)
    if base and settings.quantize:
        card.base_model_relation = "quantized"
    weights = ", ".join(f"`{name}`" for name in DEFAULT_FILES[settings.backend])
    versions = ", ".join(f"{name} {value}" for name, value in
                         package_versions(settings.backend).items() if value)
    rows = [("source model", f"`{source}`" + (f" (revision {revision})" if revision else "")),
            ("backend", settings.backend),
            ("quantisation", settings.quantize or "none"),
            ("optimisation level", settings.optimize or "none"),
            ("conversion", settings.conversion()),
            ("weights file", weights),
            ("pooling, prompts, maximum length",
             (f"{record['pooling']}, query {record['query_prompt']!r} / document "
             f"{record['document_prompt']!r}, {record['max_seq_length']}")),
            ("made with", versions)]
    lines = ["---", card.to_yaml(), "---", "", f"# {title}", "",
             (f"`{source}` converted with `tapt export` for CPU serving through "
             "sentence-transformers' backend functions; the embeddings are the source "
             "model's up to the conversion's rounding (int8 and O4 change them most: "
             "evaluate before serving)."), "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in rows]
    lines += ["", "### How to load", "", "```python",
              "from sentence_transformers import SentenceTransformer", "",
              f'model = SentenceTransformer("PATH_OR_REPO_ID", backend="{settings.backend}")',
              'queries = model.encode_query(["Which binder does the primer use?"])',
              ('passages = model.encode_document(["The primer comprises a polyvinyl acetate '
              'binder ..."])'), "scores = model.similarity(queries, passages)", "```", "",
              (f"Evaluate it with `tapt eval --model PATH --backend {settings.backend} --data "
              "DATA --split test`."), ""]
    return "\n".join(lines)
