"""The model card of an export folder: front matter (license, base model, backend tags,
``quantized`` relation for int8), what was done, the check against torch, and sixteen
lines that run the folder with the runtime and ``tokenizers`` alone, without tapt (a test runs
them with tapt, torch and transformers unimportable)."""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData, try_to_load_from_cache

from tapt.encoders.preset_record import base_model_id

RUNTIME = {
    "onnx": ("onnxruntime", 'onnxruntime.InferenceSession("model.onnx").run',
             "run(None, {name: feed[name] for name in preset[\"inputs\"]})[0]"),
    "openvino": ("openvino", ('openvino.Core().compile_model("openvino_model.xml", "CPU", '
                 '{"INFERENCE_PRECISION_HINT": "f32"})'),
                 "run({name: feed[name] for name in preset[\"inputs\"]})[0]"),
}
"""Per runtime: the module, what runs the graph, and its call on a feed."""
SNIPPET = """import json, numpy as np, {module}
from tokenizers import Tokenizer
preset = json.load(open("tapt_export.json"))["preset"]
tokenizer = Tokenizer.from_file("tokenizer.json")
tokenizer.enable_truncation(preset["max_seq_length"])
tokenizer.enable_padding(pad_id=preset["pad_id"], direction=preset["padding_side"])
run = {session}
def embed(texts, prompt):
    rows = tokenizer.encode_batch([prompt + text for text in texts])
    ids = np.array([row.ids for row in rows], dtype=np.int64)
    mask = np.array([row.attention_mask for row in rows], dtype=np.int64)
    feed = {{"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids}}
    return {call}
queries = embed(["Which binder does the primer use?"], preset["query_prompt"])
passages = embed(["The primer comprises a polyvinyl acetate binder."], preset["document_prompt"])
print(queries @ passages.T)  # cosine similarities when preset["normalized"]"""


def usage_snippet(backend: str) -> str:
    """Python that embeds a query and a passage with the folder as the working directory:
    the manifest's preset, the tokenizer, the runtime; nothing of tapt's."""
    module, session, call = RUNTIME[backend]
    return SNIPPET.format(module=module, session=session, call=call)


def source_file(source: str, revision: str | None, name: str) -> Path | None:
    """``name`` in the source model's folder, or in the Hub cache for a Hub id; None when
    there is none."""
    local = Path(source)
    if local.is_dir():
        return local / name if (local / name).is_file() else None
    cached = try_to_load_from_cache(source, name, revision=revision)
    return Path(cached) if isinstance(cached, str) else None


def source_license(source: str, revision: str | None) -> str | None:
    """The ``license`` of the source's model card front matter, or None."""
    card = source_file(source, revision, "README.md")
    if card is None:
        return None
    try:
        value = ModelCard.load(card).data.license
    except (OSError, ValueError):  # an unreadable card: no license claim
        return None
    return value if isinstance(value, str) else None


def export_card(spec, settings, manifest: dict, license_id: str | None) -> str:
    """The card's Markdown (``settings``: :class:`~tapt.serving.export_folder.ExportSettings`,
    ``manifest``: what :func:`~tapt.encoders.export_manifest.write_manifest` wrote, whose
    ``source`` (the model as given to ``tapt export``, its weights digest) the card names)."""
    recorded = manifest["source"]
    source, revision = recorded["name"], recorded.get("revision")
    base = base_model_id(spec.name_or_path)
    title = f"{source} for serving ({settings.label()})"
    tags = ["sentence-similarity", "tapt", settings.backend,
            *(["int8"] if settings.quantize else [])]
    card = ModelCardData(license=license_id, pipeline_tag="sentence-similarity",
                         model_name=title, tags=tags, base_model=base)
    if base and settings.quantize:
        card.base_model_relation = "quantized"
    preset, check = manifest["preset"], manifest.get("check") or {}
    versions = ", ".join(f"{name} {value}" for name, value in
                         (manifest.get("made_with") or {}).items() if value)
    rows = [("source model", f"`{source}`" + (f" (revision {revision})" if revision else "")),
            ("source weights", (f"BLAKE2b `{recorded['weights_blake2b']}` (every tensor's "
                                "name, shape, dtype and bytes)")),
            ("backend", settings.backend), ("conversion", settings.conversion()),
            ("graph", (f"`{manifest['graph']}`: token ids to the {preset['dim']}-dimension "
                       f"sentence embedding ({preset['pooling']} pooling"
                       + (", L2-normalised)" if preset["normalized"] else ")"))),
            ("prompts", (f"query {preset['query_prompt']!r}, passage "
                         f"{preset['document_prompt']!r}")),
            ("maximum length, padding", (f"{preset['max_seq_length']} tokens, "
                                         f"{preset['padding_side']}")),
            ("checked against torch", (f"lowest cosine {check.get('min_cosine_to_torch')} "
                                       f"(mean {check.get('mean_cosine_to_torch')}) over "
                                       f"{check.get('passages')} passages and "
                                       f"{check.get('queries')} queries; largest difference "
                                       "of a passage embedded alone and in a batch "
                                       f"{check.get('max_batch_difference')}")),
            ("made with", versions)]
    lines = ["---", card.to_yaml(), "---", "", f"# {title}", "",
             (f"`{source}` exported with `tapt export` for CPU serving. `tapt_export.json` "
              "holds the preset and the SHA-256 of every file; tapt refuses a folder whose "
              "files differ from it."), "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in rows]
    lines += ["", "## Use it without tapt", "",
              (f"`pip install {'onnxruntime' if settings.backend == 'onnx' else 'openvino'} "
               "tokenizers numpy`, then, in this folder (the preset in `tapt_export.json` says how "
               "texts become the graph's inputs):"), "", "```python",
              usage_snippet(settings.backend), "```", "",
              (f"With tapt: `tapt eval --model PATH --backend {settings.backend} --data DATA "
               "--split test` (`--threads N`), or `tapt.ExportedEncoder(PATH)` in Python."),
              ""]
    return "\n".join(lines)
