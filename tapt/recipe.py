"""Training recipes: a typed schema, YAML loading and dotted ``key=value`` overrides.

A recipe is checked in full before anything heavy starts: unknown keys and wrong types
are errors that name the key (``training.learning_rate: ...``). The schema holds every
constraint that needs no model or data: ranges (seeds in numpy's [0, 2**32 - 1]), no
boolean for a number, no empty text, Matryoshka dimensions, and paths written as paths
(``/``, ``./``, ``../``, ``~``) that must exist. Limits: a bare relative name
(``data/quickstart``) may be a Hub id or an earlier step's output and is checked when read;
a Matryoshka width above the model's is known only once the model loads.

Example::

    recipe = load_recipe("recipes/quickstart.yaml", ["training.epochs=1"])
    recipe.training.per_device_batch_size
"""

from __future__ import annotations

import os
import reprlib
import types
import typing
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from tapt.bounds import SEED_MAX
from tapt.data.relevance import parse_relevant_from
from tapt.families import registered_families
from tapt.ids import hub_id_problem
from tapt.recipe_keys import SchemaRow, closest_key, schema_rows
from tapt.redaction import redact_data

Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
"""A seed numpy takes (``numpy.random.seed``: a whole number in [0, 2**32 - 1])."""

EXPLICIT_PATH_PREFIXES = ("/", "./", "../", "~")


def is_explicit_path(text: str) -> bool:
    """Written as a local path (``/``, ``./``, ``../``, ``~``): such a value must exist when
    the recipe is loaded. A bare relative name (``data/quickstart``, ``runs/x/final``) may
    be a Hub id or what an earlier step writes (``tapt data synth``, ``tapt dapt``,
    ``tapt mine``), so it is checked when the run reads it."""
    return text.startswith(EXPLICIT_PATH_PREFIXES) or text in (".", "..")


def local_path(text: str | None, *, folder: bool) -> str | None:
    """``text`` with ``~`` expanded (nothing downstream expands it); an explicit path must
    be an existing ``folder`` (else an existing file)."""
    if text is None or not is_explicit_path(text):
        return text
    expanded = os.path.expanduser(text)
    path = Path(expanded)
    try:
        found, exists = (path.is_dir() if folder else path.is_file()), path.exists()
    except (OSError, ValueError) as err:  # a NUL byte, a name too long
        raise ValueError(f"not a usable path ({err})") from None
    if not found:
        problem = ("not a folder" if folder else "not a file") if exists else "no such " + (
            "folder" if folder else "file")
        raise ValueError(f"{problem}: {expanded} (a value written as a path, with /, ./, "
                         "../ or ~, must exist when the recipe is loaded)")
    return expanded


def annotation_types(annotation) -> set:
    """The classes an annotation admits, through ``X | None``, ``list[X]`` and
    ``Annotated`` (``Literal`` values are left out)."""
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return set()
    if origin in (typing.Union, types.UnionType, list, Annotated):
        return set().union(*(annotation_types(arg) for arg in typing.get_args(annotation)))
    return {annotation}


class Section(BaseModel):
    """A recipe section. Every field, in files and ``key=value`` overrides alike: a boolean
    is never a number (``true`` is not 1), and text is never empty (except the fields in
    ``may_be_empty``, where an empty string means something)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)  # docstrings: `tapt recipe schema`
    may_be_empty: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _strict_values(cls, value: Any, info: ValidationInfo) -> Any:
        leaves = annotation_types(cls.model_fields[info.field_name].annotation)
        items = value if isinstance(value, list) else [value]
        if leaves & {int, float} and bool not in leaves and \
                any(isinstance(item, bool) for item in items):
            raise ValueError("expected a number, got a boolean")
        if leaves - {type(None)} == {bool} and isinstance(value, (int, float)) and \
                not isinstance(value, bool):
            raise ValueError("expected true or false, got a number")
        if str in leaves and info.field_name not in cls.may_be_empty and \
                any(isinstance(item, str) and not item.strip() for item in items):
            raise ValueError("must not be empty")
        return value


class LoraSettings(Section):
    """LoRA adapters through peft; merged into the base weights at export."""

    enabled: bool = False
    """Train LoRA adapters instead of every weight."""
    r: int = Field(16, gt=0)
    """LoRA rank."""
    alpha: int = Field(32, gt=0)
    """LoRA scaling numerator (the update is scaled by alpha / r)."""
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
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
    """A registered family (``tapt.encoders.presets.registered_families``) or ``auto``."""
    max_seq_length: int | None = Field(None, gt=0)
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
    import hashlib
    import importlib
    import importlib.util
    import sys

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
    negatives_per_query: int = Field(0, ge=0)
    """Mined negatives per row (after the graded ones); needs ``mined_negatives``."""
    missing_hard_negative: Literal["drop", "pair"] = "drop"
    """A query without a hard negative: ``drop`` it, or train it as a (query, anchor)
    ``pair``."""
    with_title: bool = True
    """Encode passages as title + text (else the text only)."""
    dev_distractors: int | None = Field(20000, ge=0)
    """Dev sub-corpus: every judged dev passage plus this many distractors (None: all)."""
    dev_seed: Seed = 0
    """Seed of the dev sub-corpus's distractor sample."""
    lenient: bool = False
    """Accept empty passages and queries without an anchor (non-FormBench BEIR sets)."""
    relevant_from: Literal["auto"] | int = "auto"
    """Lowest relevant grade (binary metrics, training anchors): ``auto`` is 3 when the
    qrels hold a grade >= 3 (FormBench: 3 anchor, 2 hard, 1 soft negative), else 1 (BEIR:
    relevant passages as anchors, in-batch and mined negatives); see tapt.data.relevance."""
    batch_by: str = "none"
    """Batches from one group: ``none`` (random, no duplicate texts), ``title`` (the anchor
    passages' title: one patent per batch in FormBench), or ``label:FIELD`` (the anchors'
    ``labels.FIELD`` in corpus.jsonl); see tapt.training.grouped_batches."""

    @field_validator("batch_by")
    @classmethod
    def _check_batch_by(cls, value: str) -> str:
        if value in ("none", "title") or (value.startswith("label:") and value[6:].strip()):
            return value
        raise ValueError(f"expected none, title or label:FIELD, got {value!r}")

    @field_validator("relevant_from", mode="before")  # before coercion: True, 2.5
    @classmethod
    def _check_relevant_from(cls, value: Any) -> Any:
        parse_relevant_from(value)  # as a field validator, so that the error names the key
        return value

    @field_validator("path")
    @classmethod
    def _check_path(cls, path: str) -> str:
        return local_path(path, folder=True)

    @field_validator("mined_negatives")
    @classmethod
    def _check_mined(cls, path: str | None) -> str | None:
        return local_path(path, folder=False)


class LossSettings(Section):
    name: Literal["mnrl", "matryoshka", "cached_mnrl", "mnsrl", "gist", "cached_gist",
                  "margin_mse", "distill_kl"] = "mnrl"
    """``mnrl`` (in-batch negatives), ``matryoshka`` (MNRL at several widths),
    ``cached_mnrl`` (gradient cache: large batches in little memory), ``mnsrl`` (symmetric
    MNRL: query -> passage and passage -> query, one softmax each), ``gist`` /
    ``cached_gist`` (GISTEmbedLoss: MNRL whose in-batch negatives the ``guide`` model
    scores at least as close as the positive are masked), or a distillation
    loss on teacher scores and grades (tapt.training.distill): ``margin_mse`` (the
    student's score margins regress the targets' margins) or ``distill_kl`` (KL divergence
    between softmaxes over each row's passages, temperature 1/scale)."""
    scale: float = Field(20.0, gt=0)
    """MNRL logit scale (inverse temperature; 20 = temperature 0.05); gist / cached_gist
    use temperature 1/scale."""
    gather_across_devices: bool = True
    """Use every rank's batch as in-batch negatives under DDP."""
    matryoshka_dims: list[int] = [768, 512, 256, 128, 64]
    """Matryoshka embedding widths, each at most the model's."""
    matryoshka_weights: list[float] | None = None
    """One loss weight per width in ``matryoshka_dims`` (None: all 1)."""
    mini_batch_size: int = Field(32, gt=0)
    """cached_mnrl / cached_gist: the gradient-cache chunk size."""
    matryoshka: bool = False
    """Wrap the contrastive loss in MatryoshkaLoss at ``matryoshka_dims`` (``name:
    matryoshka`` is ``mnrl`` with this on)."""
    directions: list[Literal["query_to_doc", "query_to_query", "doc_to_query",
                             "doc_to_doc"]] = ["query_to_doc"]
    """mnrl / matryoshka / cached_mnrl: the similarity blocks in the softmax; query_to_doc
    (always) plus query_to_query, doc_to_query, doc_to_doc (all four: GTE's loss)."""
    partition_mode: Literal["joint", "per_direction"] = "joint"
    """mnrl family: one softmax over all ``directions`` (``joint``) or one per direction,
    averaged (``per_direction``: only query_to_doc and doc_to_query)."""
    hardness_mode: Literal["in_batch_negatives", "hard_negatives", "all_negatives"] | None = None
    """mnrl family: add ``hardness_strength`` x (detached cosine) to these negatives' logits
    (None: off)."""
    hardness_strength: float = Field(0.0, ge=0)
    """mnrl family: the hardness weight (alpha; > 0 with ``hardness_mode``)."""
    guide: str = "self"
    """gist / cached_gist: the model that picks the negatives to mask: ``self`` (a frozen
    copy of the starting model, base weights before any LoRA adapter) or a model name."""
    margin_strategy: Literal["absolute", "relative"] = "absolute"
    """gist / cached_gist: mask a candidate the guide scores above the positive's score
    minus ``margin`` (``absolute``) or minus ``|score| x margin`` (``relative``)."""
    margin: float = 0.0
    """gist / cached_gist: the margin (0: mask only candidates the guide scores strictly
    above the positive; a duplicate of the positive ties and stays)."""
    teacher_scores: str | None = None
    """margin_mse / distill_kl: a ``tapt score`` output for the train split (needed unless
    ``grade_weight`` is 1)."""
    teacher_normalize: Literal["query_max", "none"] = "query_max"
    """Teacher scores per query divided by that query's largest absolute score
    (``query_max``: BM25's 5-30 become at most 1, comparable with grade targets and
    cosines), or used as they are (``none``)."""
    grade_targets: dict[int, float] = {3: 1.0, 2: 0.5, 1: 0.2, 0: 0.0}
    """Target score per qrels grade for margin_mse / distill_kl (an unjudged, e.g. mined,
    passage has grade 0; a grade left out of the map is 0.0 for grade 0, else an error)."""
    grade_weight: float = Field(0.0, ge=0, le=1)
    """Mix of the targets: ``(1 - w) x teacher + w x grade target``; 1 trains on grades
    only (no teacher file)."""

    @field_validator("matryoshka_dims")
    @classmethod
    def _check_dims(cls, dims: list[int]) -> list[int]:
        # sentence-transformers' MatryoshkaLoss: at least one, each > 0 (it sorts them);
        # a repeated width would train it twice and lose one of its weights.
        if not dims:
            raise ValueError("give at least one dimension")
        if any(dim <= 0 for dim in dims):
            raise ValueError("every dimension must be positive")
        if len(set(dims)) != len(dims):
            raise ValueError("a dimension appears twice")
        return dims

    @field_validator("matryoshka_weights")
    @classmethod
    def _check_weights(cls, weights: list[float] | None) -> list[float] | None:
        if weights is not None and any(weight <= 0 for weight in weights):
            raise ValueError("every weight must be positive")
        return weights

    @field_validator("grade_targets", mode="before")
    @classmethod
    def _check_grade_targets(cls, targets: Any) -> Any:
        if not isinstance(targets, dict) or not targets:
            raise ValueError("expected a map of grade -> target score, e.g. {3: 1.0, 2: 0.5}")
        parsed = {}
        for grade, target in targets.items():
            if isinstance(grade, str) and grade.strip().isdigit():  # JSON keys: a saved recipe
                grade = int(grade)
            if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
                raise ValueError(f"grade {grade!r}: expected a whole number >= 0")
            if isinstance(target, bool) or not isinstance(target, (int, float)) or \
                    not abs(target) < float("inf"):
                raise ValueError(f"grade {grade}: expected a finite target score, got "
                                 f"{target!r}")
            parsed[grade] = target
        return parsed

    @field_validator("teacher_scores")
    @classmethod
    def _check_teacher_scores(cls, path: str | None) -> str | None:
        return local_path(path, folder=False)

    @model_validator(mode="after")
    def _check_distillation(self) -> LossSettings:
        distilling = self.name in ("margin_mse", "distill_kl")
        if not distilling:
            used = [key for key in ("teacher_scores", "grade_targets", "grade_weight",
                                    "teacher_normalize")
                    if getattr(self, key) != type(self).model_fields[key].default]
            if used:
                raise ValueError(f"loss.{used[0]} is for loss.name margin_mse or distill_kl, "
                                 f"not {self.name}")
        elif self.grade_weight < 1 and not self.teacher_scores:
            raise ValueError(f"loss.name {self.name} needs loss.teacher_scores (a tapt score "
                             "output), or loss.grade_weight: 1 to train on grades only")
        elif self.grade_weight == 1 and self.teacher_scores:
            raise ValueError("loss.teacher_scores is unused with loss.grade_weight 1 (grades "
                             "only): drop one of them")
        return self

    @model_validator(mode="after")
    def _check_matryoshka(self) -> LossSettings:
        if self.matryoshka_weights is not None and \
                len(self.matryoshka_weights) != len(self.matryoshka_dims):
            raise ValueError("loss.matryoshka_weights must have one weight per dimension in "
                             "loss.matryoshka_dims")
        return self

    MNRL_FAMILY: ClassVar[tuple[str, ...]] = ("mnrl", "matryoshka", "cached_mnrl")
    """Names built on (Cached)MultipleNegativesRankingLoss with its own options."""
    GIST_FAMILY: ClassVar[tuple[str, ...]] = ("gist", "cached_gist")
    CONTRASTIVE: ClassVar[tuple[str, ...]] = (*MNRL_FAMILY, "mnsrl", *GIST_FAMILY)
    """Names MatryoshkaLoss may wrap (``loss.matryoshka``)."""

    @field_validator("directions")
    @classmethod
    def _check_directions(cls, directions: list[str]) -> list[str]:
        # MultipleNegativesRankingLoss: query_to_doc holds the positive pair, so it is required.
        if "query_to_doc" not in directions:
            raise ValueError("must include query_to_doc (it holds the positive pair)")
        if len(set(directions)) != len(directions):
            raise ValueError("a direction appears twice")
        return directions

    @field_validator("guide")
    @classmethod
    def _check_guide(cls, guide: str) -> str:
        return guide if guide == "self" else local_path(guide, folder=True)

    @model_validator(mode="after")
    def _check_loss_options(self) -> LossSettings:
        """Each option only with a loss whose sentence-transformers class takes it, and no
        combination that class refuses or ignores."""
        def changed(keys: tuple[str, ...]) -> list[str]:
            return [key for key in keys
                    if getattr(self, key) != type(self).model_fields[key].default]

        for keys, names, owner in (
                (("directions", "partition_mode", "hardness_mode", "hardness_strength"),
                 self.MNRL_FAMILY, "MultipleNegativesRankingLoss"),
                (("guide", "margin_strategy", "margin"), self.GIST_FAMILY, "GISTEmbedLoss")):
            used = changed(keys)
            if used and self.name not in names:
                raise ValueError(f"loss.{used[0]}: only for loss.name {' / '.join(names)} "
                                 f"({owner}), not {self.name}")
        if self.matryoshka and self.name not in self.CONTRASTIVE:
            raise ValueError(f"loss.matryoshka: only for loss.name {' / '.join(self.CONTRASTIVE)}"
                             f", not {self.name}")
        same_type = {"query_to_query", "doc_to_doc"} & set(self.directions)
        if self.partition_mode == "per_direction" and same_type:
            raise ValueError(f"loss.partition_mode: per_direction needs the positive pair in "
                             f"every direction's softmax, and {min(same_type)} has none "
                             "(use joint)")
        if self.hardness_mode is not None and self.hardness_strength == 0:
            raise ValueError(f"loss.hardness_strength: must be > 0 with loss.hardness_mode "
                             f"{self.hardness_mode} (0 weighs nothing)")
        if self.hardness_mode is None and self.hardness_strength > 0:
            raise ValueError("loss.hardness_strength: has no effect without loss.hardness_mode")
        return self

    def check_columns(self, data: DataSettings) -> None:
        """GISTEmbedLoss takes (query, positive) or (query, positive, negative) rows only:
        more negative columns are refused, naming the data key that adds them."""
        if self.name != "gist":
            return
        extra = [key for key, used in (("data.soft_negative", data.soft_negative),
                                       ("data.negatives_per_query", data.negatives_per_query))
                 if used]
        if extra:
            raise RecipeError(f"loss.name gist takes at most one negative column, and {extra[0]} "
                              "adds more: use loss.name cached_gist (any number of negatives)")


class TrainingSettings(Section):
    epochs: float = Field(5, gt=0)
    """Passes over the training rows (fractions allowed); ``max_steps`` overrides it."""
    max_steps: int = -1
    """-1: train for ``epochs``; a positive number of steps overrides them."""
    learning_rate: float = Field(2e-5, gt=0)
    """Peak learning rate (AdamW)."""
    scheduler: Literal["linear", "cosine", "constant", "constant_with_warmup",
                       "cosine_with_restarts", "polynomial"] = "linear"
    """Learning-rate schedule after warmup (transformers' names)."""
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    """Fraction of the steps spent warming the learning rate up from 0."""
    weight_decay: float = Field(0.0, ge=0)
    """AdamW weight decay."""
    per_device_batch_size: int = Field(32, gt=0)
    """Rows per batch on each device (MNRL's in-batch negatives)."""
    gradient_accumulation_steps: int = Field(1, gt=0)
    """Batches whose gradients are summed before each update."""
    bf16: bool = True
    """bfloat16 mixed precision (autocast; the master weights stay float32)."""
    seed: Seed = 42
    """Seed of model initialisation, data order and sampling."""
    eval_steps: int = Field(100, gt=0)
    """Evaluate on the dev split every this many optimizer steps."""
    save_steps: int | None = Field(None, gt=0)
    """Defaults to eval_steps (best-checkpoint selection needs a save at every eval)."""
    save_total_limit: int = Field(2, ge=1)
    """Checkpoints kept; the best one is never deleted, so 2 keeps best + last."""
    logging_steps: int = Field(10, gt=0)
    """Log the training loss every this many steps."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, slower."""
    dataloader_workers: int = Field(0, ge=0)
    """Data loader worker processes (0: load in the main process)."""
    on_nonfinite: Literal["stop", "skip"] = "stop"
    """A NaN/inf loss or gradient: ``stop`` the run before that update (no ``final/``), or
    ``skip`` the update and go on (counted in the logs and results)."""
    max_nonfinite_steps: int = Field(10, ge=0)
    """With ``skip``: the run stops once more steps than this were skipped."""

    @field_validator("max_steps")
    @classmethod
    def _check_max_steps(cls, steps: int) -> int:
        if steps != -1 and steps < 1:  # transformers reads 0 and -5 as "use epochs"
            raise ValueError("must be -1 (train for training.epochs) or at least 1")
        return steps


class EvalSettings(Section):
    metric: Literal["binary_ndcg@10", "graded_ndcg@10", "mrr@10", "recall@100"] = \
        "binary_ndcg@10"
    """Dev metric that chooses the best checkpoint."""
    batch_size: int = Field(64, gt=0)
    """Texts per encoding batch in dev/test evaluation."""
    top_k: int = Field(100, gt=0)
    """Passages retrieved per query (exact search)."""
    zero_shot: bool = True
    """Evaluate once before the first step so the dev curve starts at zero-shot."""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """Encoding precision of dev/test evaluation: ``auto`` is bfloat16 on a CUDA GPU that
    supports it, float32 elsewhere. Training's float32 master weights are not touched."""
    max_tokens_per_batch: int | None = Field(None, gt=0)
    """Padded tokens per encoding batch (default: batch_size x max_seq_length)."""


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
    """``org/name``, checked by the Hub's rules (:func:`tapt.data.sources.hub_id_problem`)
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


class Recipe(Section):
    """A TAPT recipe (``tapt train``)."""

    model: ModelSettings
    data: DataSettings
    loss: LossSettings = LossSettings()
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


class DaptDataSettings(Section):
    """Where DAPT's passages come from: a BEIR corpus (local or Hub), plain files, or both.
    Only passages are read, never queries or judgments."""

    path: str | None = None
    """BEIR folder or Hub dataset id: its corpus passages are the text."""
    config: str | None = None
    """Hub config or subfolder of ``path``."""
    revision: str | None = None
    """Hub dataset revision: branch, tag or commit (None: the default branch)."""
    files: list[str] = []
    """Plain files: ``.jsonl`` (a ``text`` field, optional ``title``) or ``.txt`` (one
    passage per line)."""
    with_title: bool = True
    """Passages as title + text (else the text only)."""
    max_passages: int | None = Field(None, gt=0)
    """Train on a seeded sample of at most this many passages."""
    held_out_fraction: float = Field(0.01, gt=0, lt=0.5)
    """Fraction of the passages held out for the held-out loss."""
    held_out_max: int = Field(1000, gt=0)
    """Held-out passages (for the held-out loss): this fraction, at most this many."""
    seed: Seed = 0
    """Seed of the passage sample and the held-out split."""
    dev_data: str | None = None
    """BEIR folder for the zero-shot retrieval evaluation at each save (default: ``path``)."""
    dev_split: str | None = "dev"
    """Split of that BEIR data to evaluate; None: no retrieval evaluation."""
    dev_distractors: int | None = Field(20000, ge=0)
    """Dev sub-corpus: every judged dev passage plus this many distractors (None: all)."""
    dev_seed: Seed = 0
    """Seed of the dev sub-corpus's distractor sample."""
    lenient: bool = False
    """Accept empty passages and dev queries without an anchor (non-FormBench BEIR sets)."""

    @field_validator("path", "dev_data")
    @classmethod
    def _check_folder(cls, path: str | None) -> str | None:
        return local_path(path, folder=True)

    @field_validator("files")
    @classmethod
    def _check_files(cls, files: list[str]) -> list[str]:
        for name in files:
            if Path(name).suffix.lower() not in (".jsonl", ".txt"):
                raise ValueError(f"{name}: expected a .jsonl or .txt file of passages")
        return [local_path(name, folder=False) for name in files]

    @model_validator(mode="after")
    def _check_source(self) -> DaptDataSettings:
        if not self.path and not self.files:
            raise ValueError("data needs a BEIR corpus (data.path) or plain files (data.files)")
        return self


class ObjectiveSettings(Section):
    """The DAPT objective."""

    name: Literal["mlm", "simcse"]
    """``mlm``: masked language modelling (encoder-only models: BERT, GTE, Nomic BERT).
    ``simcse``: unsupervised contrastive learning, each passage against itself under
    dropout noise, with in-batch negatives (any model, decoders such as Qwen3 too)."""
    mlm_probability: float = Field(0.15, gt=0, lt=1)
    """MLM: fraction of tokens masked."""
    whole_word_masking: bool = False
    """MLM: mask whole words rather than single tokens."""
    scale: float = Field(20.0, gt=0)
    """SimCSE logit scale (20 = temperature 0.05)."""
    dropout: float | None = Field(0.1, ge=0, lt=1)
    """SimCSE: dropout probability set on every dropout of the model while training (the
    noise that makes two views of a passage differ; Qwen3 has none of its own). None keeps
    the model's own. The exported config keeps the model's original values."""


class ChunkingSettings(Section):
    """How passages become training sequences of at most ``max_length`` tokens."""

    mode: Literal["chunk", "pack"] = "chunk"
    """``chunk``: windows of each passage, ``overlap`` tokens apart; ``pack``: passages
    concatenated and cut into full-length blocks (``mlm`` only)."""
    overlap: int | None = Field(None, ge=0)
    """Tokens shared by consecutive windows (default: an eighth of ``max_length``)."""
    max_length: int | None = Field(None, gt=8)
    """Tokens per sequence, special tokens included (default: the model's maximum
    length, at most 512)."""


class DaptRecipe(Section):
    """A DAPT recipe (``tapt dapt``): continued pretraining before TAPT."""

    model: ModelSettings
    data: DaptDataSettings
    objective: ObjectiveSettings
    chunking: ChunkingSettings = ChunkingSettings()
    training: TrainingSettings = TrainingSettings(epochs=1, learning_rate=5e-5)
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

    @model_validator(mode="after")
    def _check_objective(self) -> DaptRecipe:
        if self.objective.name == "simcse" and self.chunking.mode == "pack":
            raise ValueError("chunking.mode: pack mixes passages, which SimCSE cannot use "
                             "(a packed block is not one passage); use chunk")
        if self.chunking.overlap is not None and \
                self.chunking.overlap >= (self.chunking.max_length or 10**9):
            raise ValueError("chunking.overlap must be smaller than chunking.max_length")
        return self


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the file and the key."""


MAX_RECIPE_BYTES = 2**20
"""A larger file is not a recipe (and would take PyYAML minutes to parse)."""
_short_repr = reprlib.Repr()
_short_repr.maxstring = _short_repr.maxother = 80
_short_repr.maxlevel, _short_repr.maxlist, _short_repr.maxdict = 2, 4, 4


def parse_override(text: str) -> tuple[list[str], Any]:
    """``training.learning_rate=1e-5`` -> (["training", "learning_rate"], 1e-5).

    The value is read as YAML, so numbers, booleans, null and lists keep their types.
    """
    if len(text) > MAX_RECIPE_BYTES:
        raise RecipeError(f"override {_short_repr.repr(text)}: longer than "
                          f"{MAX_RECIPE_BYTES:,} characters")
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise RecipeError(f"override {text!r}: expected dotted.key=value")
    # YAML 1.1 reads "1e-5" as a string; the schema's float fields accept numeric strings.
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except (yaml.YAMLError, RecursionError) as err:
        problem = "nested too deeply" if isinstance(err, RecursionError) else \
            " ".join(str(err).split())
        raise RecipeError(f"override {_short_repr.repr(text)}: the value is not valid YAML "
                          f"({problem})") from None
    return key.strip().split("."), value


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Set each dotted key in a nested dict (sections are created as needed)."""
    for override in overrides:
        keys, value = parse_override(override)
        node = data
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise RecipeError(f"override {override!r}: '{key}' is not a section")
            node = child
        node[keys[-1]] = value
    return data


def format_validation_error(source: str, err: ValidationError,
                            schema: type[BaseModel] | None = None) -> str:
    """One line per problem, naming the dotted key; an unknown key names the closest key of
    ``schema`` when one is close (:func:`tapt.recipe_keys.closest_key`)."""
    lines = [f"{source}: invalid recipe"]
    for problem in err.errors():
        key = ".".join(str(part) for part in problem["loc"]) or "(top level)"
        message = problem["msg"]
        if problem["type"] == "extra_forbidden":
            message = "unknown key"
            meant = closest_key(problem["loc"], schema) if schema is not None else None
            if meant:
                message += f"; did you mean {meant}?"
        elif "input" in problem and problem["type"] not in ("missing",) and problem["loc"]:
            message = f"{message} (got {_short_repr.repr(problem['input'])})"
        lines.append(f"  {key}: {message}")
    return "\n".join(lines)


def describe_schema(kind: Literal["tapt", "dapt"] = "tapt") -> list[SchemaRow]:
    """Every key of a TAPT (``tapt train``) or DAPT (``tapt dapt``) recipe: dotted key, type,
    default and one line of help (what ``tapt recipe schema`` prints)."""
    if kind not in ("tapt", "dapt"):
        raise RecipeError(f"recipe kind must be tapt or dapt, got {kind!r}")
    return schema_rows(DaptRecipe if kind == "dapt" else Recipe)


def load_recipe(path: str | os.PathLike, overrides: list[str] | None = None,
                kind: Literal["tapt", "dapt", "auto"] = "tapt") -> Recipe | DaptRecipe:
    """Read a YAML recipe, apply ``key=value`` overrides and validate it.

    ``kind``: ``tapt`` (``tapt train``), ``dapt`` (``tapt dapt``) or ``auto`` (a recipe
    with an ``objective`` section is a DAPT recipe).
    """
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: recipe not found" if not path.exists() else
                          f"{path}: not a regular file (a folder, FIFO or device)")
    try:
        if path.stat().st_size > MAX_RECIPE_BYTES:
            raise RecipeError(f"{path}: larger than {MAX_RECIPE_BYTES:,} bytes; not a recipe")
        raw = path.read_bytes()
        text = raw.decode("utf-8")
    except OSError as err:
        raise RecipeError(f"{path}: cannot read ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        hint = " (UTF-16? save it as UTF-8)" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise RecipeError(f"{path}:{line}: not valid UTF-8 (byte {err.start + 1}){hint}") \
            from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise RecipeError(f"{path}: not valid YAML: {err}") from None
    except RecursionError:
        raise RecipeError(f"{path}: not valid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of sections")
    data.pop("fingerprint", None)  # a run folder's record of its inputs, not a setting
    apply_overrides(data, overrides or [])
    is_dapt = "objective" in data
    if kind == "tapt" and is_dapt:
        raise RecipeError(f"{path}: a DAPT recipe (it has an objective section); run it with "
                          "tapt dapt")
    if kind == "dapt" and not is_dapt:
        raise RecipeError(f"{path}: not a DAPT recipe (no objective section: mlm or simcse); "
                          "a TAPT recipe runs with tapt train")
    schema = DaptRecipe if is_dapt else Recipe
    try:
        return schema.model_validate(data)
    except ValidationError as err:
        raise RecipeError(format_validation_error(str(path), err, schema)) from None


LABEL_FIELDS = ("tracking.run_name", "tracking.project", "hub.commit_message")
"""Recipe values that are labels, not data: redacted as free text (token shapes too)."""


def recipe_record(recipe: Recipe | DaptRecipe) -> dict[str, Any]:
    """The fully resolved recipe as a run folder records it: the exact values of known
    secrets redacted in every value (paths and ids stay as they are otherwise), token-shaped
    strings too in the :data:`LABEL_FIELDS` (:func:`tapt.redaction.redact_data`)."""
    return redact_data(recipe.model_dump(mode="json"), where="the recipe",
                       free_text=LABEL_FIELDS)


def recipe_to_yaml(recipe: Recipe | DaptRecipe) -> str:
    """:func:`recipe_record` as YAML, redacted in the values, not the text: a bare ``***``
    would read as a YAML alias."""
    return yaml.safe_dump(recipe_record(recipe), sort_keys=False)

