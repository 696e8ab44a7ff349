"""The ``loss:`` section of a TAPT recipe: which sentence-transformers loss, and its options."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    field_validator,
    model_validator,
)

from tapt.recipe.base import RecipeError, Section, local_path
from tapt.util import bounds


class LossSettings(Section):
    name: Literal["mnrl", "matryoshka", "cached_mnrl", "mnsrl", "gist", "cached_gist",
                  "margin_mse", "distill_kl", "clear"] = "mnrl"
    """``mnrl`` (in-batch negatives), ``matryoshka`` (MNRL at several widths),
    ``cached_mnrl`` (gradient cache: large batches in little memory), ``mnsrl`` (symmetric
    MNRL: query -> passage and passage -> query, one softmax each), ``gist`` /
    ``cached_gist`` (GISTEmbedLoss: MNRL whose in-batch negatives the ``guide`` model
    scores at least as close as the positive are masked), or a distillation
    loss on teacher scores and grades (tapt.training.distill): ``margin_mse`` (the
    student's score margins regress the targets' margins) or ``distill_kl`` (KL divergence
    between softmaxes over each row's passages, temperature 1/scale), or ``clear``
    (CLEAR's hinge whose margin shrinks where BM25 already separates the pair: train for
    the fused system; ``loss.teacher_scores`` from ``tapt score --teacher bm25``;
    tapt.training.clear_loss)."""
    scale: Annotated[float, bounds.LOGIT_SCALE] = 20.0
    """MNRL logit scale (inverse temperature; 20 = temperature 0.05); gist / cached_gist
    use temperature 1/scale."""
    gather_across_devices: bool = True
    """Use every rank's batch as in-batch negatives under DDP."""
    matryoshka_dims: Annotated[list[int], bounds.WIDTH] = [  # noqa: RUF012 (pydantic copies)
        768, 512, 256, 128, 64]
    """Matryoshka embedding widths, each at most the model's."""
    matryoshka_weights: Annotated[list[float], bounds.LOSS_WEIGHT] | None = None
    """One loss weight per width in ``matryoshka_dims`` (None: all 1)."""
    mini_batch_size: Annotated[int, bounds.BATCH_SIZE] = 32
    """cached_mnrl / cached_gist: the gradient-cache chunk size."""
    matryoshka: bool = False
    """Wrap the contrastive loss in MatryoshkaLoss at ``matryoshka_dims`` (``name:
    matryoshka`` is ``mnrl`` with this on)."""
    directions: list[Literal["query_to_doc", "query_to_query", "doc_to_query",
                             "doc_to_doc"]] = ["query_to_doc"]  # noqa: RUF012 (pydantic copies defaults)
    """mnrl / matryoshka / cached_mnrl: the similarity blocks in the softmax; query_to_doc
    (always) plus query_to_query, doc_to_query, doc_to_doc (all four: GTE's loss)."""
    partition_mode: Literal["joint", "per_direction"] = "joint"
    """mnrl family: one softmax over all ``directions`` (``joint``) or one per direction,
    averaged (``per_direction``: only query_to_doc and doc_to_query)."""
    hardness_mode: Literal["in_batch_negatives", "hard_negatives", "all_negatives"] | None = None
    """mnrl family: add ``hardness_strength`` x (detached cosine) to these negatives' logits
    (None: off)."""
    hardness_strength: Annotated[float, bounds.HARDNESS] = 0.0
    """mnrl family: the hardness weight (alpha; > 0 with ``hardness_mode``)."""
    guide: str = "self"
    """gist / cached_gist: the model that picks the negatives to mask: ``self`` (a frozen
    copy of the starting model, base weights before any LoRA adapter) or a model name."""
    margin_strategy: Literal["absolute", "relative"] = "absolute"
    """gist / cached_gist: mask a candidate the guide scores above the positive's score
    minus ``margin`` (``absolute``) or minus ``|score| x margin`` (``relative``)."""
    margin: Annotated[float, bounds.GIST_MARGIN] = 0.0
    """gist / cached_gist: the margin (0: mask only candidates the guide scores strictly
    above the positive; a duplicate of the positive ties and stays)."""
    teacher_scores: str | None = None
    """margin_mse / distill_kl: a ``tapt score`` output for the train split (needed unless
    ``grade_weight`` is 1)."""
    teacher_normalize: Literal["query_max", "none"] = "query_max"
    """Teacher scores per query divided by that query's largest absolute score
    (``query_max``: BM25's 5-30 become at most 1, comparable with grade targets and
    cosines), or used as they are (``none``)."""
    grade_targets: Annotated[dict[int, float], bounds.TRAINING_TARGET] = {  # noqa: RUF012
        3: 1.0, 2: 0.5, 1: 0.2, 0: 0.0}  # (pydantic copies defaults)
    """Target score per qrels grade for margin_mse / distill_kl (an unjudged, e.g. mined,
    passage has grade 0; a grade left out of the map is 0.0 for grade 0, else an error)."""
    clear_margin: Annotated[float, bounds.GIST_MARGIN] = 0.2
    """clear: xi, the cosine margin of a pair BM25 does not separate."""
    clear_weight: Annotated[float, bounds.HARDNESS] = 0.2
    """clear: lambda, how much BM25's normalised score gap of the pair lowers the margin."""
    grade_weight: Annotated[float, bounds.FRACTION] = 0.0
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
            target = bounds.number_from_text(target)  # YAML 1.1 reads 1e0 as a string
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
        distilling = self.name in ("margin_mse", "distill_kl", "clear")
        if self.name != "clear":
            used = [key for key in ("clear_margin", "clear_weight")
                    if getattr(self, key) != type(self).model_fields[key].default]
            if used:
                raise ValueError(f"loss.{used[0]} is for loss.name clear, not {self.name}")
        elif self.grade_weight > 0:
            raise ValueError("loss.grade_weight: clear's margins are the lexical teacher's "
                             "score gaps (loss.teacher_scores from tapt score --teacher bm25), "
                             "not grades; leave it 0")
        if not distilling:
            used = [key for key in ("teacher_scores", "grade_targets", "grade_weight",
                                    "teacher_normalize")
                    if getattr(self, key) != type(self).model_fields[key].default]
            if used:
                raise ValueError(f"loss.{used[0]} is for loss.name margin_mse, distill_kl or "
                                 f"clear, not {self.name}")
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

    def check_columns(self, data) -> None:  # data: the recipe's DataSettings (schema.py)
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
