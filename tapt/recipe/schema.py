"""The sections of a TAPT recipe, the base it shares with the DAPT recipe
(:mod:`tapt.recipe.dapt`), and TAPT's cross-field checks."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Annotated, Any, ClassVar, Generic, Literal, TypeVar

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from tapt.data.pseudo_rows import check_pseudo_settings
from tapt.data.relevance import parse_relevant_from
from tapt.data.splits import decontamination_problem
from tapt.recipe.base import RecipeError, Section, Seed, local_path
from tapt.recipe.loss import LossSettings
from tapt.recipe.selection import GuardSettings, check_average_last
from tapt.util import bounds
from tapt.util.families import registered_families
from tapt.util.ids import hub_id_problem


class LoraSettings(Section):
    """LoRA adapters through peft; merged into the base weights at export."""

    enabled: bool = False
    """Train LoRA adapters instead of every weight."""
    r: Annotated[int, bounds.LORA_RANK] = 16
    """LoRA rank."""
    alpha: Annotated[int, bounds.LORA_ALPHA] = 32
    """LoRA scaling numerator (the update is scaled by alpha / r)."""
    dropout: Annotated[float, bounds.DROPOUT] = 0.05
    """Dropout on the LoRA adapters' input."""
    target_modules: list[str] | str | None = None
    """None lets peft pick the model type's defaults."""

    @field_validator("target_modules")
    @classmethod
    def _some_modules(cls, modules: list[str] | str | None) -> list[str] | str | None:
        if modules == []:
            raise ValueError("an empty list adapts nothing; give module names or leave it "
                             "out (peft's defaults)")
        return modules


class ModelSettings(Section):
    may_be_empty: ClassVar[frozenset[str]] = frozenset({"query_prompt", "document_prompt"})

    name: str
    """Hub id, local path, or ``package:NAME/sub/path`` for a model shipped in a Python package."""
    family_module: str | None = None
    """A module that registers model families (``tapt.register_family``), imported when the
    recipe is validated, before ``family`` is checked: a dotted module name Python can import,
    or the path of a ``.py`` file (see :func:`import_family_module`)."""
    family: str = "auto"
    """A registered family (``tapt.util.families.registered_families``) or ``auto``."""
    max_seq_length: Annotated[int, bounds.SEQUENCE_LENGTH] | None = None
    """Tokens per text when encoding and training (default: the family's or the model's)."""
    pooling: Literal["cls", "mean", "max", "lasttoken", "weightedmean"] | None = None
    """Pooling over token embeddings (default: the family's, else the model's own)."""
    query_prompt: str | None = None
    """Text put before every query (default: the family's; empty for none)."""
    document_prompt: str | None = None
    """Text put before every passage (default: the family's; empty for none)."""
    trust_remote_code: bool = False
    """Run the model repository's own Python code (GTE, Nomic need it)."""
    revision: str | None = None
    """Hub model revision: branch, tag or commit (None: the default branch)."""
    lora: LoraSettings = LoraSettings()

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if name.startswith("package:"):
            package = name[len("package:"):].partition("/")[0]
            if not all(part.isidentifier() for part in package.split(".")):
                raise ValueError("expected package:NAME/sub/path, NAME an importable Python "
                                 "package")
            return name
        return local_path(name, folder=True)

    @field_validator("family_module")  # declared before family, so validated before it
    @classmethod
    def _import_family_module(cls, module: str | None) -> str | None:
        return None if module is None else import_family_module(module)

    @field_validator("family")
    @classmethod
    def _check_family(cls, family: str) -> str:
        names = registered_families()
        if family != "auto" and family not in names:
            raise ValueError(f"unknown model family; choose one of {names} or auto (a family "
                             "registered from Python: name its module in model.family_module)")
        return family


def import_family_module(name: str) -> str:
    """Import ``name`` once per process, for the families it registers: a dotted module name
    (installed or on ``PYTHONPATH``) or the path of a ``.py`` file (``~`` expanded; relative
    to the working directory). Its code runs with the user's rights: it is trusted as the
    user's own code, named in the user's own recipe, like the recipe itself. A ValueError it
    raises (``register_family``'s) becomes an error naming ``model.family_module``; any
    other exception propagates with its traceback into that code."""
    if name.endswith(".py"):
        path = Path(os.path.expanduser(name))
        if not path.is_file():
            raise ValueError(f"no such Python file: {path}")
        key = "tapt_family_module_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
        if key in sys.modules:
            return name
        spec = importlib.util.spec_from_file_location(key, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except ImportError as err:
            del sys.modules[key]  # a later load tries again
            raise ValueError(f"importing {path} failed: {err}") from None
        except BaseException:
            del sys.modules[key]
            raise
        return name
    if not all(part.isidentifier() for part in name.split(".")):
        raise ValueError("expected a dotted Python module name (my_pkg.families) or the path "
                         "of a .py file")
    try:
        importlib.import_module(name)
    except ImportError as err:
        raise ValueError(f"cannot import module '{name}' ({err}); install it, add its folder "
                         "to PYTHONPATH, or give the path of its .py file") from None
    return name


class DataSettings(Section):
    path: str
    """Local BEIR folder or Hub dataset id (e.g. vinven7/FormBench)."""
    config: str | None = None
    """Hub config or subfolder: structured (C1), random (C0), sample."""
    revision: str | None = None
    """Hub dataset revision: branch, tag or commit (None: the default branch)."""
    train_split: str = "train"
    """Split whose queries train the model."""
    dev_split: str = "dev"
    """Split evaluated at every eval step (the best checkpoint is chosen on it)."""
    test_split: str = "test"
    """Split of ``tapt train --test`` (full corpus, after training)."""
    soft_negative: bool = False
    """Add the soft negative (grade 1) as a second explicit negative column."""
    mined_negatives: str | None = None
    """A ``tapt mine`` output for the train split: its negatives become more columns."""
    negatives_per_query: Annotated[int, bounds.NEGATIVES] = 0
    """Mined negatives per row (after the graded ones); needs ``mined_negatives``."""
    missing_hard_negative: Literal["drop", "pair"] = "drop"
    """A query without a hard negative (on binary qrels with ``mined_negatives``: without a
    mined one): ``drop`` it, or train it as a (query, anchor) ``pair``."""
    with_title: bool = True
    """Encode passages as title + text (else the text only)."""
    dev_distractors: Annotated[int, bounds.COUNT] | None = 20000
    """Dev sub-corpus: every judged dev passage plus this many distractors (None: all)."""
    dev_seed: Seed = 0
    """Seed of the dev sub-corpus's distractor sample (and of ``dev_from_train``'s carve)."""
    dev_from_train: Annotated[float, bounds.DEV_CARVE] | None = None
    """For data without a dev split: carve ``dev_split`` from the train queries, this many
    (a whole number) or this fraction (0 < f < 1) of those with a relevant passage, chosen
    by ``dev_seed``; the rest train. No query is in both; the dataset folder is not
    touched; results record the carve (tapt.data.splits). None: read ``dev_split``."""
    dev_carve: Literal["group", "query"] = "group"
    """How ``dev_from_train`` carves: ``group`` (default) takes whole groups of train queries
    connected through shared relevant passages, so no dev query has a relevant passage that
    a training query has as a positive (dev then measures unseen passages, as test does);
    ``query`` takes single queries, whose relevant passages are often still trained on, so
    dev rewards memorising them (kept for comparison with older runs; warned of)."""
    decontaminate: list[str] = Field(default_factory=list)
    """Splits (e.g. ``[test]``) whose relevant passages training must never see: train
    judgments of those passages are dropped, and train queries left without a relevant
    passage with them (counts logged and recorded in results and card; tapt.data.overlap)."""
    lenient: bool = False
    """Accept empty passages and queries without an anchor (non-FormBench BEIR sets)."""
    relevant_from: Literal["auto"] | Annotated[int, bounds.GRADE] = "auto"
    """Lowest relevant grade (binary metrics, training anchors): ``auto`` is 3 when the
    qrels hold a grade >= 3 (FormBench: 3 anchor, 2 hard, 1 soft negative), else 1 (BEIR:
    relevant passages as anchors, in-batch and mined negatives); see tapt.data.relevance."""
    weak_pairs: Literal["none", "title", "ict"] = "none"
    """Also train on weak pairs from the corpus passages alone (no query, no judgment read):
    ``title`` (a passage's title -> its text) or ``ict`` (inverse cloze: a sentence -> the
    rest of its passage), as their own dataset beside the labelled rows, each batch from
    one of them in proportion to their sizes (tapt.data.weak_pairs)."""
    weak_pairs_max: Annotated[int, bounds.WEAK_PAIRS] | None = None
    """At most this many weak pairs, a seeded sample (None: one per usable passage)."""
    weak_pairs_seed: Seed = 0
    """Seed of the weak pairs' sample (and of ICT's sentence choice)."""
    pseudo_queries: str | None = None
    """A ``tapt pseudo`` output (corpus sentences labelled by a teacher: BM25, a model, the
    untrained hybrid), its own dataset beside the labelled rows (tapt.data.pseudo_rows)."""
    pseudo_mix: Literal["proportional", "only"] = "proportional"
    """``proportional``: each batch from the labelled or the pseudo-query rows, in
    proportion to their sizes (``pseudo_max`` sets the ratio); ``only``: pseudo-query rows
    alone (a lexical model; or pseudo-queries first, then labels from this run's export)."""
    pseudo_passages: Literal["unseen", "all"] = "unseen"
    """``unseen``: no pseudo-query row touching a passage training must not see
    (``decontaminate``'s, a carved dev's); ``all``: the held-out passages too, as a
    deployment adapts to its whole corpus (the run records how many it read); a carved
    dev's passages stay unread, so dev still measures passages training never saw."""
    pseudo_negatives: Annotated[int, bounds.NEGATIVES] = 1
    """Teacher negatives per pseudo-query row (rows with fewer are left out; 0: pairs)."""
    pseudo_max: Annotated[int, bounds.WEAK_PAIRS] | None = None
    """At most this many pseudo-query rows, a sample seeded by ``pseudo_seed``."""
    pseudo_seed: Seed = 0
    """Seed of the pseudo-query rows' sample."""
    batch_by: str = "none"
    """Batches from one group: ``none`` (random, no duplicate texts), ``title`` (the anchor
    passages' title: one patent per batch in FormBench), or ``label:FIELD`` (the anchors'
    ``labels.FIELD`` in corpus.jsonl); see tapt.training.grouped_batches."""

    @field_validator("batch_by", mode="before")  # before the str check: YAML's mappings
    @classmethod
    def _check_batch_by(cls, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1 and next(iter(value)) == "label":
            field_name = next(iter(value.values()))  # YAML read label: X as {label: X}
            written = "label:" if field_name is None else f"label: {field_name}"
            raise ValueError(f"{written!r} was read as a YAML mapping, not text: write the "
                             "field right after the colon, label:FIELD (e.g. label:domain)")
        if not isinstance(value, str) or not value.strip():
            return value  # pydantic's string check names the type; Section's, a blank
        if value == "label:" or (value.startswith("label:") and not value[6:].strip()):
            raise ValueError(f"{value!r} names no label field: label:FIELD, e.g. "
                             "label:domain (the anchors' labels.FIELD in corpus.jsonl)")
        if value in ("none", "title") or value.startswith("label:"):
            return value
        raise ValueError(f"expected none, title or label:FIELD, got {value!r}")

    @field_validator("dev_from_train", mode="before")  # before coercion: 1.0 vs 1
    @classmethod
    def _refuse_a_whole_fraction(cls, size: Any) -> Any:
        if bounds.is_one_point_zero(size):
            raise ValueError(bounds.ONE_POINT_ZERO)
        return size

    @field_validator("dev_from_train")
    @classmethod
    def _check_dev_from_train(cls, size: float | None) -> int | float | None:
        if size is None:
            return size
        if not size.is_integer() and not 0.0 < size < 1.0:
            raise ValueError(f"expected a number of queries (>= 1) or a fraction in (0, 1), "
                             f"got {size}")
        return int(size) if size.is_integer() else size

    @field_validator("relevant_from", mode="before")  # before coercion: True, 2.5
    @classmethod
    def _check_relevant_from(cls, value: Any) -> Any:
        parse_relevant_from(value)  # as a field validator, so that the error names the key
        return value

    @field_validator("decontaminate")
    @classmethod
    def _check_decontaminate(cls, splits: list[str]) -> list[str]:
        for split in splits:
            if not isinstance(split, str) or not split.strip():
                raise ValueError(f"expected split names (e.g. [test]), got {split!r}")
        if len(set(splits)) != len(splits):
            raise ValueError(f"a split is named twice: {splits}")
        return splits

    @model_validator(mode="after")
    def _check_decontaminate_splits(self):
        problem = decontamination_problem(self)
        if problem is not None:
            raise ValueError(problem)
        return self

    @field_validator("path")
    @classmethod
    def _check_path(cls, path: str) -> str:
        return local_path(path, folder=True)

    @field_validator("mined_negatives", "pseudo_queries")
    @classmethod
    def _check_mined(cls, path: str | None) -> str | None:
        return local_path(path, folder=False)

    @model_validator(mode="after")
    def _check_pseudo(self):
        check_pseudo_settings(self)
        return self


class TrainingSettings(Section):
    epochs: Annotated[float, bounds.EPOCHS] = 5
    """Passes over the training rows (fractions allowed); ``max_steps`` overrides it."""
    max_steps: Annotated[int, bounds.MAX_STEPS] = -1
    """-1: train for ``epochs``; a positive number of steps overrides them."""
    learning_rate: Annotated[float, bounds.LEARNING_RATE] = 2e-5
    """Peak learning rate (AdamW)."""
    scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup",
                       "cosine_with_restarts", "polynomial"] = "linear"
    """Learning-rate schedule after warmup (transformers' names)."""
    warmup_ratio: Annotated[float, bounds.WARMUP_RATIO] = 0.1
    """Fraction of the steps spent warming the learning rate up from 0."""
    weight_decay: Annotated[float, bounds.WEIGHT_DECAY] = 0.0
    """AdamW weight decay."""
    per_device_batch_size: Annotated[int, bounds.BATCH_SIZE] = 32
    """Rows per batch on each device (MNRL's in-batch negatives)."""
    gradient_accumulation_steps: Annotated[int, bounds.ACCUMULATION] = 1
    """Batches whose gradients are summed before each update."""
    bf16: bool | Literal["auto"] = "auto"
    """bfloat16 mixed precision (autocast; master weights stay float32); ``auto``: on where
    the device computes bf16 natively (CUDA GPU with bf16, CPU with AMX or AVX512-BF16),
    float32 elsewhere (emulated bf16 is slower); results.json records it (training_bf16)."""
    seed: Seed = 42
    """Seed of model initialisation, data order and sampling."""
    eval_steps: Annotated[int, bounds.STEPS] = 100
    """Evaluate on the dev split every this many optimizer steps."""
    save_steps: Annotated[int, bounds.STEPS] | None = None
    """Defaults to eval_steps (best-checkpoint selection needs a save at every eval)."""
    save_total_limit: Annotated[int, bounds.KEPT] = 2
    """Checkpoints kept; the best one is never deleted, so 2 keeps best + last."""
    logging_steps: Annotated[int, bounds.STEPS] = 10
    """Log the training loss every this many steps."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, slower."""
    dataloader_workers: Annotated[int, bounds.WORKERS] = 0
    """Data loader worker processes (0: load in the main process)."""
    on_nonfinite: Literal["stop", "skip"] = "stop"
    """A NaN/inf loss or gradient: ``stop`` the run before that update (no ``final/``), or
    ``skip`` the update and go on (counted in the logs and results)."""
    max_nonfinite_steps: Annotated[int, bounds.STEP_COUNT] = 10
    """With ``skip``: the run stops once more steps than this were skipped."""
    average_last: Annotated[int, bounds.AVERAGED] | None = None
    """Export the element-wise mean of the last N saved checkpoints instead of the best one
    (None: off); needs save_total_limit >= N + 1. TAPT only."""

    @field_validator("max_steps")
    @classmethod
    def _check_max_steps(cls, steps: int) -> int:
        if steps != -1 and steps < 1:  # transformers reads 0 and -5 as "use epochs"
            raise ValueError("must be -1 (train for training.epochs) or at least 1")
        return steps


class EvalSettings(GuardSettings):
    metric: Literal["binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"] = \
        "binary_ndcg@10"
    """Dev metric that chooses the best checkpoint."""
    batch_size: Annotated[int, bounds.BATCH_SIZE] = 64
    """Texts per encoding batch in dev/test evaluation."""
    top_k: Annotated[int, bounds.TOP_K] = 100
    """Passages retrieved per query (exact search)."""
    zero_shot: bool = True
    """Evaluate once before the first step so the dev curve starts at zero-shot."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Encoding precision of dev/test evaluation: ``auto`` is bfloat16 where the device
    computes it natively (as ``training.bf16: auto``), float32 elsewhere. Training's float32
    master weights are not touched."""
    max_tokens_per_batch: Annotated[int, bounds.TOKENS_PER_BATCH] | None = None
    """Padded tokens per encoding batch (default: batch_size x max_seq_length)."""
    require_beats_zero_shot: bool = False
    """Fail the run (after recording it, before export) when its best dev score is not above
    its zero-shot dev score; off: the run, ``results.json`` and the card only say so.
    Needs ``zero_shot``."""

    @model_validator(mode="after")
    def _check_gate_needs_zero_shot(self):
        if self.require_beats_zero_shot and not self.zero_shot:
            raise ValueError("eval.require_beats_zero_shot needs eval.zero_shot: true (the "
                             "zero-shot dev score is what the best checkpoint must beat)")
        return self


class ExportSettings(Section):
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Dtype of the exported safetensors weights."""


class TrackingSettings(Section):
    backend: Literal["none", "wandb", "tensorboard"] = "none"
    """Where training logs go: ``none``, ``wandb`` (needs a W&B login or WANDB_MODE=offline)
    or ``tensorboard``."""
    project: str = "tapt"
    """W&B project (``WANDB_PROJECT`` set wins)."""
    run_name: str | None = None
    """Run name in the tracker (default: the output folder's name)."""


class HubSettings(Section):
    """Push the export to the HuggingFace Hub at the end of the run (main process only).
    The token comes from huggingface_hub's usual places (``HF_TOKEN``, the login cache),
    never from a recipe; ``HF_ENDPOINT`` selects a private Hub mirror."""

    repo_id: str | None = None
    """``org/name``, checked by the Hub's rules (:func:`tapt.util.ids.hub_id_problem`)
    when the recipe is loaded; None: do not push."""
    private: bool = True
    """Create the repository private (an existing one keeps its visibility)."""
    revision: str | None = None
    """Branch to push to (created if needed); None: the default branch."""
    commit_message: str | None = None
    """Commit message of the push (default: ``tapt: <run folder name>``)."""
    license: str = "apache-2.0"
    """The license the model card must declare; anything else is refused before upload."""

    @field_validator("repo_id")
    @classmethod
    def _check_repo_id(cls, repo_id: str | None) -> str | None:
        problem = None if repo_id is None else hub_id_problem(repo_id)
        if problem:
            raise ValueError(f"not a Hub repository id: {problem}")
        return repo_id


def check_output_dir(path: str) -> str:
    """``output_dir`` with ``~`` expanded; an existing file there is refused."""
    path = os.path.expanduser(path)
    if Path(path).exists() and not Path(path).is_dir():
        raise ValueError(f"{path} is a file, not a run folder")
    return path


DataSection = TypeVar("DataSection", bound=Section)


class RunRecipe(Section, Generic[DataSection]):
    """The sections a TAPT and a DAPT recipe share (each names its own ``data`` section):
    the model, the schedule, dev evaluation, tracking, the run folder, the export and the
    Hub."""

    model: ModelSettings
    data: DataSection
    training: TrainingSettings = TrainingSettings()
    eval: EvalSettings = EvalSettings()
    tracking: TrackingSettings = TrackingSettings()
    output_dir: str
    """Run folder: checkpoints, metrics, results and the export (``final/``)."""
    export: ExportSettings = ExportSettings()
    hub: HubSettings = HubSettings()

    @field_validator("output_dir")
    @classmethod
    def _check_output_dir(cls, path: str) -> str:
        return check_output_dir(path)


class Recipe(RunRecipe[DataSettings]):
    """A TAPT recipe (``tapt train``)."""

    loss: LossSettings = LossSettings()

    @model_validator(mode="after")
    def _check_across_sections(self) -> Recipe:
        check_recipe(self)
        return self


def check_recipe(recipe: Recipe) -> None:
    """TAPT's cross-field checks (run by :class:`Recipe`'s validator, so at load): the best
    checkpoint needs saves on evaluation steps, mined negatives need a count, and the three
    splits must differ. Raises :class:`RecipeError` naming the keys."""
    training = recipe.training
    save_steps = training.save_steps or training.eval_steps
    if save_steps % training.eval_steps:
        raise RecipeError(f"training.save_steps ({save_steps}) must be a multiple of "
                          f"training.eval_steps ({training.eval_steps}) to keep the best "
                          "checkpoint")
    if bool(recipe.data.mined_negatives) != bool(recipe.data.negatives_per_query):
        raise RecipeError("data.mined_negatives and data.negatives_per_query go together: "
                          "give the tapt mine output and how many of its negatives per row")
    splits = (recipe.data.train_split, recipe.data.dev_split, recipe.data.test_split)
    if len(set(splits)) != 3:
        raise RecipeError(f"data.train_split, data.dev_split and data.test_split must differ "
                          f"(got {', '.join(splits)}): the best checkpoint and the test "
                          "metrics would be measured on training queries")
    recipe.loss.check_columns(recipe.data)
    check_weak_pairs(recipe)
    check_average_last(recipe)


def check_weak_pairs(recipe: Recipe) -> None:
    """Weak pairs are (query, positive) rows with no label and no group: refused with
    same-group batches and with the losses that need a label per row."""
    data = recipe.data
    if data.weak_pairs == "none":
        if data.weak_pairs_max is not None:
            raise RecipeError("data.weak_pairs_max needs data.weak_pairs (title or ict)")
        return
    if data.batch_by != "none":
        raise RecipeError(f"data.weak_pairs ({data.weak_pairs}) with data.batch_by "
                          f"({data.batch_by}): weak pairs have no group; use one of them")
    if recipe.loss.name in ("margin_mse", "distill_kl", "clear"):
        raise RecipeError(f"data.weak_pairs with loss.name {recipe.loss.name}: weak pairs "
                          "have no teacher scores or grades to distill")
