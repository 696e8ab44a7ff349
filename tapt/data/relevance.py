"""Which qrels grades make a passage relevant, and which are training's explicit negatives.

Two conventions meet in BEIR folders:

- FormBench (``formbench``): 3 = anchor (relevant), 2 = hard negative, 1 = soft negative.
- BEIR (``beir``): SciFact, NFCorpus, FiQA, ... mark relevant passages with 1 (TREC-style
  sets such as TREC-COVID use 1 and 2): a grade >= 1 is relevant, graded nDCG uses the
  grades as gains, and training has no explicit negatives (in-batch ones, plus mined ones
  when given).

``auto`` (the default) picks ``formbench`` when the dataset's qrels hold a grade of 3 or
more, else ``beir``. ``--relevant-from N`` / ``data.relevant_from: N`` overrides it: a
grade >= N is relevant, N - 1 is the hard negative and N - 2 the soft negative (when >= 1),
so ``3`` is FormBench's rule and ``1`` BEIR's.

Example::

    rule = choose_rule("auto", max_grade=1)   # BEIR: grade >= 1 relevant
    rule.relevant_ids({"d1": 1, "d2": 0})     # ["d1"]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tapt.util.bounds import GRADE

MAX_GRADE = 1000
"""qrels scores must lie in [-MAX_GRADE, MAX_GRADE]: trec_eval allocates memory per grade
level (a score of 2**31 takes over 16 GB)."""

ANCHOR = 3
HARD_NEGATIVE = 2
SOFT_NEGATIVE = 1

@dataclass(frozen=True)
class RelevanceRule:
    """Grades: ``>= relevant_from`` relevant (training's anchors), ``hard_negative`` and
    ``soft_negative`` the explicit negatives of a training row (None: none)."""

    name: str
    relevant_from: int
    hard_negative: int | None = None
    soft_negative: int | None = None

    def is_relevant(self, grade: int) -> bool:
        return grade >= self.relevant_from

    def relevant_ids(self, judged: dict[str, int]) -> list[str]:
        """The relevant passages of one query, sorted."""
        return sorted(doc for doc, grade in judged.items() if grade >= self.relevant_from)

    def graded_ids(self, judged: dict[str, int], grade: int | None) -> list[str]:
        """The passages of one query judged exactly ``grade`` (none for None), sorted."""
        return [] if grade is None else sorted(d for d, g in judged.items() if g == grade)

    def describe(self) -> str:
        """One line for the console and the result files."""
        negatives = [f"{grade} {kind}" for grade, kind in ((self.hard_negative, "hard negative"),
                                                           (self.soft_negative, "soft negative"))
                     if grade is not None]
        training = (", ".join(negatives) if negatives
                    else "training negatives in-batch, plus mined ones if given")
        return f"{self.name} (grade >= {self.relevant_from} relevant; {training})"

    def to_dict(self) -> dict:
        return asdict(self)


FORMBENCH = RelevanceRule("formbench", ANCHOR, HARD_NEGATIVE, SOFT_NEGATIVE)
BEIR = RelevanceRule("beir", 1)


def choose_rule(relevant_from: int | str = "auto", max_grade: int | None = None
                ) -> RelevanceRule:
    """The rule for ``relevant_from`` (``auto`` or a grade >= 1); ``auto`` looks at the
    dataset's highest grade ``max_grade``."""
    if relevant_from == "auto":
        return FORMBENCH if max_grade is not None and max_grade >= ANCHOR else BEIR
    grade = parse_relevant_from(relevant_from)
    if grade == FORMBENCH.relevant_from:
        return FORMBENCH
    if grade == BEIR.relevant_from:
        return BEIR
    return RelevanceRule(f"grade >= {grade}", grade,
                         grade - 1 if grade - 1 >= 1 else None,
                         grade - 2 if grade - 2 >= 1 else None)


def parse_relevant_from(value: int | str) -> int | str:
    """``auto`` or a grade in [1, 1000] (:data:`tapt.util.bounds.GRADE`; an int or its decimal
    string); ValueError otherwise."""
    if value == "auto":
        return value
    grade = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        grade = int(value)
    if grade is None or not GRADE.contains(grade):
        raise ValueError(f"relevant_from must be auto or a grade >= 1 (0 and below mean "
                         f"judged non-relevant) and <= {GRADE.high:g} ({GRADE.why}), got "
                         f"{value!r}")
    return grade
