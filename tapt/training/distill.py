"""Distillation targets for ``loss.name: margin_mse | distill_kl``: teacher scores mixed with
targets from the qrels' grades.

Each passage of a training row (the columns of :func:`tapt.data.triplets.build_rows`: the
anchor, the hard and soft negatives, the mined ones) gets a target score

    target(q, p) = (1 - w) x teacher(q, p) + w x grade_targets[grade(q, p)]

with ``w = loss.grade_weight``, the teacher's score read from ``loss.teacher_scores`` (a
``tapt score`` output; with ``loss.teacher_normalize: query_max`` divided by the query's
largest absolute score) and ``grade(q, p)`` the qrels grade (0 for an unjudged, e.g. mined,
passage). FormBench's grades make the hard negative (2) a middle target between the anchor
(3) and the soft negative (1), instead of a plain negative: annotators rank hard above soft
only ~60% of the time, and these targets say "less relevant", not "irrelevant".

The row's ``label`` is, for ``margin_mse``, the margins ``target(q, positive) - target(q,
negative_k)`` (one per negative column); for ``distill_kl``, the targets of all its
passages ``[target(q, positive), target(q, negative_1), ...]``.

Example::

    labeler = Labeler(dataset, "train", recipe.loss, scores)
    rows = build_training_rows(dataset, "train", labels=labeler)
"""

from __future__ import annotations

from tapt.data.beir import BeirDataset
from tapt.recipe import LossSettings
from tapt.retrieval.teacher_scores import TeacherScores, read_teacher_scores


class Labeler:
    """A row's ids (column -> passage id, ``query`` -> query id) -> its ``label``."""

    def __init__(self, dataset: BeirDataset, split: str, settings: LossSettings,
                 teacher: TeacherScores | None) -> None:
        if settings.grade_weight < 1 and teacher is None:
            raise ValueError(f"loss.name {settings.name} needs loss.teacher_scores unless "
                             "loss.grade_weight is 1")
        self.qrels = dataset.split(split)
        self.settings = settings
        self.teacher = teacher
        self.query_scale: dict[str, float] = {}
        if teacher is not None and settings.teacher_normalize == "query_max":
            self.query_scale = {query_id: max(abs(score) for score in row.values()) or 1.0
                                for query_id, row in teacher.scores.items() if row}

    def grade_target(self, query_id: str, passage_id: str) -> float:
        """The target of the passage's grade for the query (``loss.grade_targets``)."""
        grade = self.qrels.get(query_id, {}).get(passage_id, 0)
        targets = self.settings.grade_targets
        if grade not in targets:
            if grade == 0:
                return 0.0
            raise ValueError(f"loss.grade_targets has no target for grade {grade} (query "
                             f"{query_id!r}, passage {passage_id!r}): give one, e.g. "
                             f"loss.grade_targets: {{{grade}: 0.5, ...}}")
        return float(targets[grade])

    def teacher_score(self, query_id: str, passage_id: str) -> float:
        """The teacher's score, normalised per query as the recipe says."""
        assert self.teacher is not None
        return self.teacher.score(query_id, passage_id) / self.query_scale.get(query_id, 1.0)

    def target(self, query_id: str, passage_id: str) -> float:
        """``(1 - w) x teacher + w x grade target``."""
        weight = self.settings.grade_weight
        grade = self.grade_target(query_id, passage_id) if weight > 0 else 0.0
        if weight >= 1:
            return grade
        return (1 - weight) * self.teacher_score(query_id, passage_id) + weight * grade

    def __call__(self, ids: dict[str, str]) -> float | list[float]:
        query_id = ids["query"]
        passages = [doc_id for column, doc_id in ids.items() if column != "query"]
        if len(passages) < 2:
            raise ValueError(f"loss.name {self.settings.name} needs at least one negative per "
                             f"row; query {query_id!r} has none (set "
                             "data.missing_hard_negative: drop, or add mined negatives: "
                             "data.mined_negatives)")
        targets = [self.target(query_id, doc_id) for doc_id in passages]
        if self.settings.name in ("margin_mse", "clear"):
            return [targets[0] - target for target in targets[1:]]
        return targets


def labeler_for(settings: LossSettings, dataset: BeirDataset, split: str,
                mined: str | None = None) -> Labeler | None:
    """The recipe's labeler (None for the in-batch losses); reads and validates
    ``loss.teacher_scores`` against the split and the mined-negatives file ``mined`` the
    rows use (``data.mined_negatives``)."""
    from tapt.training.losses import DISTILLATION

    if settings.name not in DISTILLATION:
        return None
    teacher = None
    if settings.grade_weight < 1:
        teacher = read_teacher_scores(settings.teacher_scores, dataset, split, mined=mined)
    return Labeler(dataset, split, settings, teacher)
